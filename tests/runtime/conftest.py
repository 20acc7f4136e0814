"""Fixtures of the runtime tests that start real stand-in claude processes."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from tests.fixtures.process_door import Launcher, start
from tests.fixtures.standin_claude import project_dir_for, write_transcript


@pytest.fixture
def session(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    workdir = tmp_path / "wd"
    workdir.mkdir()
    sid = "5e551011-0000-4000-8000-000000000001"
    config = str(tmp_path / "claude config")  # a non-default CLAUDE_CONFIG_DIR, as on the VPS
    write_transcript(project_dir_for(str(workdir), config) / f"{sid}.jsonl", sid, str(workdir),
                     [("hi", "hello")])
    yield workdir, sid


@pytest.fixture
def children() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for child in started:
        child.terminate()
        child.wait(timeout=10)


@pytest.fixture
def claude(session: tuple[Path, str], children: list[subprocess.Popen[bytes]]) -> Launcher:
    """Starts the stand-in claude in the session's workdir; ``children`` stops it after."""
    workdir, _ = session

    def launch(argv: Sequence[str], servers: dict[str, list[str]] | None = None,
               **extra_env: str) -> subprocess.Popen[bytes]:
        proc = start(workdir, argv, servers, **extra_env)
        children.append(proc)
        return proc

    return launch
