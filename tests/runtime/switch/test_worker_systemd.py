# ruff: noqa: F811 - the systemd_sandbox fixture is imported by name and injected as a parameter
"""The real hook and worker through the systemd door, in a real systemd 252 (PID 1 in private
namespaces): the stand-in claude runs as a unit through tl-launch and fires
``tl-rebuild hook-stop`` from inside the unit's cgroup; the worker escapes with
``systemd-run --scope``, restarts the unit, and the new MainPID resumes the new session with
every channel flag."""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path

import pytest

from runtime.config import load_config
from runtime.doors.pointer import write_pointer
from runtime.switch.ops import request
from runtime.switch.store import Store
from tests.fixtures.deployment import install_stand_in
from tests.fixtures.standin_claude import project_dir_for, write_transcript
from tests.fixtures.switch_world import CHANNEL, STANDIN, TL_REBUILD, TURNS, toml_value
from tests.fixtures.systemd_sandbox import SystemdSandbox, systemd_sandbox  # noqa: F401
from tests.fixtures.tmux import wait_for

pytestmark = pytest.mark.real_systemd
UNIT = "tl-switch-test.service"
END = ("activated", "failed", "rolled_back", "cancelled")


def tl_launch() -> str:
    return str(Path(sys.executable).with_name("tl-launch"))


def setup_unit(sandbox: SystemdSandbox, resume_channels: tuple[str, ...] = CHANNEL,
               extra_env: str = "") -> tuple[Path, Path, str]:
    share = sandbox.share
    work = share / "srv" / "app"
    work.mkdir(parents=True)
    cfg = share / "cfg"
    project = project_dir_for(str(work), str(cfg))
    old = str(uuid.uuid4())
    write_transcript(project / f"{old}.jsonl", old, str(work), TURNS)
    pointer = share / "session.pointer"
    write_pointer(pointer, old)
    # laid out as npm installs claude: introspect identifies it by its install, not its name
    (share / "bin").mkdir(exist_ok=True)
    claude = install_stand_in(share / "bin",
                              f"#!{sys.executable}\n" + STANDIN.read_text().split("\n", 1)[1])
    config = share / "threadline.toml"
    config.write_text("\n".join([
        f"project_dir = {toml_value(str(project))}",
        f"workdir = {toml_value(str(work))}",
        f"state_dir = {toml_value(str(share / 'state'))}",
        "[switch]",
        'door = "systemd"',
        f"channel_flags = {toml_value(list(CHANNEL))}",
        "healthcheck_seconds = 1.0",
        "stable_seconds = 0.2",
        "[switch.systemd]",
        f"unit = {toml_value(UNIT)}",
        f"pointer_path = {toml_value(str(pointer))}",
    ]) + "\n")
    launch = " ".join([tl_launch(), "--pointer", str(pointer), "--", str(claude), "--continue",
                       *resume_channels])
    sandbox.write_unit(UNIT, (
        "[Unit]\nDescription=stand-in claude for the switch test\n[Service]\n"
        f"WorkingDirectory={work}\n"
        f"Environment=CLAUDE_CONFIG_DIR={cfg} HOME={share}/home "
        f"STANDIN_RECORD={share}/standin.jsonl STANDIN_TRIGGER={share}/trigger\n"
        f"Environment=\"STANDIN_HOOK={TL_REBUILD} hook-stop --config {config}\"\n"
        + (f"Environment={extra_env}\n" if extra_env else "")
        + f"ExecStart={launch}\n"
        f"StandardError=append:{share}/launch.log\n"
    ))
    sandbox.daemon_reload()
    sandbox.systemctl("start", UNIT)
    wait_for(lambda: starts(sandbox), what="the stand-in claude unit")
    return config, project, old


def starts(sandbox: SystemdSandbox) -> list[dict[str, object]]:
    path = sandbox.share / "standin.jsonl"
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return [r for r in rows if r["event"] == "start"]


def fire_stop(sandbox: SystemdSandbox) -> None:
    tmp = sandbox.share / "trigger.tmp"
    tmp.write_text("stop\n")
    tmp.rename(sandbox.share / "trigger")


def test_hook_in_the_unit_escapes_and_the_worker_restarts_the_unit_into_the_new_session(
    systemd_sandbox: SystemdSandbox,
) -> None:
    sandbox = systemd_sandbox
    config_path, project, old = setup_unit(sandbox)
    old_pid = sandbox.main_pid(UNIT)
    source = project / f"{old}.jsonl"
    before = source.read_bytes()
    op_id = request(load_config(config_path), "full", "REBUILD", session_id=old)["operation_id"]
    fire_stop(sandbox)
    store = Store(sandbox.share / "state")
    state = wait_for(lambda: store.read(op_id).state.value in END and store.read(op_id).state,
                     timeout=60, what="the operation to end")
    op = store.read(op_id)
    log = (sandbox.share / "state" / "worker.log")
    assert str(state) == "activated", (op.failure, log.read_text() if log.exists() else "")
    new_id = op.fact("new_session_id")
    new_pid = sandbox.main_pid(UNIT)
    assert new_pid != old_pid and op.fact("identity_after") == str(new_pid)
    last = starts(sandbox)[-1]
    assert last["argv"] == ["--resume", new_id, *CHANNEL]
    spawned = [e for e in store.events(op_id) if e["phase"] == "worker_spawned"][0]
    assert spawned["escaped_unit"] == UNIT and "--scope" in spawned["argv"]
    backup = Path(op.fact("backup")).read_bytes()
    assert source.read_bytes() == backup and backup.startswith(before)


def test_a_deaf_launch_argv_fails_health_under_systemd_and_the_old_session_is_resumed(
    systemd_sandbox: SystemdSandbox,
) -> None:
    sandbox = systemd_sandbox
    config_path, _, old = setup_unit(sandbox, resume_channels=())
    # The old process was deaf too, but the config demands the channel: health must refuse.
    op_id = request(load_config(config_path), "full", "REBUILD", session_id=old)["operation_id"]
    fire_stop(sandbox)
    store = Store(sandbox.share / "state")
    wait_for(lambda: store.read(op_id).state.value in END, timeout=60, what="the end")
    op = store.read(op_id)
    assert op.state.value == "rolled_back" and op.failure is not None
    assert "missing channel flag" in op.failure["message"]
    resumed = [e for e in store.events(op_id) if e["phase"] == "resumed_health"][0]
    assert str(resumed["pid"]) == str(sandbox.main_pid(UNIT))
    assert resumed["ok"] is True  # as healthy as it was: the old flags are all back
    wait_for(lambda: starts(sandbox)[-1]["argv"][:2] == ["--resume", old],
             what="the old session's start record")


def test_without_systemd_run_the_hook_fails_the_operation_instead_of_starting_a_doomed_worker(
    systemd_sandbox: SystemdSandbox,
) -> None:
    sandbox = systemd_sandbox
    config_path, _, old = setup_unit(sandbox, extra_env="PATH=/nonexistent")
    pid = sandbox.main_pid(UNIT)
    op_id = request(load_config(config_path), "full", "REBUILD", session_id=old)["operation_id"]
    fire_stop(sandbox)
    store = Store(sandbox.share / "state")
    wait_for(lambda: store.read(op_id).state.value in END, timeout=60, what="the end")
    op = store.read(op_id)
    assert op.state.value == "failed" and op.failure is not None
    assert op.failure["code"] == "cgroup_escape_failed"
    assert UNIT in op.failure["message"] and "systemd-run" in op.failure["message"]
    assert "worker_spawned" not in [e["phase"] for e in store.events(op_id)]
    assert sandbox.main_pid(UNIT) == pid
