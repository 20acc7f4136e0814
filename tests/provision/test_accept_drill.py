"""accept --drill: a full rebuild on a scratch tmux target, against a stand-in claude.

The deployment's ``claude`` is tests/fixtures/standin_claude.py here (it resumes only sessions
that exist in its cwd's project dir and prints "No conversation found" otherwise), so a drill
that resumed in the wrong place would fail like the real CLI. The host is installed by a real
``tl-provision apply`` (tests/provision/test_accept.py's ``installed``).
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

import pytest

from provision.accept import FAIL, PASS, SKIP, Checklist
from tests.fixtures.claude_cli import claude_bin  # noqa: F401 - fixture
from tests.fixtures.deployment import Deployment
from tests.fixtures.tmux import TmuxServer, wait_for
from tests.provision.test_accept import accept, evidence, installed  # noqa: F401 - fixture
from tests.provision.test_apply_tmux import ready  # noqa: F401 - fixture

pytestmark = [pytest.mark.real_tmux, pytest.mark.real_claude]

REPO = Path(__file__).resolve().parents[2]
STAND_IN = f"""#!{sys.executable}
import sys
sys.path.insert(0, {str(REPO)!r})
if sys.argv[1:2] == ["--version"]:
    print("2.1.328 (Claude Code stand-in)")
    sys.exit(0)
