"""The health check (SPEC §4.4) on real processes, and the /proc parsers behind it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from runtime import health
from runtime.errors import IdentityConflictError
from runtime.identity import channel_flags, descendants, parse_stat, resumed_session
from tests.fixtures.standin_claude import project_dir_for, write_transcript
from tests.fixtures.tmux import wait_for

CHANNEL = ("--dangerously-load-development-channels", "server:companion")


@dataclass
class ProcessDoor:
    """A door over one real child process (the thing a pane or a unit would run)."""

    process: subprocess.Popen[bytes] | None
    output: str = ""
    name: str = "test"
    switched: list[str] = field(default_factory=list)

    def identity(self) -> str:
        if self.process is None or self.process.poll() is not None:
            raise IdentityConflictError("process is gone")
        return str(self.process.pid)

    def process_pid(self, identity: str) -> int | None:
        return int(identity)

    def screen(self) -> str:
        return self.output

    def switch(self, session_id: str, resume_argv: Sequence[str], workdir: Path) -> None:
        self.switched.append(session_id)

    def confirm(self) -> bool:
        return False


@pytest.fixture
def session(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    workdir = tmp_path / "wd"
    workdir.mkdir()
    sid = "5e551011-0000-4000-8000-000000000001"
    write_transcript(project_dir_for(str(workdir)) / f"{sid}.jsonl", sid, str(workdir),
                     [("hi", "hello")])
    yield workdir, sid


def start(workdir: Path, argv: Sequence[str], servers: str = "") -> subprocess.Popen[bytes]:
    script = Path(__file__).parents[1] / "fixtures" / "standin_claude.py"
    env = {**os.environ, "STANDIN_SERVERS": servers}
    return subprocess.Popen([sys.executable, str(script), *argv], cwd=workdir, env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)


def want(sid: str, workdir: Path, **kw: object) -> health.Expectation:
    base: dict[str, object] = {"session_id": sid, "previous_identity": "1",
                               "channel_flags": channel_flags(CHANNEL), "workdir": workdir,
                               "window": 0.3}
    base.update(kw)
    return health.Expectation(**base)  # type: ignore[arg-type]


@pytest.fixture
def children() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for child in started:
        child.terminate()
        child.wait(timeout=10)


def test_a_live_process_with_session_flags_cwd_and_servers_is_healthy(
    session: tuple[Path, str], children: list[subprocess.Popen[bytes]]
) -> None:
    workdir, sid = session
    proc = start(workdir, ["--resume", sid, *CHANNEL], servers="companion")
    children.append(proc)
    wait_for(lambda: descendants(proc.pid), what="channel server child")
    report = health.check(ProcessDoor(proc), want(sid, workdir, channel_servers=("companion",)))
    assert report.ok, report.reason
    assert report.evidence["pid"] == proc.pid and report.evidence["cwd"] == str(workdir)
    assert report.evidence["channel_servers"]["companion"]


def test_a_missing_channel_flag_is_the_deaf_process_and_unhealthy(
    session: tuple[Path, str], children: list[subprocess.Popen[bytes]]
) -> None:
    workdir, sid = session
    proc = start(workdir, ["--resume", sid])
    children.append(proc)
    report = health.check(ProcessDoor(proc), want(sid, workdir))
    assert not report.ok and "missing channel flag" in report.reason
    assert report.evidence["missing_channel_flags"] == list(channel_flags(CHANNEL))


def test_a_wrong_cwd_or_session_is_unhealthy(
    session: tuple[Path, str], children: list[subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    workdir, sid = session
    proc = start(workdir, ["--resume", sid, *CHANNEL])
    children.append(proc)
    report = health.check(ProcessDoor(proc), want("other-session", tmp_path))
    assert not report.ok
    assert "does not hold session 'other-session'" in report.reason and "cwd is" in report.reason


def test_a_process_that_exits_with_no_conversation_found_is_unhealthy(
    session: tuple[Path, str], tmp_path: Path
) -> None:
    workdir, _ = session
    proc = start(workdir, ["--resume", "no-such-session", *CHANNEL])
    proc.wait(timeout=20)
    report = health.check(ProcessDoor(proc), want("no-such-session", workdir))
    assert not report.ok and "gone" in report.reason


def test_no_conversation_found_on_screen_is_unhealthy_even_while_alive(
    session: tuple[Path, str], children: list[subprocess.Popen[bytes]]
) -> None:
    workdir, sid = session
    proc = start(workdir, ["--resume", sid, *CHANNEL])
    children.append(proc)
    door = ProcessDoor(proc, output="No conversation found with session ID: x")
    assert "No conversation found" in health.check(door, want(sid, workdir)).reason


def test_an_unreplaced_process_is_not_healthy(
    session: tuple[Path, str], children: list[subprocess.Popen[bytes]]
) -> None:
    workdir, sid = session
    proc = start(workdir, ["--resume", sid, *CHANNEL])
    children.append(proc)
    report = health.check(ProcessDoor(proc), want(sid, workdir, previous_identity=str(proc.pid)))
    assert not report.ok and "not replaced" in report.reason


def test_an_expected_channel_server_that_is_not_running_is_unhealthy(
    session: tuple[Path, str], children: list[subprocess.Popen[bytes]]
) -> None:
    workdir, sid = session
    proc = start(workdir, ["--resume", sid, *CHANNEL])
    children.append(proc)
    report = health.check(ProcessDoor(proc), want(sid, workdir, channel_servers=("telegram",)))
    assert not report.ok and "not running: telegram" in report.reason


@pytest.mark.parametrize(
    ("argv", "flags"),
    [
        (["claude", "--channels", "plugin:telegram@x", "--resume", "a"],
         ("--channels plugin:telegram@x",)),
        (["claude", "--channels", "a", "b", "-c"], ("--channels a", "--channels b")),
        (["claude", "--dangerously-load-development-channels=server:companion"],
         ("--dangerously-load-development-channels server:companion",)),
        (["claude", "--resume", "x"], ()),
    ],
)
def test_channel_flags_are_read_in_every_spelling(argv: list[str], flags: tuple[str, ...]) -> None:
    assert channel_flags(argv) == flags


def test_resumed_session_and_stat_parsers() -> None:
    assert resumed_session(["c", "--resume", "abc"]) == "abc"
    assert resumed_session(["c", "--resume=abc"]) == "abc"
    assert resumed_session(["c", "-c"]) is None
    text = "42 (tmux: server) S 1 42 42 0 -1 4194560 " + " ".join(["0"] * 12) + " 98765 0"
    assert parse_stat(text) == ("S", 1, 98765)
    assert parse_stat("garbage") is None
