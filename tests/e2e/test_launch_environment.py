"""The launch environment is carried (issue 10 §5), with the real Claude Code CLI 2.1.328.

The user's claude keeps its sessions in a non-default ``CLAUDE_CONFIG_DIR`` that only the pane's
own command sets (``cd WORKDIR && CLAUDE_CONFIG_DIR=… exec claude --continue …``); the tmux server,
and so every shell a ``respawn-pane`` starts, does not have it — and the user's default
``~/.claude`` exists too (onboarded), as on a machine where claude was used before. A resume
without the variable looks for the session in ``~/.claude`` and fails with "No conversation
found" after the old process is gone. Installed the operator's way (host profile naming the
config dir + a real ``tl-provision apply``), a rebuild must activate: the new process runs in
the same config dir and still hears the channel; the audit shows only names and digests.
"""

from __future__ import annotations

import json
import os
import pwd
import shlex
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest
import yaml

from runtime.procfs import environ, value_digest
from tests.e2e.fake_api import Cue, FakeApi
from tests.e2e.harness import (
    ClaudePane,
    Machine,
    onboarding_state,
    register_channel,
    write_settings,
    write_user_config,
)
from tests.e2e.test_tmux_rebuild import wait_terminal
from tests.fixtures.tmux import TmuxServer, wait_for

pytestmark = [pytest.mark.real_claude, pytest.mark.real_tmux]


class ConfigDirMachine(Machine):
    """A machine whose claude uses ``<root>/claude config`` (a space in it) as CLAUDE_CONFIG_DIR."""

    @property
    def config_dir(self) -> Path:
        return self.root / "claude config"

    @property
    def claude_dir(self) -> Path:
        return self.config_dir

    @property
    def user_config(self) -> Path:  # 2.1.328: $CLAUDE_CONFIG_DIR/.claude.json (measured)
        return self.config_dir / ".claude.json"

    def run_claude(self, args: Sequence[str], timeout: float = 90.0,
                   cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(self.claude), *args], cwd=cwd or self.workdir,
                              env={**self.env, "CLAUDE_CONFIG_DIR": str(self.config_dir)},
                              capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)


class InlineEnvPane(ClaudePane):
    """The pane command sets the config dir inline, like ``VAR=x claude`` typed by a user."""

    def shell_command(self, argv: Sequence[str]) -> str:
        assert isinstance(self.machine, ConfigDirMachine)
        return (f"cd {shlex.quote(str(self.machine.workdir))} && "
                f"CLAUDE_CONFIG_DIR={shlex.quote(str(self.machine.config_dir))} "
                f"exec {shlex.join(argv)}")


@pytest.fixture
def cfg_machine(tmp_path: Path, claude_bin: Path, fake_api: FakeApi) -> ConfigDirMachine:
    machine = ConfigDirMachine(tmp_path / "machine", claude_bin, fake_api.url)
    machine.config_dir.mkdir(parents=True)
    assert "CLAUDE_CONFIG_DIR" not in machine.env  # tmux and every respawn shell lack it
    write_user_config(machine)
    write_settings(machine)
    register_channel(machine)
    # The default config exists too (claude was used here before): a resume that loses the
    # variable starts fine there and then finds no such conversation.
    (machine.home / ".claude").mkdir()
    (machine.home / ".claude.json").write_text(json.dumps(onboarding_state(machine.workdir)))
    return machine


@pytest.fixture
def cfg_pane(cfg_machine: ConfigDirMachine, tmux_server: TmuxServer):  # noqa: ANN201
    driver = InlineEnvPane(cfg_machine, tmux_server)
    try:
        yield driver
    finally:
        driver.close()


def install(machine: ConfigDirMachine, pane: ClaudePane, root: Path) -> Path:
    """A host profile naming the config dir, and a real ``tl-provision apply``."""
    from provision import engine
    from provision.cli import apply_tasks
    from provision.host import LocalHost
    from provision.profile import load_profile
    from provision.result import Context

    profile = {
        "host": "e2e-box", "connection": "local",
        "claude": {"user": pwd.getpwuid(os.getuid()).pw_name, "home": str(machine.home),
                   "config_dir": str(machine.config_dir), "binary": str(machine.claude)},
        "door": {"kind": "tmux", "tmux": {"target": pane.target,
                                          "socket_name": pane.tmux.socket_name}},
        "install": {"config_path": str(root / "etc" / "config.toml"),
                    "state_dir": str(root / "state")},
    }
    root.mkdir(parents=True, exist_ok=True)
    path = root / "host.yml"
    path.write_text(yaml.safe_dump(profile, sort_keys=False))
    loaded = load_profile(path)
    report = engine.run(apply_tasks(), LocalHost(loaded.host), Context(loaded))
    assert report.exit_code == 0, [(r.task, r.message) for r in report.results
                                   if r.status == "failed"]
    return root / "etc" / "config.toml"


def test_a_launch_in_a_non_default_config_dir_is_switched_and_resumes_in_the_same_dir(
        cfg_pane: InlineEnvPane, fake_api: FakeApi, cfg_machine: ConfigDirMachine,
        tmp_path: Path) -> None:
    machine, pane = cfg_machine, cfg_pane
    fake_api.add_cue(Cue("PLEASE-REBUILD", "mcp__threadline__thread_rebuild_request",
                         {"reason": "tool noise", "confirmation": "REBUILD"},
                         after_text="rebuild registered; it happens after this turn"))
    pane.start(pane.launch_argv())
    pane.type_prompt("the first words in the other config dir")
    pane.wait_said("echo[")
    pane.respawn(pane.launch_argv(continue_=True))
    config = install(machine, pane, tmp_path / "install")
    rendered = config.read_text()
    assert 'environment = ["CLAUDE_CONFIG_DIR"]' in rendered
    assert str(machine.config_dir) not in rendered.split("[switch]")[1].split("[switch.tmux]")[0]
    old_session = pane.respawn(pane.launch_argv(continue_=True))  # loads hook + MCP server
    old_pid = pane.pane_pid()
    assert machine.transcript(old_session).is_file()
    assert not (machine.home / ".claude" / "projects").exists()  # nothing in the default dir

    pane.type_prompt("please PLEASE-REBUILD now")
    op = wait_terminal(config)

    assert op["state"] == "activated", (op.get("failure"), pane.capture()[-1500:])
    new_pid = pane.pane_pid()
    pane.pids.add(new_pid)
    assert new_pid != old_pid
    assert (environ(new_pid) or {}).get("CLAUDE_CONFIG_DIR") == str(machine.config_dir)
    new_session = op["facts"]["new_session_id"]
    wait_for(lambda: (pane.session_record(new_pid) or {}).get("sessionId") == new_session,
             timeout=60, what="the new claude to run the rebuilt session")
    identity = next(e for e in op["events"] if e["phase"] == "identity")
    health = next(e for e in op["events"] if e["phase"] == "health")
    want = value_digest(str(machine.config_dir))
    assert identity["environment"] == {"CLAUDE_CONFIG_DIR": want}
    assert health["ok"] is True and health["environment"] == {"CLAUDE_CONFIG_DIR": want}
    wait_for(lambda: pane.channel_listening(new_pid), timeout=30, what="the new channel server")
    start = fake_api.last_index
    probe = "channel after the switch in the other config dir"
    machine.push_channel(probe)
    heard = fake_api.wait_for_text(probe, after=start, timeout=60)
    assert heard.session_id == new_session
