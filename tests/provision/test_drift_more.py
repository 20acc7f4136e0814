"""``hook.enabled: false`` against a real tmux deployment, and the drift findings beyond the
launch argv: a dead pane, tmux respawn wiring, ``disableAllHooks``, systemd unit topology
(fake host with captured ``systemctl cat`` shapes)."""

from __future__ import annotations

import json
import os
import signal
from typing import Any

import pytest
import yaml

from provision import engine
from provision.drift import Finding, check_drift
from provision.result import Context, Status
from provision.tasks.launcher import LaunchCommand, ResumeCommand
from provision.tasks.manifest import Manifest
from tests.fakes import FakeHost
from tests.fixtures.claude_cli import claude_bin  # noqa: F401 - fixture
from tests.fixtures.deployment import LAUNCH_FLAGS, Deployment, write_profile
from tests.fixtures.tmux import wait_for
from tests.provision.test_apply_tmux import FOREIGN, _apply, _status, ready  # noqa: F401
from tests.provision.test_drift import _drift, applied  # noqa: F401 - fixture
from tests.provision.test_introspect import (
    CLAUDE,
    DROP_IN,
    FRAGMENT,
    SYSTEMD,
    _profile,
    _systemd_host,
)


def _our_commands(settings: dict) -> list[str]:
    return [h["command"] for g in settings.get("hooks", {}).get("Stop", [])
            for h in g["hooks"] if "tl-rebuild hook-stop" in h["command"]]


def _set_hook_enabled(d: Deployment, enabled: bool) -> None:
    data = yaml.safe_load(d.profile_path.read_text())
    data["hook"] = {"enabled": enabled}
    write_profile(d.profile_path, data)


# --- hook.enabled (real tmux, real claude CLI) ---------------------------------------------

@pytest.mark.real_tmux
@pytest.mark.real_claude
def test_hook_disabled_apply_removes_only_our_stop_hook_and_keeps_the_mcp_server(
        ready: Deployment) -> None:  # noqa: F811
    first = _apply(ready)
    assert first.exit_code == 0, [r.message for r in first.results if r.status is Status.FAILED]
    enabled = json.loads(ready.settings.read_text())
    assert len(_our_commands(enabled)) == 1

    _set_hook_enabled(ready, False)
    second = _apply(ready)
    assert second.exit_code == 0, [r.message for r in second.results
                                   if r.status is Status.FAILED]
    assert _status(second)["StopHook"] == "changed"
    assert _status(second)["McpServer"] == "ok"
    persists = next(r for r in second.results if r.task == "StopHookPersists")
    assert persists.status is Status.OK and "still absent" in persists.message
    disabled = json.loads(ready.settings.read_text())
    assert _our_commands(disabled) == []
    assert {k: v for k, v in disabled.items() if k != "hooks"} == \
        {k: v for k, v in FOREIGN.items() if k != "hooks"}
    foreign: dict[str, Any] = json.loads(json.dumps(FOREIGN))
    assert disabled["hooks"] == foreign["hooks"]  # Stop: only the foreign group is left
    claude_json = json.loads((ready.home / ".claude.json").read_text())
    assert "threadline" in claude_json["mcpServers"]

    third = _apply(ready)
    assert third.exit_code == 0 and third.count(Status.CHANGED) == 0, \
        [r.message for r in third.results if r.status is Status.CHANGED]
    assert _drift(ready) == []


@pytest.mark.real_tmux
@pytest.mark.real_claude
def test_hook_disabled_drift_reports_our_hook_present_not_missing(
        applied: Deployment) -> None:  # noqa: F811
    with_hook = applied.settings.read_text()
    _set_hook_enabled(applied, False)
    assert _apply(applied).exit_code == 0
    applied.settings.write_text(with_hook)  # e.g. a stale claude session wrote it back
    findings = _drift(applied)
    present = [f for f in findings if "although hook.enabled is false" in f.check]
    assert len(present) == 1 and present[0].before == "absent"
    assert "tl-rebuild hook-stop" in present[0].after
    assert not any(f.check.startswith("Stop hook missing") for f in findings)


