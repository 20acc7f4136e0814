"""runtime.procfs: which thread a codex process writes, from /proc/locks and the lock files.

The parser runs on lines captured from a live codex 0.169.0 TUI (its native child held the
thread's flock and SQLite's POSIX read locks); the reader runs against real kernel locks
taken by helper processes of this test — an exclusive flock, a shared one, a file merely open.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.procfs import (
    FileLock,
    codex_lock_files,
    codex_writer_locks,
    parse_locks,
    writer_locked_threads,
)
from tests.fixtures.tmux import wait_for

THREAD = "01a24632-6827-7a52-8813-53ab6b6ff12b"
OTHER = "01a24632-68b8-77c3-9739-46f5a0d8fa6d"
CAPTURED = """\
1: FLOCK  ADVISORY  WRITE 30331 fe:00:2156306 0 EOF
2: POSIX  ADVISORY  READ 30331 fe:00:2155075 128 128
3: POSIX  ADVISORY  READ 30331 fe:00:2155043 1073741826 1073742335
4: -> FLOCK  ADVISORY  WRITE 30400 fe:00:2156306 0 EOF
5: OFDLCK ADVISORY  WRITE -1 fe:00:2156307 0 EOF
6: FLOCK  ADVISORY  READ 30331 103:0a:77 0 EOF
garbage line
7: FLOCK  ADVISORY  WRITE notapid fe:00:1 0 EOF
"""


def test_held_locks_are_parsed_with_a_hex_device_and_waiters_are_not_holders() -> None:
    locks = parse_locks(CAPTURED)
    assert locks[0] == FileLock("FLOCK", "WRITE", 30331, (0xFE, 0, 2156306))
    assert FileLock("FLOCK", "READ", 30331, (0x103, 0x0A, 77)) in locks
    assert [lock.pid for lock in locks].count(30400) == 0  # "->": waiting, not holding
    assert len(locks) == 5


def test_only_an_exclusive_flock_of_one_of_the_pids_marks_a_thread() -> None:
    locks = parse_locks(CAPTURED)
    files = {THREAD: (0xFE, 0, 2156306), OTHER: (0xFE, 0, 2155075)}  # OTHER: a POSIX lock
    assert writer_locked_threads(locks, [30319, 30331], files) == (THREAD,)
    assert writer_locked_threads(locks, [30319], files) == ()      # the wrapper alone: no lock
    assert writer_locked_threads(locks, [30400], files) == ()      # the waiter
    assert writer_locked_threads(locks, [30331], {THREAD: (0xFE, 1, 2156306)}) == ()  # other dev


HOLDER = """
import fcntl, sys
handle = open(sys.argv[1], "a")
if sys.argv[2] != "open":
    fcntl.flock(handle, fcntl.LOCK_EX if sys.argv[2] == "ex" else fcntl.LOCK_SH)
print("ready", flush=True)
sys.stdin.read()
"""


@pytest.fixture
def holders() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        proc.stdin.close()  # type: ignore[union-attr]
        proc.wait(timeout=10)


def hold(started: list[subprocess.Popen[str]], path: Path, how: str) -> int:
    """A helper process that opens ``path`` and holds it ``ex``/``sh``-locked or just ``open``."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(path), how], text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    started.append(proc)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc.pid


def lock_dir(home: Path) -> Path:
    folder = home / "thread-writer-locks"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def test_the_process_holding_the_exclusive_flock_is_identified_by_its_thread(
        tmp_path: Path, holders: list[subprocess.Popen[str]]) -> None:
    folder = lock_dir(tmp_path)
    writer = hold(holders, folder / f"{THREAD}.lock", "ex")
    reader = hold(holders, folder / f"{OTHER}.lock", "sh")
    opener = hold(holders, folder / f"{THREAD}.lock", "open")
    hold(holders, folder / ".coordination.lock", "ex")
    assert codex_writer_locks(tmp_path, writer) == (THREAD,)
    assert codex_writer_locks(tmp_path, reader) == ()   # a shared lock writes nothing
    assert codex_writer_locks(tmp_path, opener) == ()   # merely has the file open
    assert sorted(codex_lock_files(tmp_path)) == sorted([OTHER, THREAD])


def test_a_lock_in_another_codex_home_is_not_this_homes_thread(
        tmp_path: Path, holders: list[subprocess.Popen[str]]) -> None:
    lock_dir(tmp_path / "mine")
    other = hold(holders, lock_dir(tmp_path / "theirs") / f"{THREAD}.lock", "ex")
    assert codex_writer_locks(tmp_path / "theirs", other) == (THREAD,)
    assert codex_writer_locks(tmp_path / "mine", other) == ()
    assert codex_writer_locks(tmp_path / "absent", other) == ()


def test_two_exclusive_locks_after_a_fork_are_both_reported(
        tmp_path: Path, holders: list[subprocess.Popen[str]]) -> None:
    folder = lock_dir(tmp_path)
    script = ("import fcntl, sys\nhs = [open(p, 'a') for p in sys.argv[1:]]\n"
              "[fcntl.flock(h, fcntl.LOCK_EX) for h in hs]\nprint('ready', flush=True)\n"
              "sys.stdin.read()\n")
    proc = subprocess.Popen([sys.executable, "-c", script, str(folder / f"{THREAD}.lock"),
                             str(folder / f"{OTHER}.lock")],
                            text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    holders.append(proc)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    assert codex_writer_locks(tmp_path, proc.pid) == tuple(sorted((THREAD, OTHER)))


def test_a_lock_taken_by_a_child_counts_for_its_parent(
        tmp_path: Path, holders: list[subprocess.Popen[str]]) -> None:
    lock = lock_dir(tmp_path) / f"{THREAD}.lock"
    wrapper = ("import subprocess, sys\n"
               f"subprocess.run([sys.executable, '-c', {HOLDER!r}, sys.argv[1], 'ex'])\n")
    proc = subprocess.Popen([sys.executable, "-c", wrapper, str(lock)], text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    holders.append(proc)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    wait_for(lambda: codex_writer_locks(tmp_path, proc.pid), timeout=10,
             what="the child's lock to show")
    assert codex_writer_locks(tmp_path, proc.pid) == (THREAD,)
    assert codex_writer_locks(tmp_path, os.getpid()) == (THREAD,)  # the test is an ancestor too


def test_the_holder_of_a_threads_lock_is_found_wherever_it_runs(
        tmp_path: Path, holders: list[subprocess.Popen[str]]) -> None:
    from runtime.procfs import codex_lock_holder

    folder = lock_dir(tmp_path)
    writer = hold(holders, folder / f"{THREAD}.lock", "ex")
    hold(holders, folder / f"{OTHER}.lock", "sh")
    assert codex_lock_holder(tmp_path, THREAD) == writer
    assert codex_lock_holder(tmp_path, OTHER) is None      # a shared lock is no writer
    assert codex_lock_holder(tmp_path, "no-such-thread") is None
    assert codex_lock_holder(tmp_path / "absent", THREAD) is None
