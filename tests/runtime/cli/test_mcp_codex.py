"""The MCP server under a codex serves the thread its parent codex holds the writer lock for.

A stand-in codex (the interpreter under a program named ``codex``, with its own CODEX_HOME)
takes real flocks on thread-writer lock files and starts the "MCP server" process whose
ancestors are walked — the shape Codex 0.169.0 has: the native ``codex`` spawns its stdio MCP
servers as children and holds the thread's lock itself. ``dirty`` and ``plan`` then read that
thread's rollout, wherever it sits under ``$CODEX_HOME/sessions``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp.server.mcpserver.exceptions import ToolError

from runtime.cli.mcp import Served, claude_session_id, served_session, served_transcript
from runtime.config import Config, load_config
from runtime.engine import report
from tests.runtime.codex_rollouts import Rollout

THREAD = "01a24632-6827-7a52-8813-53ab6b6ff12b"
FORKED = "01a24632-68b8-77c3-9739-46f5a0d8fa6d"
STANDIN = """
import fcntl, os, subprocess, sys
folder = os.path.join(os.environ["CODEX_HOME"], "thread-writer-locks")
os.makedirs(folder, exist_ok=True)
held = [open(os.path.join(folder, t + ".lock"), "a") for t in sys.argv[1:]]
for handle in held:
    fcntl.flock(handle, fcntl.LOCK_EX)
server = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
print(server.pid, flush=True)
sys.stdin.read()
server.stdin.close()
server.wait()
"""


@pytest.fixture
def standin(tmp_path: Path) -> Iterator[object]:
    program = tmp_path / "bin" / "codex"
    program.parent.mkdir()
    program.symlink_to(sys.executable)
    started: list[subprocess.Popen[str]] = []

    def start(*threads: str) -> int:
        proc = subprocess.Popen([str(program), "-c", STANDIN, *threads], text=True,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                env={**os.environ, "CODEX_HOME": str(tmp_path / "home")})
        started.append(proc)
        assert proc.stdout is not None
        return int(proc.stdout.readline())

    yield start
    for proc in started:
        proc.communicate(timeout=10)


def test_the_server_under_a_codex_serves_the_thread_it_writes(standin, tmp_path: Path) -> None:
    server = standin(THREAD)
    assert claude_session_id(server, tmp_path / "no-claude") == THREAD


def test_a_codex_holding_two_threads_after_a_fork_serves_none(standin, tmp_path: Path) -> None:
    server = standin(THREAD, FORKED)
    assert claude_session_id(server, tmp_path / "no-claude") is None


def test_a_codex_that_holds_no_thread_serves_none(standin, tmp_path: Path) -> None:
    server = standin()
    assert claude_session_id(server, tmp_path / "no-claude") is None


def test_dirty_and_plan_under_a_codex_read_its_thread_not_the_newest_rollout(
        standin, tmp_path: Path) -> None:
    sessions = tmp_path / "home" / "sessions"
    served = Rollout(THREAD)
    served.start(harness=True)
    served.user("fix the build")
    served.tool_round()
    served.assistant("built")
    served.end("built")
    own = served.write(sessions / "2026" / "12" / "03")
    # after a rolled-back rebuild the abandoned candidate is the newest rollout
    abandoned = Rollout(FORKED)
    abandoned.exchange("fix the build", "built")
    newer = abandoned.write(sessions / "2026" / "12" / "05")
    os.utime(own, (1_700_000_000, 1_700_000_000))
    config_file = tmp_path / "threadline.toml"
    config_file.write_text(f'agent = "codex"\ncodex_home = "{sessions.parent}"\n'
                           f'project_dir = "{sessions}"\nstate_dir = "{tmp_path}/state"\n')
    config = load_config(config_file)

    server = served_session(standin(THREAD), tmp_path / "no-claude")
    path, source = served_transcript(None, config, server)
    assert (path, source) == (str(own), "served session")
    assert report.dirty_report(path, config)["noise_bytes"] > 0  # the tool round is noise
    assert served_transcript(str(newer), config, server) == (str(newer), "argument")


def test_dirty_under_a_codex_whose_thread_has_two_rollouts_names_both(
        standin, tmp_path: Path) -> None:
    sessions = tmp_path / "home" / "sessions"
    own = Rollout(THREAD).write(sessions / "2026" / "12" / "03")
    copy = Rollout(THREAD).write(sessions / "2025" / "01" / "15")
    config_file = tmp_path / "threadline.toml"
    config_file.write_text(f'agent = "codex"\ncodex_home = "{sessions.parent}"\n'
                           f'project_dir = "{sessions}"\nstate_dir = "{tmp_path}/state"\n')
    server = served_session(standin(THREAD), tmp_path / "no-claude")
    with pytest.raises(ToolError) as caught:
        served_transcript(None, load_config(config_file), server)
    message = str(caught.value)
    assert str(own) in message and str(copy) in message and "\n" not in message


def codex_config(tmp_path: Path) -> tuple[Config, Path]:
    sessions = tmp_path / "home" / "sessions"
    Rollout(THREAD).write(sessions / "2026" / "12" / "03")  # there is a rollout: never guessed
    config_file = tmp_path / "threadline.toml"
    config_file.write_text(f'agent = "codex"\ncodex_home = "{sessions.parent}"\n'
                           f'project_dir = "{sessions}"\nstate_dir = "{tmp_path}/state"\n')
    return load_config(config_file), sessions


def refusal(config: Config, served: Served) -> str:
    with pytest.raises(ToolError) as caught:
        served_transcript(None, config, served)
    message = str(caught.value)
    assert "\n" not in message and "pass transcript=" in message
    assert str(config.project_dir) in message
    return message


def test_dirty_under_a_codex_holding_two_threads_names_them_and_the_argument(
        standin, tmp_path: Path) -> None:
    config, _ = codex_config(tmp_path)
    server = standin(THREAD, FORKED)
    served = served_session(server, tmp_path / "no-claude")
    assert served.session_id is None and served.codex_pid is not None
    message = refusal(config, served)
    assert f"codex pid {served.codex_pid} holds writer locks for 2 threads" in message
    assert THREAD in message and FORKED in message and "/fork" in message


def test_dirty_under_a_codex_holding_no_thread_names_the_daemon_and_the_argument(
        standin, tmp_path: Path) -> None:
    config, _ = codex_config(tmp_path)
    served = served_session(standin(), tmp_path / "no-claude")
    message = refusal(config, served)
    assert f"codex pid {served.codex_pid} holds no thread-writer lock" in message
    assert str(tmp_path / "home" / "thread-writer-locks") in message
    assert "--no-daemon" in message


def test_dirty_for_a_codex_config_outside_any_codex_or_without_a_rollout_is_refused(
        tmp_path: Path) -> None:
    config, sessions = codex_config(tmp_path)
    assert "runs under no codex process" in refusal(config, Served(None))
    missing = "01a24632-0000-7000-8000-000000000000"
    message = refusal(config, Served(missing, 4242, tmp_path / "home", (missing,)))
    assert f"thread {missing} of codex pid 4242 has no rollout" in message