# --- disableAllHooks, tmux pane and respawn wiring (real tmux) -----------------------------

@pytest.mark.real_tmux
@pytest.mark.real_claude
def test_disable_all_hooks_appearing_in_settings_is_drift(applied: Deployment) -> None:  # noqa: F811
    settings = json.loads(applied.settings.read_text())
    settings["disableAllHooks"] = True
    applied.settings.write_text(json.dumps(settings, indent=2))
    findings = _drift(applied)
    assert [(f.before, f.after) for f in findings if "disableAllHooks" in f.check] == \
        [("disableAllHooks unset or false", "disableAllHooks: true")]
    assert not any(f.check.startswith("Stop hook missing") for f in findings)


def _kill_pane(d: Deployment, sig: signal.Signals) -> tuple[dict, object]:
    """Kill the pane's process group with ``sig``; the drift findings by check, and the dead
    pane's own."""
    pid = d.tmux.pane_pid(d.target)
    os.killpg(os.getpgid(pid), sig)
    # tmux sets pane_dead on the pty's EOF and the signal only once it has reaped the child
    wait_for(lambda: d.tmux.display(d.target, "#{pane_dead}|#{pane_dead_signal}")
             == f"1|{int(sig)}", what=f"pane dead, killed by signal {int(sig)}")
    checks = {f.check: f for f in _drift(d)}
    return checks, checks[f"tmux pane {d.target} dead (claude exited; nothing to switch)"]


@pytest.mark.real_tmux
@pytest.mark.real_claude
def test_dead_pane_is_drift_naming_pane_dead(applied: Deployment) -> None:  # noqa: F811
    applied.tmux.cmd("set-option", "-p", "-t", applied.target, "remain-on-exit", "on")
    checks, dead = _kill_pane(applied, signal.SIGKILL)
    # the stand-in was launched with --continue: no session id in its start command
    assert (dead.before, dead.after) == ("pane_dead=0", (
        f"pane_dead=1 (signal 9; start it again: tl-rebuild restart --session ID --config "
        f"{applied.config_path})"))
    assert "launch command unreadable" not in checks
    assert checks[f"tmux remain-on-exit changed for {applied.target}"].after == \
        "remain-on-exit on"

    # a claude a switch respawned names its session (--resume ID): the finding names it too
    session = "0f6f8b1e-5d7a-4c55-9a7e-2b2f3c4d5e6f"
    applied.start(("--resume", session, *LAUNCH_FLAGS[1:]), respawn=True)
    _, dead = _kill_pane(applied, signal.SIGTERM)
    assert dead.after == (f"pane_dead=1 (signal 15; start it again: tl-rebuild restart "
                          f"--session {session} --config {applied.config_path})")


@pytest.mark.real_tmux
@pytest.mark.real_claude
def test_respawn_hook_and_remain_on_exit_set_after_apply_are_drift(
        applied: Deployment) -> None:  # noqa: F811
    applied.tmux.cmd("set-option", "-w", "-t", "main:0", "remain-on-exit", "on")
    applied.tmux.cmd("set-hook", "-p", "-t", applied.target, "pane-died", "respawn-pane")
    checks = {f.check: f for f in _drift(applied)}
    remain = checks[f"tmux remain-on-exit changed for {applied.target}"]
    assert (remain.before, remain.after) == ("remain-on-exit off", "remain-on-exit on")
    hooks = checks[f"tmux respawn hooks changed for {applied.target}"]
    assert (hooks.before, hooks.after) == ("none", "pane pane-died[0] respawn-pane")


@pytest.mark.real_tmux
@pytest.mark.real_claude
def test_respawn_wiring_present_at_apply_is_recorded_and_its_removal_is_drift(
        ready: Deployment) -> None:  # noqa: F811
    ready.tmux.cmd("set-hook", "-g", "-w", "pane-died", "respawn-pane")
    assert _apply(ready).exit_code == 0
    assert _drift(ready) == []
    ready.tmux.cmd("set-hook", "-g", "-w", "-u", "pane-died")
    hooks = [f for f in _drift(ready) if f.check.startswith("tmux respawn hooks changed")]
    assert [(f.before, f.after) for f in hooks] == [("global pane-died[0] respawn-pane", "none")]


