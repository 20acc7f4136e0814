"""``tl-provision accept`` and ``accept --drill`` against the real Claude Code CLI 2.1.328.

The user's machine is the e2e harness's (temp HOME, fake Messages API, the test channel server
``companion`` registered, interactive claude with ``--continue
--dangerously-load-development-channels server:companion`` in a private tmux
pane), installed by a real ``tl-provision apply`` on a host
profile. accept must pass every line; the drill must rebuild a scratch copy of the conversation
with the real CLI in its own tmux server while the user's pane, transcript, store and channel
server are left alone, and leave no process behind.
"""

from __future__ import annotations

import hashlib
import os
import pwd
from pathlib import Path

import pytest
import yaml

from provision import engine
from provision.accept import PASS, run_accept
from provision.cli import apply_tasks
from provision.host import LocalHost
from provision.profile import load_profile
from provision.result import Context
from tests.e2e.fake_api import Cue, FakeApi
from tests.e2e.harness import ClaudePane, Machine
from tests.fixtures.tmux import wait_for

pytestmark = [pytest.mark.real_claude, pytest.mark.real_tmux]

DRILL = ("drill scratch ready", "drill old claude running", "drill activated",
         "drill pane pid changed", "drill old transcript byte-identical", "drill backup present",
         "drill channel flags on the new process", "drill timeline complete", "drill no orphans")


def install(machine: Machine, pane: ClaudePane, root: Path) -> Path:
    """Write the host profile and run a real apply (hook merged, MCP registered, config)."""
    profile = {
        "host": "e2e-box", "connection": "local",
        "claude": {"user": pwd.getpwuid(os.getuid()).pw_name, "home": str(machine.home),
                   "binary": str(machine.claude)},
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
    return path


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_accept_and_drill_pass_on_a_provisioned_machine_with_the_real_cli(
        pane: ClaudePane, fake_api: FakeApi, machine: Machine, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The drill's scratch claude inherits accept's environment: the machine's (fake API,
    # channel feature flag from the disk cache, no marketplace clone), never the real one.
    for key in ("ANTHROPIC_BASE_URL", "CLAUDE_CODE_GB_DISK_CACHE_WHEN_TELEMETRY_OFF",
                "CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL", "TMPDIR"):
        monkeypatch.setenv(key, machine.env[key])
    fake_api.add_cue(Cue("RUN-BIG", "Bash", {"command": "python3 -c \"print('z' * 40000)\"",
                                             "description": "a big output"},
                         after_text="the big output was seen"))
    pane.start(pane.launch_argv())
    pane.type_prompt("the first words")
    pane.wait_said("echo[")
    pane.type_prompt("now RUN-BIG please")
    pane.wait_said("the big output was seen")
    pane.respawn(pane.launch_argv(continue_=True))
    profile = install(machine, pane, tmp_path / "install")
    transcripts = {p: digest(p) for p in machine.transcripts()}
    channel_starts = len(machine.channel_events("started"))
    pane_pid = pane.pane_pid()

    loaded = load_profile(profile)
    report = run_accept(loaded, LocalHost(loaded.host), drill=True, pause=0.5)

    seen = {line.name: line.status for line in report.lines}
    assert report.exit_code == 0, [(x.name, x.evidence) for x in report.failed]
    assert all(seen.get(name) == PASS for name in DRILL), seen
    assert seen["server channels registered [companion]"] == PASS
    assert seen["MCP lists 7 tools"] == PASS
    assert seen["live argv ≡ launch argv"] == PASS
    # the user's claude, transcripts and channel server were left alone
    assert pane.pane_pid() == pane_pid
    assert {p: digest(p) for p in machine.transcripts()} == transcripts
    assert len(machine.channel_events("started")) == channel_starts
    scratch = next(x.evidence for x in report.lines if x.name == "drill scratch ready")
    assert "companion" in scratch["mcp_servers_not_started"]
    assert not Path(scratch["root"]).exists()
    wait_for(lambda: pane.channel_listening(), what="the user's channel still listening")
    # the old scratch claude may append its own bookkeeping when respawn-pane -k ends it
    old = next(x.evidence for x in report.lines if x.name == "drill old transcript byte-identical")
    assert set(old["appended_by_the_old_claude"]) <= {"cost-state"}, old
    print(f"hook_ms={report.numbers['hook_ms']} drill_seconds={report.numbers['drill_seconds']}"
          f" drill_switch_seconds={report.numbers['drill_switch_seconds']}")


def test_the_drill_recognises_plugin_channels_through_stand_in_plugins_with_the_real_cli(
        pane: ClaudePane, fake_api: FakeApi, machine: Machine, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Two plugin channels, both shapes a real install has: one from a directory marketplace
    installed with the real ``claude plugin install`` (runs in place, behind ``sh -c``) and
    the official Telegram plugin's layout (runs from the cache). The real CLI in the scratch
    must start both stand-in plugins and the switch's health check recognise them; the user's
    plugin server is never started by the drill."""
    from tests.e2e.test_channel_health import MARKET, PLUGIN, install_plugin
    from tests.provision.test_accept_drill import install_official_plugin

    for key in ("ANTHROPIC_BASE_URL", "CLAUDE_CODE_GB_DISK_CACHE_WHEN_TELEMETRY_OFF",
                "CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL", "TMPDIR"):
        monkeypatch.setenv(key, machine.env[key])
    install_plugin(machine)
    install_official_plugin(machine.home)
    local, official = f"plugin:{PLUGIN}@{MARKET}", "plugin:telegram@claude-plugins-official"
    extra = (local, "--channels", official)  # local: a second development-channels value
    pane.start(pane.launch_argv(*extra))
    pane.type_prompt("the first words")
    pane.wait_said("echo[")
    pane.respawn(pane.launch_argv(*extra, continue_=True))
    profile = install(machine, pane, tmp_path / "install")
    plugin_log = machine.root / "channel-plugin.jsonl"
    wait_for(lambda: plugin_log.exists(), what="the user's plugin server started")
    starts = plugin_log.read_text().count('"started"')

    loaded = load_profile(profile)
    report = run_accept(loaded, LocalHost(loaded.host), drill=True, pause=0.5)

    seen = {line.name: line.status for line in report.lines}
    assert all(seen.get(name) == PASS for name in DRILL), \
        [(x.name, x.evidence) for x in report.failed]
    servers = next(x.evidence for x in report.lines
                   if x.name == "drill channel servers recognised")
    assert seen["drill channel servers recognised"] == PASS, servers
    assert servers["status"] == {"companion": "running", local: "running",
                                 official: "running"}
    assert servers["without_standin"] == {}
    assert plugin_log.read_text().count('"started"') == starts  # the drill never ran it
    print(f"drill_seconds={report.numbers['drill_seconds']}"
          f" drill_switch_seconds={report.numbers['drill_switch_seconds']}")
