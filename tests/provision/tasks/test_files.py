"""Directories and rendered files through the engine on a fake host (systemd and pointer doors)."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

from provision import engine
from provision.profile import profile_from_mapping
from provision.result import Context, Status
from provision.tasks.files import Directories, LaunchDropIn, RunnerWrapper, RuntimeConfig
from provision.tasks.launcher import LaunchCommand, ResumeCommand
from tests.fakes import FakeHost
from tests.provision.test_introspect import DROP_IN, FRAGMENT, LIVE, SHOW, SHOW_ARGS, UNIT

BIN = str(Path(sys.executable).parent)
DROP_IN_PATH = f"/etc/systemd/system/{UNIT}.d/threadline-launch.conf"
TASKS = [LaunchCommand(), ResumeCommand(), Directories(), RuntimeConfig(), LaunchDropIn(),
         RunnerWrapper()]


def _systemd():
    host = FakeHost()
    host.add_command(["systemctl", "cat", UNIT], FRAGMENT + DROP_IN)
    host.add_command([*SHOW_ARGS, UNIT], SHOW)
    host.add_command([LIVE[0], "--version"], "2.1.328 (Claude Code)\n")
    host.add_command(["systemctl", "daemon-reload"])
    host.files["/proc/52/cmdline"] = b"\0".join(a.encode() for a in LIVE) + b"\0"
    host.links["/proc/52/cwd"] = "/srv/app"
    host.executables.add(f"{BIN}/tl-launch")
    host.files[f"{BIN}/tl-launch"] = b"#!python\n"
    profile = profile_from_mapping({
        "host": "h", "claude": {"user": "claude", "home": "/home/claude"},
        "door": {"kind": "systemd", "systemd": {"unit": UNIT}},
        "install": {"config_path": "/etc/tl/config.toml", "state_dir": "/var/lib/tl"}})
    return host, profile


def _statuses(report) -> dict[str, Status]:
    return {r.task: r.status for r in report.results}


def test_systemd_door_renders_config_and_tl_launch_drop_in_then_settles() -> None:
    host, profile = _systemd()
    first = engine.run(TASKS, host, Context(profile))
    assert _statuses(first) == {
        "LaunchCommand": Status.OK, "ResumeCommand": Status.OK, "Directories": Status.CHANGED,
        "RuntimeConfig": Status.CHANGED, "LaunchDropIn": Status.CHANGED,
        "RunnerWrapper": Status.SKIPPED}, [r.message for r in first.results]
    assert ("systemctl", "daemon-reload") in host.ran
    drop_in = host.files[DROP_IN_PATH].decode()
    assert "ExecStart=\n" in drop_in
    assert f"ExecStart={BIN}/tl-launch --pointer /var/lib/tl/pointer -- " in drop_in
    config = tomllib.loads(host.files["/etc/tl/config.toml"].decode())
    assert config["switch"]["door"] == "systemd"
    assert config["switch"]["systemd"] == {"unit": UNIT, "pointer_path": "/var/lib/tl/pointer",
                                           "sudo_user": ""}  # claude is root here
    assert config["switch"]["resume_argv"][1:3] == ["--resume", "{session_id}"]
    assert host.dirs == {"/var/lib/tl": 0o700, "/etc/tl": 0o755}


def test_systemd_second_run_sees_its_own_drop_in_and_changes_nothing() -> None:
    host, profile = _systemd()
    engine.run(TASKS, host, Context(profile))
    # the unit now starts through tl-launch: what systemctl cat shows after daemon-reload
    host.add_command(["systemctl", "cat", UNIT], FRAGMENT + DROP_IN + "\n# " + DROP_IN_PATH
                     + "\n" + host.files[DROP_IN_PATH].decode())
    ran_before = len(host.written)
    ctx = Context(profile)
    second = engine.run(TASKS, host, ctx)
    assert second.count(Status.CHANGED) == 0, [r.message for r in second.results]
    assert len(host.written) == ran_before
    assert ctx.launch is not None and ctx.launch.via_tl_launch
    assert ctx.launch.argv == LIVE


def test_a_hand_edited_config_is_replaced_with_a_backup() -> None:
    host, profile = _systemd()
    engine.run(TASKS, host, Context(profile))
    host.files["/etc/tl/config.toml"] += b"# hand edit\n"
    report = engine.run(TASKS, host, Context(profile))
    result = next(r for r in report.results if r.task == "RuntimeConfig")
    assert result.status is Status.CHANGED
    assert result.message == "update /etc/tl/config.toml (backup kept)"
    assert host.files["/etc/tl/config.toml.bak~"].endswith(b"# hand edit\n")


def test_pointer_door_renders_an_executable_runner_wrapper() -> None:
    host = FakeHost(users={"w": (0, 0), "root": (0, 0)},
                    files={"/usr/local/bin/loop.sh": b"cd /srv/jobs\n/usr/local/bin/claude -p "
                                                     b"--continue \"next\"\n"})
    host.add_command(["/usr/local/bin/claude", "--version"], "2.1.328\n")
    host.executables.add(f"{BIN}/tl-rebuild")
    host.files[f"{BIN}/tl-rebuild"] = b"#!python\n"
    profile = profile_from_mapping({
        "host": "h", "claude": {"user": "w", "home": "/home/w"},
        "door": {"kind": "pointer", "pointer": {"path": "/var/lib/tl/pointer",
                                                "runner": "/usr/local/bin/loop.sh"}},
        "install": {"config_path": "/etc/tl/config.toml", "state_dir": "/var/lib/tl"}})
    report = engine.run(TASKS, host, Context(profile))
    assert _statuses(report)["RunnerWrapper"] is Status.CHANGED
    script = host.files["/var/lib/tl/bin/tl-runner"].decode()
    assert host.modes["/var/lib/tl/bin/tl-runner"] == 0o755
    assert 'exec /usr/local/bin/claude -p --resume "$session" next "$@"' in script
    assert f"{BIN}/tl-rebuild hook-stop --config /etc/tl/config.toml" in script
