"""The MCP server under a codex serves the thread its parent codex holds the writer lock for.

A stand-in codex (the interpreter under a program named ``codex``, with its own CODEX_HOME)
takes real flocks on thread-writer lock files and starts the "MCP server" process whose
ancestors are walked — the shape Codex 0.169.0 has: the native ``codex`` spawns its stdio MCP
servers as children and holds the thread's lock itself.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.cli.mcp import claude_session_id

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
