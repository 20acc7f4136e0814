# ruff: noqa: F811 - the systemd_sandbox fixture is imported by name and injected as a parameter
"""``apply --restart-claude`` on the systemd door, in a real systemd 252 (private namespaces).

The unit has the shape of HANDOFF §7: ``Type=forking``, claude in tmux, started through
tl-launch. The stand-in claude (the switch tests' one, laid out as npm installs claude)
shows the development-channels warning on every start, writes its session record only once
the warning is answered and starts the channel server registered in its ``CLAUDE_CONFIG_DIR``,
like 2.1.328. apply introspects the pane command, leaves the unit's
ExecStart alone, and the restart comes back ready: warning answered by the door, session
record naming the session that ran before, the channel server up.
"""

from __future__ import annotations

import os
import pwd
import sys
import uuid
from pathlib import Path

import pytest

from provision import engine
from provision.errors import IntrospectError
from provision.introspect import introspect
from provision.profile import profile_from_mapping
from provision.result import Context, Status
from provision.tasks.files import Directories, LaunchDropIn, RuntimeConfig
from provision.tasks.launcher import LaunchCommand, RestartClaude, ResumeCommand
from provision.tasks.manifest import Manifest
from runtime.doors.pointer import write_pointer
from tests.fakes import SandboxHost
from tests.fixtures.deployment import install_stand_in
from tests.fixtures.standin_claude import (
    project_dir_for,
    register_server,
    sleeper_argv,
    write_transcript,
)
from tests.fixtures.switch_world import CHANNEL, STANDIN, TURNS
from tests.fixtures.systemd_sandbox import SystemdSandbox, systemd_sandbox  # noqa: F401
from tests.fixtures.tmux import wait_for

pytestmark = pytest.mark.real_systemd
UNIT = "claude.service"
SOCKET = "threadline"


def claude_in_tmux_unit(sandbox: SystemdSandbox, tl_launch: bool = True) -> tuple[dict, str]:
    share = sandbox.share
    work, cfg, tmux_dir = share / "srv" / "app", share / "cfg", share / "tmux"
    for folder in (work, tmux_dir, share / "bin", share / "home"):
        folder.mkdir(parents=True)
    tmux_dir.chmod(0o700)
    old = str(uuid.uuid4())
    write_transcript(project_dir_for(str(work), str(cfg)) / f"{old}.jsonl", old, str(work), TURNS)
    pointer = share / "session.pointer"
    write_pointer(pointer, old)
    # laid out as npm installs claude (introspect identifies it by its install, not its name)
    claude = install_stand_in(share / "bin", f"#!{sys.executable}\n" +
                              STANDIN.read_text().split("\n", 1)[1])
    # registered where the unit's claude reads it (CLAUDE_CONFIG_DIR), as `claude mcp add` does
    register_server(cfg / ".claude.json", "companion", sleeper_argv("unit"))
    command = f"{claude} --continue {' '.join(CHANNEL)}"
    if tl_launch:
        command = f"{Path(sys.executable).with_name('tl-launch')} --pointer {pointer} -- {command}"
    sandbox.write_unit(UNIT, "\n".join([
        "[Service]", "Type=forking", f"WorkingDirectory={work}",
        f"Environment=CLAUDE_CONFIG_DIR={cfg} HOME={share}/home TMUX_TMPDIR={tmux_dir}",
        "Environment=STANDIN_DEV_WARNING=1",
        f'ExecStart=/usr/bin/tmux -L {SOCKET} new-session -d -s claude -x 200 -y 50 "{command}"',
        f"ExecStop=/usr/bin/tmux -L {SOCKET} kill-server", ""]))
    sandbox.daemon_reload()
    sandbox.systemctl("start", UNIT)
    tmux = ("env", f"TMUX_TMPDIR={tmux_dir}", "tmux", "-L", SOCKET)
    wait_for(lambda: "local development" in sandbox.exec(
        *tmux, "capture-pane", "-p", "-t", "claude:0.0").stdout, what="the first warning")
    sandbox.exec(*tmux, "send-keys", "-t", "claude:0.0", "Enter", check=True)  # the user did
    profile = {
        "host": "sysd", "claude": {"user": pwd.getpwuid(os.getuid()).pw_name,
                                   "home": str(share / "home"), "config_dir": str(cfg)},
        "door": {"kind": "systemd", "systemd": {"unit": UNIT, "pointer_path": str(pointer)},
                 "tmux": {"target": "claude:0.0", "socket_name": SOCKET}},
        "install": {"config_path": str(share / "etc" / "config.toml"),
                    "state_dir": str(share / "state")}}
    return profile, old


def tasks() -> list:
    return [LaunchCommand(), ResumeCommand(), Directories(), RuntimeConfig(), LaunchDropIn(),
            Manifest(), RestartClaude(True)]


def test_apply_restart_claude_on_a_unit_running_claude_in_tmux_ends_ready(
        systemd_sandbox: SystemdSandbox) -> None:
    sandbox = systemd_sandbox
    data, old = claude_in_tmux_unit(sandbox)
    host = SandboxHost(sandbox, env={"TMUX_TMPDIR": str(sandbox.share / "tmux")})
    unit_text = (sandbox.state / "etc-units" / UNIT).read_text()
    main_before = sandbox.main_pid(UNIT)

    report = engine.run(tasks(), host, Context(profile_from_mapping(data)))

    results = {r.task: r for r in report.results}
    assert report.exit_code == 0, [(r.task, r.message) for r in report.results]
    assert results["LaunchDropIn"].status is Status.SKIPPED
    assert results["LaunchDropIn"].message == ("the unit already starts claude through "
                                               "tl-launch inside tmux")
    assert (sandbox.state / "etc-units" / UNIT).read_text() == unit_text
    assert not (sandbox.state / "etc-units" / f"{UNIT}.d").exists()
    restart = results["RestartClaude"]
    assert restart.status is Status.CHANGED
    assert any(n.startswith(f"ready: session {old} (pid ") and
               "warnings answered: 1" in n and "channel servers up: companion" in n
               for n in restart.notes), restart.notes
    assert sandbox.main_pid(UNIT) not in (0, main_before)


def test_a_unit_running_claude_in_tmux_without_tl_launch_is_refused_with_the_fix(
        systemd_sandbox: SystemdSandbox) -> None:
    sandbox = systemd_sandbox
    data, _ = claude_in_tmux_unit(sandbox, tl_launch=False)
    host = SandboxHost(sandbox, env={"TMUX_TMPDIR": str(sandbox.share / "tmux")})
    with pytest.raises(IntrospectError, match="runs claude in tmux without tl-launch"):
        introspect(host, profile_from_mapping(data))


def test_a_unit_whose_tl_launch_reads_another_pointer_is_refused_naming_both(
        systemd_sandbox: SystemdSandbox) -> None:
    sandbox = systemd_sandbox
    data, _ = claude_in_tmux_unit(sandbox)
    data["door"]["systemd"]["pointer_path"] = "/var/lib/threadline/other.pointer"
    host = SandboxHost(sandbox, env={"TMUX_TMPDIR": str(sandbox.share / "tmux")})
    with pytest.raises(IntrospectError, match=(
            f"reads pointer '{sandbox.share}/session.pointer' but the door writes "
            "'/var/lib/threadline/other.pointer'")):
        introspect(host, profile_from_mapping(data))
