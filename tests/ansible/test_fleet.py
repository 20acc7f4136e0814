"""Real ``ansible-playbook`` drives the collection's role and module against a fleet of four
companions on this machine (tests/ansible/conftest.py): three healthy, one whose pane runs no
claude. The tests build on each other in file order (fresh → installed → applied → applied
again → drifted); each checks the state it starts from, so one run alone fails loudly."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from tests.ansible.conftest import Fleet, World, parse_recap

pytestmark = [pytest.mark.real_tmux, pytest.mark.real_claude]

COMPANIONS = "threadline.companion.companions"
DRIFT = "threadline.companion.drift"
HEALTHY = ("alpha", "beta", "gamma")


def recap(done: subprocess.CompletedProcess[str]) -> dict[str, dict[str, int]]:
    found = parse_recap(done.stdout)
    assert found, f"no PLAY RECAP in ansible-playbook output:\n{done.stdout}\n{done.stderr}"
    return found


def task_output(stdout: str, host: str, task_title: str) -> str:
    """The output lines of ``task_title`` for ``host`` (from the TASK banner to the next)."""
    blocks = re.split(r"^TASK \[", stdout, flags=re.M)
    block = next((b for b in blocks if b.startswith(task_title)), "")
    lines = block.splitlines()
    return "\n".join(line for line in lines if f"[{host}]" in line or not line.startswith(
        ("ok:", "changed:", "failed:", "fatal:", "skipping:")))


def snapshot(fleet: Fleet) -> dict[str, dict[str, object]]:
    """What a run may change, per host: settings bytes, MCP registrations, managed files.
    (The real claude CLI stamps its own migration keys into .claude.json on any call.)"""
    return {name: {"settings": w.settings.read_bytes(),
                   "mcp": json.loads((w.home / ".claude.json").read_text())["mcpServers"],
                   "config": w.config_path.exists(), "profile": w.profile_path.exists(),
                   "state": w.state_dir.exists(), "prefix": w.prefix.exists()}
            for name, w in fleet.worlds.items()}


def file_stamps(world: World) -> dict[str, tuple[int, int]]:
    """``{path: (mtime_ns, size)}`` of every file of a host but its venv and the claude CLI's
    own MCP logs (each ``claude mcp list`` that Verify runs writes one)."""
    logs = world.home / ".cache" / "claude-cli-nodejs"
    return {str(path): (path.stat().st_mtime_ns, path.stat().st_size)
            for path in world.root.rglob("*")
            if path.is_file() and not path.is_relative_to(world.prefix)
            and not path.is_relative_to(logs)}


def test_check_mode_on_fresh_hosts_changes_nothing(fleet: Fleet) -> None:
    before = snapshot(fleet)
    assert not any(host["prefix"] for host in before.values()), "fleet is not fresh"
    done = fleet.play(COMPANIONS, "--check", "--diff")
    seen = recap(done)
    assert set(seen) == {*HEALTHY, "broken"}
    assert all(seen[h]["failed"] == 0 and seen[h]["changed"] >= 1 for h in seen), done.stdout
    assert "is not installed yet" in done.stdout
    assert snapshot(fleet) == before


def test_check_diff_on_installed_hosts_shows_config_and_settings_and_changes_nothing(
        fleet: Fleet) -> None:
    done = fleet.play(COMPANIONS, "--tags", "threadline_install")
    assert done.returncode == 0, done.stdout
    assert all(w.prefix.joinpath("bin", "tl-provision").exists() for w in fleet.worlds.values())
    before = snapshot(fleet)
    shown = ("alpha", "beta")  # two hosts are enough to see per-host diffs; saves CPU
    done = fleet.play(COMPANIONS, "--check", "--diff", "--limit", ",".join(shown))
    seen = recap(done)
    assert all(seen[h]["failed"] == 0 and seen[h]["changed"] == 1 for h in shown), done.stdout
    for name in shown:
        world = fleet.worlds[name]
        assert f"+++ after: {world.config_path}" in done.stdout
        assert f"+++ after: {world.settings} hooks.Stop" in done.stdout
        assert f"+++ after: {world.profile_path}" in done.stdout
        # the config a real run writes names the real profile, not check mode's staged copy
        assert (f"+# Managed by tl-provision from {world.profile_path} (host {name})."
                in done.stdout), done.stdout
    assert "ansible-tmp-" not in done.stdout
    assert "+resume_argv = [" in done.stdout
    assert "tl-rebuild hook-stop" in done.stdout
    assert snapshot(fleet) == before


def test_apply_installs_every_healthy_host_and_the_broken_one_fails_alone(fleet: Fleet) -> None:
    done = fleet.play(COMPANIONS)
    seen = recap(done)
    assert done.returncode == 2
    for name in HEALTHY:
        assert seen[name]["failed"] == 0 and seen[name]["changed"] >= 1, (name, done.stdout)
        world = fleet.worlds[name]
        assert world.config_path.exists() and (world.state_dir / "provision.json").exists()
        settings = json.loads(world.settings.read_text())
        assert settings["model"] == "opus"
        assert any("tl-rebuild hook-stop" in h["command"]
                   for g in settings["hooks"]["Stop"] for h in g["hooks"])
    assert seen["broken"]["failed"] == 1
    fatal = [line for line in done.stdout.splitlines() if line.startswith("fatal: [")]
    assert [line.split("]")[0] for line in fatal] == ["fatal: [broken"], fatal
    assert "LaunchCommand failed" in done.stdout
    assert not fleet.worlds["broken"].config_path.exists()
    # role arguments, known variables, prefix, venv (installed before), stat: ok; apply: changed;
    # accept: ok (a failing line fails it); the check-mode note: skipped
    assert {h: (seen[h]["ok"], seen[h]["changed"], seen[h]["skipped"]) for h in HEALTHY} == \
        dict.fromkeys(HEALTHY, (7, 1, 1)), done.stdout


def test_second_apply_reports_changed_zero_and_a_bad_profile_fails_its_host_alone(
        fleet: Fleet) -> None:
    # One play for both claims (it saves a fleet run): the healthy hosts are applied again,
    # while ``broken`` now gets a profile the schema refuses.
    assert all((w.state_dir / "provision.json").exists()
               for n, w in fleet.worlds.items() if n in HEALTHY), "fleet is not applied"
    broken = fleet.worlds["broken"]
    bad = broken.profile()
    del bad["door"]["tmux"]["target"]
    bad["claude"]["home"] = "relative/home"
    profile_before = broken.profile_path.read_bytes()
    inventory = fleet.inventory("bad-profile.yml", broken={"threadline_profile": bad})
    stamps = {name: file_stamps(fleet.worlds[name]) for name in HEALTHY}
    done = fleet.play(COMPANIONS, inventory=inventory)
    seen = recap(done)
    assert done.returncode == 2
    assert {h: (seen[h]["ok"], seen[h]["changed"], seen[h]["failed"]) for h in HEALTHY} == \
        dict.fromkeys(HEALTHY, (7, 0, 0)), done.stdout
    assert {name: file_stamps(fleet.worlds[name]) for name in HEALTHY} == stamps  # untouched
    assert seen["broken"]["failed"] == 1
    fatal = [line for line in done.stdout.splitlines() if line.startswith("fatal: [")]
    assert len(fatal) == 1 and fatal[0].startswith("fatal: [broken]"), fatal
    assert f"host profile for {broken.profile_path} refused" in fatal[0]
    assert "door.tmux.target: required" in fatal[0]
    assert "claude.home: 'relative/home' does not match '^/'" in fatal[0]
    assert broken.profile_path.read_bytes() == profile_before


def test_drift_playbook_fails_only_the_host_changed_by_hand_and_names_the_change(
        fleet: Fleet) -> None:
    assert all((w.state_dir / "provision.json").exists()
               for n, w in fleet.worlds.items() if n in HEALTHY), "fleet is not applied"
    gamma = fleet.worlds["gamma"]
    settings = json.loads(gamma.settings.read_text())
    del settings["hooks"]["Stop"]  # a hand-made change: somebody removed our hook
    gamma.settings.write_text(json.dumps(settings, indent=2))
    before = snapshot(fleet)
    done = fleet.play(DRIFT, "--check", "--limit", ",".join(HEALTHY))
    seen = recap(done)
    assert done.returncode == 2
    assert {h: seen[h]["failed"] for h in HEALTHY} == {"alpha": 0, "beta": 0, "gamma": 1}
    fatal = [line for line in done.stdout.splitlines() if line.startswith("fatal: [")]
    assert len(fatal) == 1 and fatal[0].startswith("fatal: [gamma]")
    assert (f"drift since the last apply: Stop hook missing or altered in {gamma.settings}: "
            f"{gamma.prefix}/bin/tl-rebuild hook-stop --config {gamma.config_path} -> absent"
            in fatal[0])
    assert snapshot(fleet) == before


def test_apply_after_a_hand_edit_repairs_only_it_and_its_diff_shows_only_it(
        fleet: Fleet) -> None:
    gamma = fleet.worlds["gamma"]
    assert "Stop" not in json.loads(gamma.settings.read_text())["hooks"], "gamma has not drifted"
    stamps = file_stamps(gamma)
    done = fleet.play(COMPANIONS, "--diff", "--limit", "gamma")
    assert recap(done)["gamma"]["changed"] == 1 and done.returncode == 0, done.stdout
    applied = task_output(done.stdout, "gamma", "threadline.companion.companion : Host profile")
    assert re.findall(r"^\+\+\+ after: (.*)$", applied, re.M) == \
        [f"{gamma.settings} hooks.Stop"], applied
    now = file_stamps(gamma)
    touched = {path for path in {*stamps, *now} if stamps.get(path) != now.get(path)}
    (backup,) = (path for path in touched if path != str(gamma.settings))
    assert touched == {str(gamma.settings), backup}, touched
    assert backup.startswith(f"{gamma.settings}.") and backup.endswith("~")
    assert any("tl-rebuild hook-stop" in h["command"] for g in
               json.loads(gamma.settings.read_text())["hooks"]["Stop"] for h in g["hooks"])