# --- systemd unit topology (fake host) -----------------------------------------------------

OWN = """# /etc/systemd/system/claude.service.d/threadline-launch.conf
[Service]
ExecStart=
ExecStart=/opt/tl/bin/tl-launch --pointer /var/lib/tl/pointer -- /usr/local/bin/claude \\
  --continue --channels plugin:telegram@claude-plugins-official \\
  --dangerously-load-development-channels server:companion
"""
LIMITS = """# /etc/systemd/system/claude.service.d/limits.conf
[Service]
LimitNOFILE=65536
Environment=FOO=secret-one
"""


def _unit_host(cat: str) -> FakeHost:
    host = _systemd_host(cat)
    from runtime.paths import encode_project_dir

    host.dirs[f"/home/claude/.claude/projects/{encode_project_dir('/srv/app')}"] = 0o700
    host.add_command([CLAUDE, "--version"], "2.1.328 (Claude Code)")
    return host


def _applied_unit(cat: str) -> FakeHost:
    """A fake host whose manifest records ``cat`` (the launch tasks, the directories and the
    manifest only)."""
    from provision.tasks.files import Directories

    host = _unit_host(cat)
    report = engine.run([LaunchCommand(), ResumeCommand(), Directories(), Manifest()], host,
                        Context(_profile(SYSTEMD)))
    assert report.exit_code == 0, [r.message for r in report.results]
    return host


def _unit_drift(host: FakeHost, cat: str) -> list[Finding]:
    now = _unit_host(cat)
    now.files.update({p: b for p, b in host.files.items() if p.startswith("/var/lib/tl/")})
    now.dirs.update(host.dirs)
    return check_drift(now, _profile(SYSTEMD))


def test_unit_unchanged_is_no_drift_and_our_own_drop_in_is_not_a_new_drop_in() -> None:
    host = _applied_unit(FRAGMENT + DROP_IN)
    assert _unit_drift(host, FRAGMENT + DROP_IN) == []
    assert _unit_drift(host, FRAGMENT + DROP_IN + OWN) == []


def test_a_drop_in_added_or_removed_is_unit_topology_drift() -> None:
    host = _applied_unit(FRAGMENT + DROP_IN)
    added = [f for f in _unit_drift(host, FRAGMENT + DROP_IN + LIMITS)
             if f.check.startswith("unit drop-in")]
    assert [(f.check, f.before, f.after) for f in added] == [
        ("unit drop-in added", "absent", "/etc/systemd/system/claude.service.d/limits.conf")]
    host = _applied_unit(FRAGMENT + DROP_IN + LIMITS)
    removed = [f for f in _unit_drift(host, FRAGMENT + DROP_IN)
               if f.check.startswith("unit drop-in")]
    assert [(f.check, f.before, f.after) for f in removed] == [
        ("unit drop-in removed", "/etc/systemd/system/claude.service.d/limits.conf", "absent")]


def test_a_moved_fragment_is_fragment_path_drift() -> None:
    host = _applied_unit(FRAGMENT + DROP_IN)
    moved = FRAGMENT.replace("/etc/systemd/system/claude.service",
                             "/usr/lib/systemd/system/claude.service")
    findings = {f.check: f for f in _unit_drift(host, moved + DROP_IN)}
    fragment = findings["unit FragmentPath changed"]
    assert (fragment.before, fragment.after) == ("/etc/systemd/system/claude.service",
                                                 "/usr/lib/systemd/system/claude.service")


