# ruff: noqa: F811 - the systemd_sandbox fixture is imported by name and injected as a parameter
"""DoorPrivileges for real (issue 10 §6): sudo, a second user and systemd 252 in a sandbox.

``tlclaude`` exists only inside the private systemd instance (tests/fixtures/second_user.py
``user_in_systemd_sandbox``), whose /etc/sudoers.d is a folder of the instance's own — the
host's /etc/sudoers.d is never written (checked). The unit runs claude (the stand-in) in tmux
through ``exec tl-launch`` as ``User=tlclaude``, the shape of HANDOFF §7. Root applies; the
rule passes ``visudo -cf``; as the claude user exactly the unit's restart, its MainPID read and
the worker's scope go through ``sudo -n`` and nothing broader does; a switch run entirely by
that user (its pane's Stop hook → ``sudo -n systemd-run --scope`` → worker → ``sudo -n
systemctl restart``) activates; without the rule the switch fails at once, saying so.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
import uuid
from pathlib import Path

import pytest

from provision import engine
from provision.profile import profile_from_mapping
from provision.result import Context, Status
from provision.tasks.files import Directories, LaunchDropIn, RuntimeConfig
from provision.tasks.launcher import LaunchCommand, ResumeCommand
from provision.tasks.privileges import DoorPrivileges
from runtime.doors.pointer import write_pointer
from runtime.switch.store import Store
from tests.fakes import SandboxHost
from tests.fixtures.second_user import GID, NAME, UID, SandboxUser, user_in_systemd_sandbox
from tests.fixtures.standin_claude import project_dir_for, write_transcript
from tests.fixtures.switch_world import STANDIN, TURNS
from tests.fixtures.systemd_sandbox import SystemdSandbox, systemd_sandbox  # noqa: F401
from tests.fixtures.tmux import wait_for

pytestmark = pytest.mark.real_systemd
UNIT = "claude.service"
SOCKET = "threadline"
RULE = "/etc/sudoers.d/threadline-claude_service"
TL_REBUILD = str(Path(sys.executable).with_name("tl-rebuild"))
END = ("activated", "failed", "rolled_back", "cancelled")


def _chown_tree(top: Path) -> None:
    for path in (top, *top.rglob("*")):
        os.chown(path, UID, GID, follow_symlinks=False)


def claude_unit_as_user(sandbox: SystemdSandbox, user: SandboxUser) -> tuple[dict, str, Path]:
    """The user's unit: claude in tmux through tl-launch, ready."""
    share = sandbox.share
    work, cfg, tmux_dir = share / "srv" / "app", user.home / ".claude", share / "tmux"
    for folder in (work, tmux_dir, share / "bin", share / "lib", share / "etc"):
        folder.mkdir(parents=True)
    old = str(uuid.uuid4())
    write_transcript(project_dir_for(str(work), str(cfg)) / f"{old}.jsonl", old, str(work), TURNS)
    pointer = share / "session.pointer"
    write_pointer(pointer, old)
    real = share / "lib" / "claude"
    real.write_text(STANDIN.read_text())
    claude = share / "bin" / "claude"
    claude.write_text(f'#!/bin/sh\nif [ "$1" = --version ]; then echo "2.1.328 (stand-in)"; '
                      f'exit 0; fi\nexec {sys.executable} {real} "$@"\n')
    claude.chmod(0o755)
    for top in (work, tmux_dir, user.home, pointer):
        _chown_tree(top)
    tmux_dir.chmod(0o700)
    config = share / "etc" / "config.toml"
    command = (f"exec {Path(sys.executable).with_name('tl-launch')} --pointer {pointer} -- "
               f"{claude} --continue")
    sandbox.write_unit(UNIT, "\n".join([
        "[Service]", "Type=forking", f"User={NAME}", f"Group={NAME}", f"WorkingDirectory={work}",
        f"Environment=CLAUDE_CONFIG_DIR={cfg} HOME={user.home} TMUX_TMPDIR={tmux_dir}",
        f"Environment=STANDIN_RECORD={user.home}/standin.jsonl",
        f'Environment="STANDIN_HOOK={TL_REBUILD} hook-stop --config {config}"',
        f'ExecStart=/usr/bin/tmux -L {SOCKET} new-session -d -s claude -x 200 -y 50 "{command}"',
        f"ExecStop=/usr/bin/tmux -L {SOCKET} kill-server",
        f"StandardOutput=append:{share}/unit.log", f"StandardError=append:{share}/unit.log", ""]))
    sandbox.daemon_reload()
    sandbox.systemctl("start", UNIT)
    try:
        wait_ready(user, tmux_dir)
    except AssertionError:
        log = share / "unit.log"
        raise AssertionError(log.read_text() if log.exists() else "no unit log") from None
    profile = {
        "host": "sysd", "claude": {"user": NAME, "home": str(user.home), "config_dir": str(cfg),
                                   "binary": str(claude)},
        "door": {"kind": "systemd", "systemd": {"unit": UNIT, "pointer_path": str(pointer)},
                 "tmux": {"target": "claude:0.0", "socket_name": SOCKET}},
        "install": {"config_path": str(config), "state_dir": str(share / "state")}}
    return profile, old, tmux_dir


