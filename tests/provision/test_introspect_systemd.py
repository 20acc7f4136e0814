"""Introspection, apply and drift against a real systemd 252 (PID 1 in private namespaces).

The unit runs a stand-in claude from a shared directory; a drop-in resets ``ExecStart=`` and
sets the channels through ``Environment=``. apply installs the tl-launch drop-in, the unit is
restarted by hand, and a second apply changes nothing; an edit to the operator's drop-in
shows up as a stale resume argv.
"""

from __future__ import annotations

import os
import pwd
from pathlib import Path

import pytest

from provision import engine
from provision.drift import check_drift
from provision.introspect import introspect
from provision.profile import profile_from_mapping
from provision.result import Context, Status
from provision.tasks.files import Directories, LaunchDropIn, RuntimeConfig
from provision.tasks.launcher import LaunchCommand, RestartClaude, ResumeCommand
from provision.tasks.manifest import Manifest
from tests.fakes import SandboxHost
from tests.fixtures.deployment import install_stand_in
from tests.fixtures.systemd_sandbox import SystemdSandbox, systemd_sandbox  # noqa: F401
from tests.fixtures.tmux import wait_for

pytestmark = pytest.mark.real_systemd
UNIT = "claude-companion.service"


def _setup(sandbox: SystemdSandbox) -> tuple[Path, dict]:
    share = sandbox.share
    from runtime.paths import encode_project_dir

    store = f"home/.claude/projects/{encode_project_dir(str(share / 'work'))}"
    for sub in ("bin", store, "work", "etc", "state"):
        (share / sub).mkdir(parents=True, exist_ok=True)
    claude = install_stand_in(share / "bin")
    sandbox.write_unit(UNIT, f"""[Unit]
Description=stand-in claude
[Service]
WorkingDirectory={share}/work
ExecStart={claude} --print hello
""")
    _override(sandbox, "plugin:telegram@claude-plugins-official")
    sandbox.daemon_reload()
    sandbox.systemctl("start", UNIT)
    wait_for(lambda: sandbox.main_pid(UNIT), what="MainPID")
    profile = {
        "host": "sysd", "claude": {"user": pwd.getpwuid(os.getuid()).pw_name,
                                   "home": str(share / "home"), "workdir": f"{share}/work"},
        "door": {"kind": "systemd", "systemd": {"unit": UNIT}},
        "install": {"config_path": str(share / "etc" / "config.toml"),
                    "state_dir": str(share / "state")}}
    return claude, profile


def _override(sandbox: SystemdSandbox, channel: str) -> None:
    drop_in = sandbox.state / "etc-units" / f"{UNIT}.d"
    drop_in.mkdir(exist_ok=True)
    (drop_in / "override.conf").write_text(f"""[Service]
Environment="CH={channel}"
ExecStart=
ExecStart={sandbox.share}/bin/claude --continue --channels ${{CH}} \\
  --dangerously-load-development-channels server:companion
""")


def _cmdline(sandbox: SystemdSandbox) -> list[str]:
    return sandbox.exec("cat", f"/proc/{sandbox.main_pid(UNIT)}/cmdline").stdout.split("\0")


def _tasks(restart: bool = False) -> list:
    return [LaunchCommand(), ResumeCommand(), Directories(), RuntimeConfig(), LaunchDropIn(),
            Manifest(), RestartClaude(restart)]


def test_real_unit_with_drop_in_reset_then_apply_restart_and_drift(
        systemd_sandbox: SystemdSandbox) -> None:  # noqa: F811
    sandbox = systemd_sandbox
    claude, data = _setup(sandbox)
    profile = profile_from_mapping(data)
    host = SandboxHost(sandbox)
    expected = (str(claude), "--continue", "--channels", "plugin:telegram@claude-plugins-official",
                "--dangerously-load-development-channels", "server:companion")

    launch = introspect(host, profile)
    assert launch.argv == expected
    assert launch.live is not None and launch.live.pid == sandbox.main_pid(UNIT)
    assert launch.unit_files[-1].endswith(f"{UNIT}.d/override.conf")

    first = engine.run(_tasks(), host, Context(profile))
    assert first.exit_code == 0, [r.message for r in first.results]
    statuses = {r.task: r.status for r in first.results}
    assert statuses["LaunchDropIn"] is Status.CHANGED
    # The shell stand-in writes no session record, so --restart-claude would (rightly) refuse;
    # restart-ready is proven in tests/runtime/switch/test_restart.py and the real-CLI e2e tests.
    sandbox.systemctl("restart", UNIT)
    exec_start = sandbox.systemctl("show", "-p", "ExecStart", "--value", UNIT)
    assert "tl-launch" in exec_start and "--pointer" in exec_start
    wait_for(lambda: sandbox.main_pid(UNIT) and
             _cmdline(sandbox)[1:2] == [str(claude)], what="claude started through tl-launch")

    second = engine.run(_tasks(), host, Context(profile))
    assert second.count(Status.CHANGED) == 0, [r.message for r in second.results]
    assert check_drift(host, profile) == []

    _override(sandbox, "plugin:discord@claude-plugins-official")
    assert any(f.check == "unit needs daemon-reload" for f in check_drift(host, profile))
    sandbox.daemon_reload()
    findings = check_drift(host, profile)
    assert findings[0].check == "resume argv stale"
    assert "plugin:discord@claude-plugins-official" in findings[0].after
    assert "plugin:telegram@claude-plugins-official" in findings[0].before
    live = [f for f in findings if f.check.startswith("live argv differs from configured")]
    assert live and "plugin:telegram" in live[0].after


def test_tmux_session_started_by_a_real_unit_yields_the_claude_argv_inside_it(
        systemd_sandbox: SystemdSandbox) -> None:  # noqa: F811
    sandbox = systemd_sandbox
    share = sandbox.share
    for sub in ("bin", "work", "tmux"):
        (share / sub).mkdir(parents=True, exist_ok=True)
    (share / "tmux").chmod(0o700)
    claude = install_stand_in(share / "bin")
    sandbox.write_unit("companion-tmux.service", f"""[Service]
Type=forking
Environment=TMUX_TMPDIR={share}/tmux
ExecStart=/usr/bin/tmux -L tl new-session -d -s main -c {share}/work \\
  "PATH={share}/bin:/usr/bin:/bin claude --continue --channels plugin:telegram@x"
""")
    sandbox.daemon_reload()
    sandbox.systemctl("start", "companion-tmux.service")
    host = SandboxHost(sandbox, env={"TMUX_TMPDIR": f"{share}/tmux"})
    profile = profile_from_mapping({
        "host": "sysd", "claude": {"user": pwd.getpwuid(os.getuid()).pw_name,
                                   "home": str(share)},
        "door": {"kind": "tmux", "tmux": {"target": "main:0.0", "socket_name": "tl",
                                          "unit": "companion-tmux.service"}},
        "install": {"config_path": f"{share}/config.toml", "state_dir": f"{share}/state"}})
    launch = wait_for(lambda: (lambda found: found if found.live else None)(
        introspect(host, profile)), what="claude running in the unit's tmux pane")
    assert launch.argv == (str(claude), "--continue", "--channels", "plugin:telegram@x")
    assert launch.source == "systemd unit companion-tmux.service → tmux new-session command"
    assert launch.workdir == f"{share}/work"