def test_changed_environment_is_drift_without_revealing_values() -> None:
    host = _applied_unit(FRAGMENT + DROP_IN + LIMITS)
    manifest = host.files["/var/lib/tl/provision.json"].decode()
    assert "secret-one" not in manifest
    findings = _unit_drift(host, FRAGMENT + DROP_IN + LIMITS.replace("secret-one", "secret-two"))
    env = [f for f in findings if f.check.startswith("unit Environment")]
    assert [f.check for f in env] == ["unit Environment FOO changed"]
    assert env[0].before.startswith("sha256:") and env[0].after.startswith("sha256:")
    assert env[0].before != env[0].after
    assert "secret" not in json.dumps([f.__dict__ for f in findings])


def test_changed_working_directory_is_workdir_drift() -> None:
    host = _applied_unit(FRAGMENT + DROP_IN)
    findings = {f.check: f for f in _unit_drift(
        host, FRAGMENT.replace("WorkingDirectory=/srv/app", "WorkingDirectory=/srv/other")
        + DROP_IN)}
    moved = findings["workdir changed (resume looks up sessions by cwd)"]
    assert (moved.before, moved.after) == ("/srv/app", "/srv/other")


def test_manifest_without_wiring_from_an_older_apply_still_checks_clean() -> None:
    host = _applied_unit(FRAGMENT + DROP_IN)
    path = "/var/lib/tl/provision.json"
    data = json.loads(host.files[path])
    del data["wiring"]
    host.files[path] = json.dumps(data).encode()
    assert _unit_drift(host, FRAGMENT + DROP_IN + LIMITS) == []



# --- StopHookPersists with hook.enabled: false (fake host) ---------------------------------

SETTINGS = "/home/claude/.claude/settings.json"
OURS = {"type": "command", "timeout": 10,
        "command": "/opt/tl/bin/tl-rebuild hook-stop --config /etc/tl/config.toml"}


def _hook_host() -> tuple[FakeHost, Context]:
    from provision.profile import profile_from_mapping

    host = FakeHost(files={"/opt/tl/bin/tl-rebuild": b"#!/bin/sh\n"},
                    executables={"/opt/tl/bin/tl-rebuild"}, dirs={"/home/claude": 0o750})
    host.add_command(["id", "-u"], "0\n")
    host.files[SETTINGS] = json.dumps({"model": "opus", "hooks": {"Stop": [
        {"hooks": [OURS]}, {"matcher": "", "hooks": [{"type": "command", "command": "x"}]}]}},
        indent=2).encode()
    profile = profile_from_mapping({
        "host": "h", "claude": {"user": "claude", "home": "/home/claude"}, "door": SYSTEMD,
        "install": {"config_path": "/etc/tl/config.toml", "state_dir": "/var/lib/tl",
                    "prefix": "/opt/tl"}, "hook": {"enabled": False}})
    return host, Context(profile)


def test_hook_disabled_persistence_check_passes_while_our_hook_stays_absent() -> None:
    from provision.tasks.settings import StopHook, StopHookPersists

    host, ctx = _hook_host()
    report = engine.run([StopHook(), StopHookPersists(sleep=lambda _: None)], host, ctx)
    assert [r.status for r in report.results] == [Status.CHANGED, Status.OK]
    assert report.results[0].message == f"remove 1 Stop hook(s) from {SETTINGS}"
    assert report.results[1].message.startswith(f"Stop hook still absent from {SETTINGS}")
    left = json.loads(host.files[SETTINGS])
    assert left == {"model": "opus", "hooks": {"Stop": [
        {"matcher": "", "hooks": [{"type": "command", "command": "x"}]}]}}


def test_hook_disabled_persistence_check_fails_when_the_hook_comes_back() -> None:
    from provision.tasks.settings import StopHook, StopHookPersists

    host, ctx = _hook_host()
    with_hook = host.files[SETTINGS]
    rewrite = StopHookPersists(sleep=lambda _: host.files.__setitem__(SETTINGS, with_hook))
    report = engine.run([StopHook(), rewrite], host, ctx)
    assert [r.status for r in report.results] == [Status.CHANGED, Status.FAILED]
    assert "back in" in report.results[1].message
    assert "although hook.enabled is false" in report.results[1].message