def tmux_as_user(user: SandboxUser, tmux_dir: Path, *args: str) -> str:
    done = user.run("tmux", "-L", SOCKET, *args, extra_env=[f"TMUX_TMPDIR={tmux_dir}"])
    return done.stdout if done.returncode == 0 else ""


def wait_ready(user: SandboxUser, tmux_dir: Path) -> None:
    wait_for(lambda: "ready" in tmux_as_user(user, tmux_dir, "capture-pane", "-p", "-t",
                                             "claude:0.0"), what="the user's claude ready")


def apply(sandbox: SystemdSandbox, user: SandboxUser, data: dict) -> dict[str, Status]:
    host = SandboxHost(sandbox, env={"TMUX_TMPDIR": str(sandbox.share / "tmux")},
                       private={"/etc/sudoers.d": user.sudoers})
    tasks = [LaunchCommand(), ResumeCommand(), Directories(), RuntimeConfig(), LaunchDropIn(),
             DoorPrivileges()]
    report = engine.run(tasks, host, Context(profile_from_mapping(data)))
    assert report.exit_code == 0, "\n".join(f"{r.task}: {r.message}" for r in report.results)
    return {r.task: r.status for r in report.results}


def wait_end(sandbox: SystemdSandbox, user: SandboxUser, tmux_dir: Path, config: str,
             op_id: str) -> dict:
    """The operation's record once it ended, read as the user reads it; on timeout, everything
    that says where the chain stopped (events, worker log, the pane, what the stand-in did).
    The bound is generous: a loaded 2-core machine runs the whole chain (the stand-in's Stop
    hook, ``tl-rebuild hook-stop`` and ``sudo -n``) inside a private systemd."""
    def ended() -> dict | None:
        shown = user.run(TL_REBUILD, "status", "--config", config, "--json",
                         "--operation", op_id)
        record = json.loads(shown.stdout) if shown.returncode == 0 else {}
        return record if record.get("state") in END else None

    def text(path: Path) -> str | None:
        return path.read_text(errors="replace") if path.exists() else None
    try:
        record = wait_for(ended, timeout=90, interval=0.3, what="the user's switch to end")
        assert isinstance(record, dict)
        return record
    except AssertionError:
        raise AssertionError(json.dumps({
            "events": Store(sandbox.share / "state").events(op_id),
            "worker_log": text(sandbox.share / "state" / "worker.log"),
            "standin_record": text(user.home / "standin.jsonl"),
            "unit_log": text(sandbox.share / "unit.log"),
            "pane": tmux_as_user(user, tmux_dir, "capture-pane", "-p", "-t", "claude:0.0")},
            indent=1)) from None


def sudo(user: SandboxUser, *argv: str) -> tuple[int, str]:
    done = user.run("sudo", "-n", *argv)
    return done.returncode, (done.stderr or done.stdout).strip()


