"""The launch environment in introspect, apply and drift (issue 10 §5), on a real tmux server
(private socket) running a stand-in claude: inline assignments and the tmux session's own
environment are recorded by name (values only as digests, never printed); the live process
corroborates ``CLAUDE_CONFIG_DIR``; drift reports a changed variable."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
import yaml

from provision import engine
from provision.cli import apply_tasks, main
from provision.drift import check_drift
from provision.errors import IntrospectError
from provision.host import LocalHost
from provision.introspect import introspect
from provision.profile import Profile, load_profile
from provision.result import Context
from runtime.paths import encode_project_dir
from runtime.procfs import value_digest
from tests.fixtures.deployment import Deployment, write_profile
from tests.fixtures.tmux import wait_for

pytestmark = pytest.mark.real_tmux

SECRET = "sk-inline-secret-4711"
SESSION_SECRET = "session-secret-0815"
# Only what a stand-in needs: no channel flag, so no MCP registration is involved here.
FLAGS = ("--continue", "--append-system-prompt", "be brief and kind")


def config_dir(d: Deployment) -> Path:
    path = d.root / "claude cfg"
    (path / "projects" / encode_project_dir(str(d.workdir))).mkdir(parents=True, exist_ok=True)
    return path


def with_config_dir(d: Deployment, value: Path | None) -> Profile:
    data = yaml.safe_load(d.profile_path.read_text())
    data["claude"].pop("config_dir", None)
    if value is not None:
        data["claude"]["config_dir"] = str(value)
    write_profile(d.profile_path, data)
    return load_profile(d.profile_path)


def command(d: Deployment, cfg: Path, token: str = SECRET) -> str:
    """The pane command a user types: assignments, then ``exec claude …``."""
    return (f"CLAUDE_CONFIG_DIR={shlex.quote(str(cfg))} TL_TOKEN={token} "
            f"exec {shlex.join([str(d.claude), *FLAGS])}")


def start(d: Deployment, cfg: Path, **session_env: str) -> int:
    d.tmux.new_session("main", command(d, cfg), cwd=str(d.workdir), env=session_env)
    return int(wait_for(lambda: d.stand_in_pid(None), what="stand-in claude running"))


def respawn(d: Deployment, text: str) -> int:
    old = d.tmux.pane_pid(d.target)
    d.tmux.cmd("respawn-pane", "-k", "-t", d.target, text)
    return int(wait_for(lambda: d.stand_in_pid(old), what="stand-in claude respawned"))


def test_inline_and_tmux_session_variables_are_recorded_by_name_and_never_printed(
        deployment: Deployment, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = config_dir(deployment)
    with_config_dir(deployment, cfg)
    start(deployment, cfg, TL_SESSION_VAR=SESSION_SECRET, SSH_AUTH_SOCK="/tmp/agent.1")

    assert main(["introspect", "--json", str(deployment.profile_path)]) == 0
    out = capsys.readouterr().out
    launch = json.loads(out)["launch"]
    assert launch["argv"] == [str(deployment.claude), *FLAGS]
    # SSH_AUTH_SOCK is in tmux's update-environment: refreshed per attach, not the launch's
    assert launch["env_keys"] == ["CLAUDE_CONFIG_DIR", "TL_SESSION_VAR", "TL_TOKEN"]
    assert launch["environment"]["TL_TOKEN"] == value_digest(SECRET)
    assert launch["environment"]["TL_SESSION_VAR"] == value_digest(SESSION_SECRET)
    assert main(["introspect", str(deployment.profile_path)]) == 0
    out += capsys.readouterr().out
    assert SECRET not in out and SESSION_SECRET not in out
    assert "TL_TOKEN=<sha256:" in out  # the pane's start command, shown redacted


def test_a_live_claude_in_another_config_dir_than_the_profile_names_is_refused(
        deployment: Deployment) -> None:
    cfg = config_dir(deployment)
    profile = with_config_dir(deployment, None)
    start(deployment, cfg)
    with pytest.raises(IntrospectError, match=r"CLAUDE_CONFIG_DIR=.*claude cfg.*"
                                              r"claude.config_dir: \(unset\)"):
        introspect(LocalHost(), profile)


def test_a_config_dir_exported_by_the_users_shell_is_seen_on_the_live_process(
        deployment: Deployment) -> None:
    cfg = config_dir(deployment)
    assert deployment.tmux.env is not None
    deployment.tmux.env["CLAUDE_CONFIG_DIR"] = str(cfg)  # the login shell exports it
    plain = f"exec {shlex.join([str(deployment.claude), *FLAGS])}"
    deployment.tmux.new_session("main", plain, cwd=str(deployment.workdir))
    wait_for(lambda: deployment.stand_in_pid(None), what="stand-in claude running")
    with pytest.raises(IntrospectError, match="CLAUDE_CONFIG_DIR"):
        introspect(LocalHost(), with_config_dir(deployment, deployment.home / ".claude"))
    launch = introspect(LocalHost(), with_config_dir(deployment, cfg))
    assert launch.env == ()  # nothing in the command itself
    assert launch.environment(("CLAUDE_CONFIG_DIR",)) == {"CLAUDE_CONFIG_DIR": str(cfg)}


def _apply(d: Deployment) -> None:
    profile = load_profile(d.profile_path)
    skipped = ("StopHook", "StopHookPersists", "McpServer", "McpTools")
    tasks = [t for t in apply_tasks() if t.name not in skipped]
    report = engine.run(tasks, LocalHost(profile.host), Context(profile))
    assert report.exit_code == 0, [(r.task, r.message) for r in report.results]


def test_apply_names_the_variables_and_drift_reports_a_changed_value_by_digest(
        deployment: Deployment) -> None:
    cfg = config_dir(deployment)
    profile = with_config_dir(deployment, cfg)
    start(deployment, cfg, TL_SESSION_VAR=SESSION_SECRET)
    _apply(deployment)
    rendered = deployment.config_path.read_text()
    assert 'environment = ["CLAUDE_CONFIG_DIR", "TL_SESSION_VAR", "TL_TOKEN"]' in rendered
    assert SECRET not in rendered and SESSION_SECRET not in rendered
    manifest = (deployment.state_dir / "provision.json").read_text()
    assert SECRET not in manifest and value_digest(SECRET) in manifest
    assert check_drift(LocalHost(), profile) == []

    respawn(deployment, command(deployment, cfg, token="sk-rotated-9"))
    deployment.tmux.cmd("set-environment", "-t", "main", "TL_SESSION_VAR", "changed")
    found = {f.check: f for f in check_drift(LocalHost(), profile)}

    token = found["launch environment TL_TOKEN changed"]
    assert (token.before, token.after) == (value_digest(SECRET), value_digest("sk-rotated-9"))
    assert "launch environment TL_SESSION_VAR changed" in found
    assert "launch environment CLAUDE_CONFIG_DIR changed" not in found
    assert all("sk-rotated-9" not in f.line() for f in found.values())


def test_a_claude_running_with_another_home_than_the_profile_s_is_refused(
        deployment: Deployment) -> None:
    """The inventory says claude.user: claude, home: /home/claude, while the pane's claude runs
    with root's HOME: apply wrote the hook into a settings.json that claude never reads, all
    green. (With CLAUDE_CONFIG_DIR set, HOME no longer names the config: not compared.)"""
    other = deployment.root / "root-home"
    other.mkdir()
    assert deployment.tmux.env is not None
    deployment.tmux.env["HOME"] = str(other)
    deployment.start()
    with pytest.raises(IntrospectError, match=rf"runs with HOME={other}, so it reads "
                                              rf"{other}/.claude/settings.json, but the profile "
                                              rf"says claude.home: {deployment.home}"):
        introspect(LocalHost(), load_profile(deployment.profile_path))
    cfg = config_dir(deployment)
    old = deployment.tmux.pane_pid("main:0.0")
    deployment.tmux.cmd("respawn-pane", "-k", "-e", f"CLAUDE_CONFIG_DIR={cfg}", "-t", "main:0.0",
                        deployment.launch_command())
    wait_for(lambda: deployment.stand_in_pid(old), what="claude with CLAUDE_CONFIG_DIR")
    assert introspect(LocalHost(), with_config_dir(deployment, cfg)).live is not None


def test_a_home_named_through_a_symlink_is_the_same_home(deployment: Deployment) -> None:
    linked = deployment.root / "home-link"
    linked.symlink_to(deployment.home)
    assert deployment.tmux.env is not None
    deployment.tmux.env["HOME"] = str(linked)
    deployment.start()
    assert introspect(LocalHost(), load_profile(deployment.profile_path)).live is not None
