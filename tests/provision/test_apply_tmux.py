"""apply against a real tmux pane running a stand-in claude, with the real claude CLI for MCP."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from provision import engine
from provision.cli import apply_tasks
from provision.host import LocalHost
from provision.profile import load_profile
from provision.result import Context, Report, Status
from tests.fixtures.claude_cli import claude_bin, claude_env  # noqa: F401 - fixture
from tests.fixtures.deployment import Deployment, write_profile

pytestmark = [pytest.mark.real_tmux, pytest.mark.real_claude]

FOREIGN = {
    "model": "opus",
    "env": {"FOO": "bar"},
    "hooks": {
        "Stop": [{"matcher": "", "hooks": [{"type": "command", "command": "/usr/bin/foreign"}]}],
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "x"}]}],
    },
    "unknownKey": [1, 2, {"deep": True}],
}


# the verbs an action summary may start with (provision/actions.py: Action.summary)
IMPERATIVE = {"add", "remove", "update", "create", "write", "chmod", "chown", "install", "check",
              "restart", "run"}


def _tasks(restart: bool = False) -> list:
    from provision.tasks.settings import StopHookPersists

    tasks = apply_tasks(restart)
    # the persistence pause is StopHookPersists' own subject (tested there); keep it short here
    return [StopHookPersists(pause=0.1) if t.name == "StopHookPersists" else t for t in tasks]


def _apply(d: Deployment, check: bool = False) -> Report:
    profile = load_profile(d.profile_path)
    return engine.run(_tasks(), LocalHost(profile.host), Context(profile, check=check))


@pytest.fixture
def ready(deployment: Deployment, claude_bin: Path) -> Deployment:  # noqa: F811
    """The deployment with the pinned CLI as claude.binary and `companion` registered."""
    data = __import__("yaml").safe_load(deployment.profile_path.read_text())
    data["claude"]["binary"] = str(claude_bin)
    write_profile(deployment.profile_path, data)
    subprocess.run([str(claude_bin), "mcp", "add", "--scope", "user", "companion", "--",
                    "/bin/cat"], cwd=deployment.workdir, env=claude_env(deployment.home),
                   check=True, capture_output=True, timeout=120)
    deployment.settings.write_text(json.dumps(FOREIGN, indent=4))
    deployment.start()
    return deployment


def _status(report: Report) -> dict[str, str]:
    return {r.task: r.status.value for r in report.results}


def test_apply_installs_then_second_apply_reports_changed_zero(ready: Deployment) -> None:
    first = _apply(ready)
    assert first.exit_code == 0, [r.message for r in first.results if r.status is Status.FAILED]
    assert _status(first)["RuntimeConfig"] == "changed"
    assert _status(first)["StopHook"] == "changed"
    assert _status(first)["McpServer"] == "changed"
    messages = {r.task: r.message for r in first.results}
    assert messages["StopHook"] == f"add the Stop hook to {ready.settings}"
    assert messages["RuntimeConfig"] == f"create {ready.config_path}"
    second = _apply(ready)
    assert second.exit_code == 0
    assert second.count(Status.CHANGED) == 0, [r.message for r in second.results
                                                if r.status is Status.CHANGED]
    assert "changed=0" in second.recap()


def test_resume_argv_in_the_installed_config_keeps_every_launch_flag(ready: Deployment) -> None:
    _apply(ready)
    from runtime.config import load_config

    config = load_config(ready.config_path)
    assert config.switch.resume_argv == (
        str(ready.claude), "--resume", "{session_id}", "--thinking-display", "summarized",
        "--channels", "plugin:telegram@claude-plugins-official",
        "--dangerously-load-development-channels", "server:companion")
    assert config.switch.channel_flags == (
        "--channels", "plugin:telegram@claude-plugins-official",
        "--dangerously-load-development-channels", "server:companion")
    assert config.workdir == ready.workdir
    assert config.switch.tmux.socket_name == ready.tmux.socket_name


def test_foreign_settings_survive_the_hook_merge(ready: Deployment) -> None:
    _apply(ready)
    after = json.loads(ready.settings.read_text())
    assert {k: v for k, v in after.items() if k != "hooks"} == \
        {k: v for k, v in FOREIGN.items() if k != "hooks"}
    assert after["hooks"]["PreToolUse"] == FOREIGN["hooks"]["PreToolUse"]
    assert FOREIGN["hooks"]["Stop"][0] in after["hooks"]["Stop"]
    commands = [h["command"] for g in after["hooks"]["Stop"] for h in g["hooks"]]
    assert any("tl-rebuild hook-stop" in c for c in commands)


def test_check_mode_changes_nothing_on_disk(ready: Deployment) -> None:
    before = ready.settings.read_bytes()
    report = _apply(ready, check=True)
    assert report.count(Status.CHANGED) >= 3
    changed = [r for r in report.results if r.status is Status.CHANGED]
    # one rule for every task: each action reads as what would happen, verb first
    for result in changed:
        assert result.message == "; ".join(f"would {a}" for a in result.actions)
        assert {a.split()[0] for a in result.actions} <= IMPERATIVE, result.actions
    by_task = {r.task: r.message for r in changed}
    assert by_task["StopHook"] == f"would add the Stop hook to {ready.settings}"
    assert by_task["RuntimeConfig"] == f"would create {ready.config_path}"
    assert ready.settings.read_bytes() == before
    assert not ready.config_path.exists()
    assert not (ready.state_dir / "provision.json").exists()
    claude_json = json.loads((ready.home / ".claude.json").read_text())
    assert "threadline" not in claude_json.get("mcpServers", {})


def test_check_after_apply_reports_nothing_to_change(ready: Deployment) -> None:
    _apply(ready)
    report = _apply(ready, check=True)
    assert report.count(Status.CHANGED) == 0
    assert report.exit_code == 0


def test_cli_apply_with_diff_prints_the_config_diff_and_the_recap(
        ready: Deployment, capsys: pytest.CaptureFixture[str]) -> None:
    from provision.cli import main

    rc = main(["apply", "--check", "--diff", str(ready.profile_path)])
    out = capsys.readouterr().out
    assert f"+++ after: {ready.config_path}" in out
    assert "+resume_argv = [" in out
    assert "PLAY RECAP (check mode)" in out
    assert "testbox : ok=" in out
    failed = [line for line in out.splitlines() if line.startswith("failed:")]
    # in check mode nothing is registered yet, so only McpTools may fail (it spawns the server)
    assert all("McpTools" in line for line in failed), failed
    assert rc == (2 if failed else 0)


def test_cli_apply_prints_the_token_table_and_the_evidence_only_with_v(
        ready: Deployment, capsys: pytest.CaptureFixture[str]) -> None:
    from provision.cli import main

    main(["apply", "--check", str(ready.profile_path)])
    lines = capsys.readouterr().out.splitlines()
    resume = next(i for i, x in enumerate(lines) if x.startswith("ok: [testbox] ResumeCommand"))
    launch = next(i for i, x in enumerate(lines) if x.startswith("ok: [testbox] LaunchCommand"))
    assert lines[resume + 1].startswith("changed: [testbox] Directories")  # no table under it
    assert lines[launch + 1].startswith("ok: [testbox] ResumeCommand")
    main(["apply", "--check", "-v", str(ready.profile_path)])
    lines = capsys.readouterr().out.splitlines()
    resume = next(i for i, x in enumerate(lines) if x.startswith("ok: [testbox] ResumeCommand"))
    launch = next(i for i, x in enumerate(lines) if x.startswith("ok: [testbox] LaunchCommand"))
    assert lines[resume + 1] == f"      {'launch':<48} resume"
    assert lines[launch + 1] == f"    workdir: {ready.workdir}"
    assert any(x.startswith("    evidence: ") for x in lines[launch + 1:resume])


def test_restart_claude_refuses_when_the_live_session_is_unknown_and_leaves_the_pane_alone(
        ready: Deployment) -> None:
    # The stand-in writes no sessions/<pid>.json: a restart could not resume its conversation.
    from provision.introspect import introspect

    profile = load_profile(ready.profile_path)
    before = introspect(LocalHost(), profile)
    assert before.live is not None
    report = engine.run(_tasks(restart=True), LocalHost(), Context(profile))
    restart = report.results[-1]
    assert restart.task == "RestartClaude" and restart.status is Status.FAILED
    assert restart.message == (
        f"cannot tell which session claude pid {before.live.pid} runs: no session id of this "
        f"process in {str(ready.home / '.claude' / 'sessions' / f'{before.live.pid}.json')!r}; "
        f"a restart would start a new conversation")
    assert ready.tmux.pane_pid(ready.target) == before.live.pid