def test_root_applies_a_sudoers_rule_that_lets_the_claude_user_switch_and_nothing_broader(
        systemd_sandbox: SystemdSandbox) -> None:
    sandbox = systemd_sandbox
    host_rules = sorted(os.listdir("/etc/sudoers.d")) if os.path.isdir("/etc/sudoers.d") else []
    if shutil.which("sudo") is None or shutil.which("visudo") is None:
        pytest.skip("sudo is not installed (.ci/run installs it with apt)")
    user = user_in_systemd_sandbox(sandbox)
    data, old, tmux_dir = claude_unit_as_user(sandbox, user)
    # Without the rule the claude user cannot restart its own unit.
    assert user.run("systemctl", "restart", UNIT).returncode != 0

    first = apply(sandbox, user, data)

    assert first["DoorPrivileges"] is Status.CHANGED
    rule = user.sudoers / RULE.rsplit("/", 1)[1]
    found = rule.stat()
    assert (found.st_uid, stat.S_IMODE(found.st_mode)) == (0, 0o440)
    assert not (user.sudoers / f"{rule.name}.new").exists()
    assert sandbox.exec("visudo", "-cf", RULE).returncode == 0
    assert sandbox.exec("visudo", "-c").returncode == 0  # the instance's whole sudoers too
    assert apply(sandbox, user, data)["DoorPrivileges"] is Status.OK
    config = data["install"]["config_path"]
    python = sys.executable
    scope = ("systemd-run", "--scope", "-p", "KillMode=process",
             "--unit=tl-worker-claude_service")
    refused = {
        "another unit": ("systemctl", "restart", "other.service"),
        "stop instead of restart": ("systemctl", "stop", UNIT),
        "a shell in the scope": (*scope, f"--uid={NAME}", "--", "/bin/sh", "-c", "id"),
        "the worker as root": (*scope, "--uid=root", "--", python, "-m", "runtime.switch.worker",
                               "--scheduled", "--config", config),
        "another config": (*scope, f"--uid={NAME}", "--", python, "-m", "runtime.switch.worker",
                           "--scheduled", "--config", "/tmp/other.toml"),
        "any other command": ("id",),
    }
    for what, argv in refused.items():
        rc, said = sudo(user, *argv)
        assert rc != 0 and "password is required" in said, (what, rc, said)

    # The switch, entirely as the user: request, Stop in its pane, worker through sudo.
    request = user.run(TL_REBUILD, "request", "--config", config, "--json", "--reason",
                       "sudo door", "--confirm", "REBUILD", "--session", old)
    assert request.returncode == 0, request.stderr
    op_id = json.loads(request.stdout)["operation_id"]
    main_before = sandbox.main_pid(UNIT)
    tmux_as_user(user, tmux_dir, "send-keys", "-t", "claude:0.0", "stop", "Enter")

    result = wait_end(sandbox, user, tmux_dir, config, op_id)
    log = sandbox.share / "state" / "worker.log"
    assert result["state"] == "activated", json.dumps(
        [result.get("failure"), log.read_text() if log.exists() else ""], indent=1)
    events = Store(sandbox.share / "state").events(op_id)
    spawned = next(e for e in events if e["phase"] == "worker_spawned")
    assert spawned["argv"][:3] == ["sudo", "-n", shutil.which("systemd-run")]
    assert sandbox.main_pid(UNIT) not in (0, main_before)
    assert sorted(os.listdir("/etc/sudoers.d")) == host_rules  # the host's, untouched


def test_without_the_rule_the_users_switch_fails_at_once_saying_sudo_refused(
        systemd_sandbox: SystemdSandbox) -> None:
    sandbox = systemd_sandbox
    if shutil.which("sudo") is None or shutil.which("visudo") is None:
        pytest.skip("sudo is not installed (.ci/run installs it with apt)")
    user = user_in_systemd_sandbox(sandbox)
    data, old, tmux_dir = claude_unit_as_user(sandbox, user)
    apply(sandbox, user, data)
    (user.sudoers / RULE.rsplit("/", 1)[1]).unlink()  # e.g. removed by hand after apply
    config = data["install"]["config_path"]
    request = user.run(TL_REBUILD, "request", "--config", config, "--json", "--reason",
                       "no rule", "--confirm", "REBUILD", "--session", old)
    op_id = json.loads(request.stdout)["operation_id"]
    main_before = sandbox.main_pid(UNIT)

    tmux_as_user(user, tmux_dir, "send-keys", "-t", "claude:0.0", "stop", "Enter")

    wait_end(sandbox, user, tmux_dir, config, op_id)
    op = Store(sandbox.share / "state").read(op_id)
    assert op.state.value == "failed" and op.failure is not None
    assert op.failure["code"] == "worker_spawn_failed"
    assert "sudo did not start the worker (rc=1)" in op.failure["message"]
    assert "a password is required" in op.failure["message"]
    assert sandbox.main_pid(UNIT) == main_before