from tests.fixtures.standin_claude import main
sys.exit(main(sys.argv[1:]))
"""
PLUGIN = "plugin:telegram@claude-plugins-official"  # in the conftest deployment's LAUNCH_FLAGS
DRILL = ("drill scratch ready", "drill old claude running", "drill activated",
         "drill pane pid changed", "drill old transcript byte-identical", "drill backup present",
         "drill channel flags on the new process", "drill channel servers recognised",
         "drill timeline complete", "drill no orphans")


@pytest.fixture
def deployment(deployment: Deployment) -> Deployment:
    """The conftest deployment with the Python stand-in as its claude."""
    deployment.claude.write_text(STAND_IN)
    return deployment


def install_official_plugin(home: Path, marketplace: bool = True) -> Path:
    """The files ``claude plugin install telegram@claude-plugins-official`` leaves in HOME
    (2.1.328 layout; the manifest is the official plugin's ``bun run … start``); returns the
    installPath. ``marketplace=False``: without its known_marketplaces entry (claude then
    starts nothing)."""
    import json

    plugins = home / ".claude" / "plugins"
    root = plugins / "cache" / "claude-plugins-official" / "telegram" / "0.0.6"
    (root / ".claude-plugin").mkdir(parents=True)
    (root / ".claude-plugin" / "plugin.json").write_text(json.dumps(
        {"name": "telegram", "version": "0.0.6", "description": "Telegram channel"}))
    (root / ".mcp.json").write_text(json.dumps({"mcpServers": {"telegram": {
        "command": "bun", "args": ["run", "--cwd", "${CLAUDE_PLUGIN_ROOT}", "--shell=bun",
                                   "--silent", "start"]}}}))
    stamp = "2026-11-30T10:00:00.000Z"
    listed = plugins / "installed_plugins.json"
    data = json.loads(listed.read_text()) if listed.exists() else {"version": 2, "plugins": {}}
    data["plugins"]["telegram@claude-plugins-official"] = [{
        "scope": "user", "installPath": str(root), "version": "0.0.6",
        "installedAt": stamp, "lastUpdated": stamp,
        "gitCommitSha": "3f1c0e7d9a2b4c6e8f0a1b3c5d7e9f1a2b4c6d8e"}]
    listed.write_text(json.dumps(data, indent=2))
    source = {"source": "github", "repo": "anthropics/claude-plugins-official"}
    settings = home / ".claude" / "settings.json"
    data = json.loads(settings.read_text())
    data.setdefault("enabledPlugins", {})["telegram@claude-plugins-official"] = True
    if marketplace:
        known_path = plugins / "known_marketplaces.json"
        known = json.loads(known_path.read_text()) if known_path.exists() else {}
        known["claude-plugins-official"] = {
            "source": source, "lastUpdated": stamp,
            "installLocation": str(plugins / "marketplaces" / "claude-plugins-official")}
        known_path.write_text(json.dumps(known))
        data.setdefault("extraKnownMarketplaces", {})["claude-plugins-official"] = {
            "source": source}
    settings.write_text(json.dumps(data))
    return root


def drill_lines(report: Checklist) -> dict[str, str]:
    return {line.name: line.status for line in report.lines if line.stage == "drill"}


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def scratch_processes(root: Path) -> list[int]:
    """Our own scan, independent of accept's: processes with a cwd under ``root``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cwd = os.readlink(entry / "cwd")
            except OSError:
                continue
            if cwd.startswith(str(root)):
                found.append(int(entry.name))
    return found


def test_drill_activates_a_scratch_copy_and_leaves_the_real_session_alone(
        installed: Deployment) -> None:  # noqa: F811
    install_official_plugin(installed.home)
    transcripts = sorted((installed.home / ".claude" / "projects").rglob("*.jsonl"))
    before = {p: digest(p) for p in transcripts}
    real_pid = installed.tmux.pane_pid(installed.target)
    report = accept(installed, drill=True)
    lines = drill_lines(report)
    assert all(lines.get(name) == PASS for name in DRILL), \
        [(x.name, x.evidence) for x in report.failed]
    assert report.exit_code == 0
    scratch = evidence(report, "drill scratch ready")
    assert set(scratch["mcp_servers_not_started"]) == {"companion", "threadline"}
    assert evidence(report, "drill activated")["state"] == "activated"
    assert evidence(report, "drill old transcript byte-identical")[
        "appended_by_the_old_claude"] == []
    flags = evidence(report, "drill channel flags on the new process")
    assert "--dangerously-load-development-channels server:companion" in flags["required"]
    assert "--channels plugin:telegram@claude-plugins-official" in flags["required"]
    # The switch's own health check recognised the stand-ins of `companion` (registered in the
    # real HOME as /bin/cat, which never ran in the scratch) and of the Telegram plugin (its
    # real `bun` server never ran: there is no bun here, and the stand-in claude ran the
    # stand-in plugin's server from the scratch install).
    servers = evidence(report, "drill channel servers recognised")
    assert servers["status"] == {"companion": "running", PLUGIN: "running"}
    assert servers["standins"] == ["companion", PLUGIN]
    assert servers["without_standin"] == {}
    # the real target, transcripts and store were never touched; the scratch is gone
    assert installed.tmux.pane_pid(installed.target) == real_pid
    assert {p: digest(p) for p in transcripts} == before
    assert sorted((installed.home / ".claude" / "projects").rglob("*.jsonl")) == transcripts
    assert not list((installed.state_dir / "operations").glob("op-*.json"))
    assert not Path(scratch["root"]).exists()
    assert scratch_processes(Path(scratch["root"])) == []
    assert TmuxServer(scratch["tmux_socket"]).cmd("ls", check=False).returncode != 0


def test_drill_with_a_deaf_resume_argv_is_not_activated(installed: Deployment) -> None:  # noqa: F811
    text = installed.config_path.read_text()
    deaf = text.replace(', "--dangerously-load-development-channels", "server:companion"]',
                        "]", 1)
    installed.config_path.write_text(deaf)
    report = accept(installed, drill=True)
    lines = drill_lines(report)
    assert lines["drill old claude running"] == PASS
    assert lines["drill activated"] == FAIL
    state = evidence(report, "drill activated")
    assert state["state"] == "rolled_back"
    assert "server:companion" in state["failure"]["message"]
    # nothing new to judge on a rolled-back switch: skipped naming it, not a cascade of FAILs
    skipped = {x.name: x.because for x in report.lines if x.status == SKIP}
    for name in ("drill pane pid changed", "drill channel flags on the new process",
                 "drill timeline complete"):
        assert skipped[name] == "drill activated"
        assert f"SKIP  drill     {name} — skipped (because 'drill activated' failed)" in \
            report.table().splitlines()
    # judged regardless: the copy stayed intact; the health check saw the server missing
    assert lines["drill old transcript byte-identical"] == PASS
    assert lines["drill channel servers recognised"] == FAIL
    assert lines["drill no orphans"] == PASS
    kept = Path(evidence(report, "drill scratch ready")["root"])
    assert kept.is_dir()  # kept for the post-mortem when a drill line failed
    assert scratch_processes(kept) == []


def test_drill_fails_with_the_reason_when_a_channel_server_is_not_where_claude_reads_it(
        installed: Deployment) -> None:  # noqa: F811
    # `companion` registered for another directory only: the claude in the workdir never
    # starts it, so every real switch would roll back. The drill must say so first.
    import json

    path = installed.home / ".claude.json"
    data = json.loads(path.read_text())
    spec = data["mcpServers"].pop("companion")
    data.setdefault("projects", {})["/somewhere/else"] = {"mcpServers": {"companion": spec}}
    path.write_text(json.dumps(data))
    report = accept(installed, drill=True)
    lines = drill_lines(report)
    assert lines["drill activated"] == FAIL
    assert lines["drill channel servers recognised"] == FAIL
    found = evidence(report, "drill channel servers recognised")
    assert found["status"]["companion"] == "absent"
    assert "channel server(s) not running: companion ('companion' is not a stdio server " \
        "registered in" in found["health_reason"]
    assert "companion" in found["without_standin"]
    assert scratch_processes(Path(evidence(report, "drill scratch ready")["root"])) == []


def test_cleanup_kills_and_lists_a_process_left_behind_in_the_scratch(
        installed: Deployment) -> None:  # noqa: F811
    import subprocess

    from provision.accept import Checklist, load_scene
    from provision.accept.drill import cleanup
    from provision.accept.scratch import prepare_scratch
    from provision.host import LocalHost
    from provision.profile import load_profile

    profile = load_profile(installed.profile_path)
    out = Checklist(profile.host, stage="drill")
    scene = load_scene(profile, LocalHost(profile.host), out)
    scratch = prepare_scratch(scene, "orphantest")
    stray = subprocess.Popen(["sleep", "300"], cwd=scratch.work, start_new_session=True)
    try:
        cleanup(scene, scratch, out)
        wait_for(lambda: stray.poll() is not None, timeout=10, what="the stray to be killed")
    finally:
        if stray.poll() is None:
            stray.kill()
    assert stray.returncode == -9
    line = next(x for x in out.lines if x.name == "drill no orphans")
    assert line.status == PASS
    assert [p["pid"] for p in line.evidence["killed_after_grace"]] == [stray.pid]
    assert not Path(scratch.root).exists()  # no drill line failed: the scratch is removed


def test_drill_fails_with_the_reason_when_a_plugin_channel_is_not_installed(
        installed: Deployment) -> None:  # noqa: F811
    # The deployment launches with --channels plugin:telegram@… but the plugin is not
    # installed: every real switch would say "not verifiable"; the drill fails and says why.
    report = accept(installed, drill=True)
    lines = drill_lines(report)
    assert lines["drill activated"] == PASS  # the switch itself works
    assert lines["drill channel servers recognised"] == FAIL
    found = evidence(report, "drill channel servers recognised")
    assert found["status"] == {"companion": "running", PLUGIN: "not_verifiable"}
    reason = found["without_standin"][PLUGIN]
    assert reason.startswith("plugin 'telegram@claude-plugins-official' has no installPath in ")
    assert str(installed.home / ".claude" / "plugins" / "installed_plugins.json") in reason
    assert report.exit_code == 1


def test_drill_fails_when_the_plugin_would_not_start_because_its_marketplace_is_unknown(
        installed: Deployment) -> None:  # noqa: F811
    # Installed and enabled, but its marketplace is not in known_marketplaces.json: claude
    # 2.1.328 starts no server for it (measured). The stand-in keeps that shape, so the
    # drill's health check finds the plugin's server absent, as every real switch would.
    install_official_plugin(installed.home, marketplace=False)
    # the absent server is missing evidence, judged when the activation timeout runs out:
    # 8 s instead of the default 20 (the companion's stand-in server starts in well under 1 s)
    text = installed.config_path.read_text()
    assert "\n[switch]\n" in text
    installed.config_path.write_text(
        text.replace("\n[switch]\n", "\n[switch]\nactivation_timeout_seconds = 8.0\n", 1))
    report = accept(installed, drill=True)
    lines = drill_lines(report)
    assert lines["drill channel servers recognised"] == FAIL
    found = evidence(report, "drill channel servers recognised")
    assert found["status"] == {"companion": "running", PLUGIN: "absent"}
    assert found["standins"] == ["companion", PLUGIN]
    assert f"channel server(s) not running: {PLUGIN}" in found["health_reason"]
    assert lines["drill no orphans"] == PASS


def test_a_systemd_deployment_is_told_its_door_was_not_drilled(
        installed: Deployment, tmp_path: Path) -> None:  # noqa: F811
    # The rendered config of a systemd deployment whose unit does not run here: no scratch
    # unit can copy its shape, so the drill falls back to a private tmux pane and says why.
    install_official_plugin(installed.home)
    text = installed.config_path.read_text()
    text = text.replace('door = "tmux"', 'door = "systemd"', 1).replace(
        'unit = ""', 'unit = "tl-no-such-unit.service"', 1).replace(
        'pointer_path = ""', f'pointer_path = "{tmp_path / "pointer"}"', 1)
    installed.config_path.write_text(text)
    report = accept(installed, drill=True)
    door = next(x for x in report.lines if x.name == "drill systemd door")
    assert door.status == SKIP and door.evidence == (
        "not drilled: unit 'tl-no-such-unit.service' has no main process here (systemctl show "
        "MainPID), so its shape cannot be reproduced as a scratch unit; this drill switched a "
        "private tmux pane instead")
    scratch = evidence(report, "drill scratch ready")
    assert (scratch["door"], scratch["deployment_door"]) == ("tmux", "systemd")
    assert drill_lines(report)["drill activated"] == PASS
    assert not (tmp_path / "pointer").exists()  # the real pointer was never written


def test_a_marketplace_known_only_from_settings_is_carried_into_the_stand_in(
        installed: Deployment) -> None:  # noqa: F811
    # claude re-adds a marketplace of settings.json's extraKnownMarketplaces at start, so the
    # real plugin starts; the stand-in must get the same entry, with the same source.
    import json

    from provision.accept import load_scene
    from provision.accept.scratch import _plugin_standins
    from provision.host import LocalHost
    from provision.profile import load_profile

    install_official_plugin(installed.home, marketplace=False)
    source = {"source": "github", "repo": "anthropics/claude-plugins-official"}
    data = json.loads(installed.settings.read_text())
    data["extraKnownMarketplaces"] = {"claude-plugins-official": {"source": source}}
    installed.settings.write_text(json.dumps(data))
    profile = load_profile(installed.profile_path)
    out = Checklist(profile.host, stage="drill")
    scene = load_scene(profile, LocalHost(profile.host), out)
    files, settings, problems = _plugin_standins(scene, [PLUGIN], "/s/cfg", "/s/market")
    assert problems == {}
    known = files["/s/cfg/plugins/known_marketplaces.json"]["claude-plugins-official"]
    assert known["source"] == source
    assert settings["extraKnownMarketplaces"] == {"claude-plugins-official": {"source": source}}
