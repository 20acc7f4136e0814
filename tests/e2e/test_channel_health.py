"""Issue 10 §1 with the real Claude Code CLI 2.1.328: channel servers recognised by what they are.

The VPS of the incident: ``CLAUDE_CONFIG_DIR`` outside HOME, a channel server whose argv does
not contain its registration name, and (here) a second channel started through a wrapper script
that ``exec``s the server. Before the fix every switch there rolled back with "channel server(s)
not running". Plus a server that crashes after start (claude retries it once) and a plugin
channel installed with the real ``claude plugin install`` from an offline marketplace.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime import procfs as ident
from runtime.switch import health
from tests.e2e.fake_api import FakeApi
from tests.e2e.harness import (
    CHANNEL_FLAGS,
    CHANNEL_NAME,
    ClaudePane,
    Machine,
    channel_argv,
    prepare_machine,
    register_mcp,
    register_wrapped_channel,
)
from tests.e2e.oracle import read_jsonl
from tests.e2e.test_tmux_rebuild import provision_and_launch, wait_terminal
from tests.fixtures.tmux import TmuxServer, wait_for

pytestmark = [pytest.mark.real_claude, pytest.mark.real_tmux]

SECOND = "relay"
TAG = "b2"  # the second channel's files: nothing in its argv names it


@pytest.fixture
def vps(tmp_path: Path, claude_bin: Path, fake_api: FakeApi) -> Machine:
    """A machine with a non-default CLAUDE_CONFIG_DIR, as on the VPS of issue 10."""
    return prepare_machine(tmp_path / "machine", claude_bin, fake_api.url, custom_config_dir=True)


@pytest.fixture
def vps_pane(vps: Machine, tmux_server: TmuxServer) -> Iterator[ClaudePane]:
    driver = ClaudePane(vps, tmux_server)
    try:
        yield driver
    finally:
        driver.close()


def two_channels(pane: ClaudePane) -> None:
    """Launch with both development channels (one flag, two values)."""
    flags = [CHANNEL_FLAGS[0], CHANNEL_FLAGS[1], f"server:{SECOND}"]

    def launch_argv(*extra: str, channel: bool = True, resume: str | None = None,
                    continue_: bool = False) -> list[str]:
        argv = [str(pane.machine.claude), *(["--continue"] if continue_ else [])]
        argv += ["--resume", resume] if resume else []
        return argv + (flags if channel else []) + list(extra)
    pane.launch_argv = launch_argv  # type: ignore[method-assign]


def children_of(pid: int) -> list[int]:
    return [child for child, parent in ident.descendant_pairs(pid) if parent == pid]


def test_servers_without_their_name_in_argv_and_behind_a_wrapper_keep_the_switch_activated(
        vps_pane: ClaudePane, fake_api: FakeApi, vps: Machine, tmp_path: Path) -> None:
    script = register_wrapped_channel(vps, SECOND, tag=TAG)
    assert vps.user_config == Path(vps.env["CLAUDE_CONFIG_DIR"]) / ".claude.json"
    registered = json.loads(vps.user_config.read_text())["mcpServers"]
    for name in (CHANNEL_NAME, SECOND):  # the shape of the incident: no name in any argv
        spec = registered[name]
        assert not any(name in token for token in [spec["command"], *spec["args"]])
    two_channels(vps_pane)
    config, _old = provision_and_launch(vps_pane, fake_api, vps, tmp_path)

    vps_pane.type_prompt("please PLEASE-REBUILD now")
    op = wait_terminal(config)

    assert op["state"] == "activated", (op.get("failure"), vps_pane.capture()[-1500:])
    new_pid = vps_pane.pane_pid()
    vps_pane.pids.add(new_pid)
    checked = next(e for e in op["events"] if e["phase"] == "health")
    servers = checked["channel_servers"]
    assert servers[CHANNEL_NAME]["status"] == servers[SECOND]["status"] == "running"
    assert checked["channel_config"]["claude_json"] == str(vps.user_config)
    for name in (CHANNEL_NAME, SECOND):  # direct children of the new claude, as spawned
        assert set(servers[name]["pids"]) <= set(children_of(checked["pid"]))
    wrapped = servers[SECOND]["pids"][0]
    assert str(script) not in " ".join(ident.cmdline(wrapped) or ())  # exec'd: script gone
    # The second channel still reaches the model of the new session.
    probe = f"relay after switch {uuid.uuid4().hex[:6]}"
    wait_for(lambda: any(e.get("ppid") == new_pid for e in read_jsonl(
        vps.root / f"channel-{TAG}.jsonl") if e.get("event") == "listening"),
        timeout=30, what="the wrapped channel under the new claude to listen")
    start = fake_api.last_index
    spool = vps.root / f"spool-{TAG}"
    (spool / "probe.tmp").write_text(probe)
    os.rename(spool / "probe.tmp", spool / "probe.txt")
    heard = fake_api.wait_for_text(probe, after=start, timeout=60)
    assert heard.session_id == op["facts"]["new_session_id"]


def test_a_server_that_crashes_after_start_rolls_back_and_the_old_session_is_judged_alike(
        vps_pane: ClaudePane, fake_api: FakeApi, vps: Machine, tmp_path: Path) -> None:
    register_mcp(vps, SECOND, channel_argv(vps, "--exit-after", "0.5", tag=TAG))
    two_channels(vps_pane)
    config, old_session = provision_and_launch(vps_pane, fake_api, vps, tmp_path)

    vps_pane.type_prompt("please PLEASE-REBUILD now")
    op = wait_terminal(config)

    assert op["state"] == "rolled_back", op
    assert op["failure"]["code"] == "unhealthy"
    message = op["failure"]["message"]
    assert message.startswith(f"channel server(s) not running: {SECOND} (")
    # The resumed old session runs the same crashing server: its record says so, truthfully.
    assert f"the resumed old session is not healthy either: channel server(s) not running: " \
           f"{SECOND}" in message
    assert op["facts"]["resumed_healthy"] is False
    checked = next(e for e in op["events"] if e["phase"] == "health")
    assert checked["channel_servers"][CHANNEL_NAME]["status"] == "running"
    crashes = [e for e in read_jsonl(vps.root / f"channel-{TAG}.jsonl")
               if e.get("event") == "crash" and e.get("ppid") == checked["pid"]]
    assert crashes  # it did start under the new claude, then died
    wait_for(lambda: (vps_pane.session_record() or {}).get("sessionId") == old_session,
             timeout=60, what="the pane to run the old session again")
    vps_pane.pids.add(vps_pane.pane_pid())


PLUGIN, MARKET = "tgx", "offline-mkt"


def install_plugin(machine: Machine) -> Path:
    """A directory marketplace whose plugin starts the channel server through ``sh -c``."""
    market = machine.root / "market"
    plugin_dir = market / "plugins" / "bridge"
    (market / ".claude-plugin").mkdir(parents=True)
    (plugin_dir / ".claude-plugin").mkdir(parents=True)
    (market / ".claude-plugin" / "marketplace.json").write_text(json.dumps({
        "name": MARKET, "owner": {"name": "tests"},
        "plugins": [{"name": PLUGIN, "source": "./plugins/bridge", "version": "1.0.0"}]}))
    (plugin_dir / ".claude-plugin" / "plugin.json").write_text(
        json.dumps({"name": PLUGIN, "version": "1.0.0"}))
    argv = channel_argv(machine, tag="plugin")
    command = " ".join(json.dumps(token) for token in argv)
    (plugin_dir / ".mcp.json").write_text(json.dumps({"mcpServers": {"bridge": {
        "command": "sh", "args": ["-c", f'cd "${{CLAUDE_PLUGIN_ROOT}}" && exec {command}']}}}))
    for args in (["plugin", "marketplace", "add", str(market)],
                 ["plugin", "install", f"{PLUGIN}@{MARKET}"]):
        done = machine.run_claude(args, timeout=60)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
    return plugin_dir


def test_a_plugin_channel_is_recognised_by_its_install_root_and_session(
        tmp_path: Path, claude_bin: Path, fake_api: FakeApi, tmux_server: TmuxServer) -> None:
    machine = prepare_machine(tmp_path / "m", claude_bin, fake_api.url, custom_config_dir=True)
    plugin_dir = install_plugin(machine)
    installed = json.loads((machine.claude_dir / "plugins" / "installed_plugins.json")
                           .read_text())["plugins"][f"{PLUGIN}@{MARKET}"][0]
    pane = ClaudePane(machine, tmux_server)
    try:
        flags = [CHANNEL_FLAGS[0], CHANNEL_FLAGS[1], f"plugin:{PLUGIN}@{MARKET}"]
        pane.start([str(claude_bin), *flags])
        pane.type_prompt("the first words")
        pane.wait_said("echo[")
        session = pane.respawn([str(claude_bin), "--continue", *flags])
        pid = pane.pane_pid()
        pane.pids.add(pid)

        report = health.channels_ready(pid, (f"plugin:{PLUGIN}@{MARKET}", CHANNEL_NAME),
                                       session_id=session, window=30)

        assert report.ok, report.reason
        found = report.evidence["channel_servers"][f"plugin:{PLUGIN}@{MARKET}"]
        assert found["servers"][0]["name"] == f"plugin:{PLUGIN}:bridge"
        [server] = found["pids"]
        environ = ident.environ(server) or {}
        # A directory marketplace runs the plugin in place, not from installPath's cache copy.
        assert environ.get("CLAUDE_PLUGIN_ROOT") == str(plugin_dir)
        assert installed["installPath"] != str(plugin_dir)
        assert environ.get("CLAUDE_CODE_SESSION_ID") == session
        # Not under the process asked about: the running plugin server never counts for it.
        bystander = subprocess.Popen(["sleep", "60"], env=machine.env)
        try:
            other = health.channels_ready(bystander.pid, (f"plugin:{PLUGIN}@{MARKET}",),
                                          session_id=session, window=0.2)
        finally:
            bystander.kill()
            bystander.wait(timeout=10)
        assert not other.ok and f"plugin:{PLUGIN}@{MARKET}" in other.reason
    finally:
        pane.close()


def test_a_switch_with_a_plugin_channel_activates_and_checks_the_plugin_server(
        tmp_path: Path, claude_bin: Path, fake_api: FakeApi, tmux_server: TmuxServer) -> None:
    """The real worker's health check recognises the plugin's server under the new claude."""
    machine = prepare_machine(tmp_path / "m", claude_bin, fake_api.url, custom_config_dir=True)
    install_plugin(machine)
    plugin = f"plugin:{PLUGIN}@{MARKET}"
    pane = ClaudePane(machine, tmux_server)
    flags = [CHANNEL_FLAGS[0], CHANNEL_FLAGS[1], plugin]

    def launch_argv(*extra: str, channel: bool = True, resume: str | None = None,
                    continue_: bool = False) -> list[str]:
        argv = [str(claude_bin), *(["--continue"] if continue_ else [])]
        return argv + (["--resume", resume] if resume else []) + flags + list(extra)
    pane.launch_argv = launch_argv  # type: ignore[method-assign]
    try:
        config, _old = provision_and_launch(pane, fake_api, machine, tmp_path)
        assert f'"{plugin}"' in config.read_text()  # rendered into expected_channel_servers
        pane.type_prompt("please PLEASE-REBUILD now")
        op = wait_terminal(config)
        assert op["state"] == "activated", (op.get("failure"), pane.capture()[-1500:])
        pane.pids.add(pane.pane_pid())
        checked = next(e for e in op["events"] if e["phase"] == "health")
        found = checked["channel_servers"][plugin]
        assert found["status"] == "running" and len(found["pids"]) == 1
        assert checked["channel_servers"][CHANNEL_NAME]["status"] == "running"
        assert checked["reason"] == "healthy"
    finally:
        pane.close()
