"""Facts about running processes, read from /proc: liveness, argv, cwd, children, the
session record a live claude keeps and the thread-writer locks a live codex holds.

Pure parsers (``parse_stat``, ``parse_environ``, ``parse_locks``) are separate from the
readers so they can be tested on captured text; what an agent's argv or session record
*means* is the agent's module's (``runtime/agents/``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import NamedTuple

from runtime.agents import SHELLS, claude, decode_cmdline

PROC = Path("/proc")


def parse_stat(text: str) -> tuple[str, int, int] | None:
    """``(state, ppid, start_time)`` from the text of ``/proc/PID/stat``, or None."""
    close = text.rfind(")")
    if close < 0:
        return None
    fields = text[close + 2:].split()
    if len(fields) < 20:
        return None
    try:
        return fields[0], int(fields[1]), int(fields[19])
    except ValueError:
        return None


def _stat(pid: int) -> tuple[str, int, int] | None:
    try:
        return parse_stat((PROC / str(pid) / "stat").read_text())
    except (OSError, ValueError):
        return None


def start_time(pid: int, *, exited: bool = False) -> int | None:
    """The kernel start time (clock ticks since boot) of a live ``pid``; None if gone/zombie.

    ``exited``: also of a zombie — a child the caller started and has not reaped yet, whose
    number cannot have been reused, so its start time still names it."""
    stat = _stat(pid)
    if stat is None or stat[0] == "X" or (stat[0] == "Z" and not exited):
        return None
    return stat[2]


def alive(pid: int | None, started: int | None = None) -> bool:
    """True when ``pid`` runs (not a zombie) and, if given, started at ``started``."""
    if not pid or pid <= 0:
        return False
    current = start_time(pid)
    if current is None:
        return False
    return started is None or current == started


def cmdline(pid: int) -> tuple[str, ...] | None:
    """The argv of ``pid`` as the kernel sees it, or None when unreadable."""
    try:
        raw = (PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return None
    return decode_cmdline(raw) or None


def parse_environ(data: bytes) -> dict[str, str]:
    """``NAME → value`` from ``/proc/PID/environ`` bytes (NUL separated; first ``=`` splits)."""
    env: dict[str, str] = {}
    for part in data.split(b"\0"):
        key, eq, value = part.decode("utf-8", "surrogateescape").partition("=")
        if eq and key:
            env.setdefault(key, value)
    return env


def environ(pid: int) -> dict[str, str] | None:
    """The environment ``pid`` was exec'd with, or None when unreadable (gone, another user)."""
    try:
        return parse_environ((PROC / str(pid) / "environ").read_bytes())
    except OSError:
        return None


def command_pid(pid: int) -> int:
    """The process that runs the command of ``pid``: its only child when ``pid`` is a shell
    still running ``sh -c 'VAR=x claude …'`` (dash does not exec the last command), else
    ``pid`` itself — inline assignments are only in the child's environment."""
    argv = cmdline(pid) or ()
    if len(argv) >= 2 and os.path.basename(argv[0]) in SHELLS and argv[1] == "-c":
        children = [p for p in descendants(pid) if (_stat(p) or ("", 0, 0))[1] == pid]
        if len(children) == 1:
            return children[0]
    return pid


def value_digest(value: str) -> str:
    """A short digest standing in for an environment value: secrets are never printed."""
    import hashlib

    data = value.encode("utf-8", "surrogateescape")
    return "sha256:" + hashlib.sha256(data).hexdigest()[:16]


def cwd(pid: int) -> str | None:
    """The working directory of ``pid``, or None when unreadable."""
    try:
        return os.readlink(PROC / str(pid) / "cwd")
    except OSError:
        return None


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` in the process tree."""
    return [child for child, _parent in descendant_pairs(pid)]


def descendant_pairs(pid: int) -> list[tuple[int, int]]:
    """``(pid, parent pid)`` of every live process below ``pid``, parents first."""
    children: dict[int, list[int]] = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        stat = _stat(int(entry.name))
        if stat is not None and stat[0] not in ("Z", "X"):
            children.setdefault(stat[1], []).append(int(entry.name))
    found: list[tuple[int, int]] = []
    todo = [pid]
    while todo:
        parent = todo.pop()
        for child in children.get(parent, []):
            found.append((child, parent))
            todo.append(child)
    return found


def claude_session_record(config_dir: Path, pid: int) -> dict[str, object] | None:
    """What live claude ``pid`` says about itself in ``<config_dir>/sessions/<pid>.json``;
    None when there is none, or it was left by an earlier process with the same pid."""
    try:
        data = claude.session_record_path(config_dir, pid).read_bytes()
    except OSError:
        return None
    return claude.parse_session_record(data, start_time(pid))


def claude_session_status(config_dir: Path, session_id: str) -> str | None:
    """``idle``/``busy`` of the live claude that runs ``session_id`` (None: none says so)."""
    folder = config_dir / "sessions"
    if not folder.is_dir():
        return None
    for path in folder.glob("*.json"):
        if not path.stem.isdigit():
            continue
        data = claude_session_record(config_dir, int(path.stem))
        if data is not None and data.get("sessionId") == session_id:
            return str(data.get("status", ""))
    return None


# ---------------------------------------------------------------- codex: thread-writer locks

class FileLock(NamedTuple):
    """One held lock of ``/proc/locks``: ``FLOCK``/``POSIX``/``OFDLCK``, ``READ``/``WRITE``,
    the pid that took it and the file as ``(major, minor, inode)``."""

    kind: str
    mode: str
    pid: int
    file: tuple[int, int, int]


def parse_locks(text: str) -> list[FileLock]:
    """The held locks in ``/proc/locks`` text; waiters (``->``) and odd lines are left out.

    A line reads ``1: FLOCK  ADVISORY  WRITE 29563 fe:00:2157037 0 EOF``: major and minor
    in hex, the inode in decimal.
    """
    found: list[FileLock] = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 6 or fields[1] == "->":
            continue
        kind, mode, pid, where = fields[1], fields[3], fields[4], fields[5]
        major, _, rest = where.partition(":")
        minor, _, inode = rest.partition(":")
        try:
            found.append(FileLock(kind, mode, int(pid),
                                  (int(major, 16), int(minor, 16), int(inode))))
        except ValueError:
            continue
    return found


def writer_locked_threads(locks: Iterable[FileLock], pids: Iterable[int],
                          lock_files: Mapping[str, tuple[int, int, int]]) -> tuple[str, ...]:
    """The threads (sorted) whose lock file (``thread id → (major, minor, inode)``) one of
    ``pids`` holds an exclusive ``flock`` on — how codex marks the thread it writes."""
    wanted = set(pids)
    held = {lock.file for lock in locks
            if lock.kind == "FLOCK" and lock.mode == "WRITE" and lock.pid in wanted}
    return tuple(sorted(thread for thread, file in lock_files.items() if file in held))


def codex_lock_files(codex_home: Path) -> dict[str, tuple[int, int, int]]:
    """``thread id → (major, minor, inode)`` of ``<codex_home>/thread-writer-locks/*.lock``."""
    files: dict[str, tuple[int, int, int]] = {}
    try:
        entries = list((codex_home / "thread-writer-locks").iterdir())
    except OSError:
        return files
    for entry in entries:
        if entry.suffix != ".lock" or entry.name.startswith("."):
            continue  # .coordination.lock is codex's own, no thread's
        try:
            st = entry.stat()
        except OSError:
            continue  # released and removed while we looked
        files[entry.stem] = (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
    return files


def codex_writer_locks(codex_home: Path, pid: int) -> tuple[str, ...]:
    """The threads of ``codex_home`` whose writer lock ``pid`` or a process below it holds
    (the npm ``codex`` is a node wrapper; its native child takes the lock)."""
    files = codex_lock_files(codex_home)
    if not files:
        return ()
    try:
        text = (PROC / "locks").read_text()
    except OSError:
        return ()
    return writer_locked_threads(parse_locks(text), [pid, *descendants(pid)], files)


def codex_lock_holder(codex_home: Path, thread: str) -> int | None:
    """The pid holding ``thread``'s writer lock in ``codex_home``, wherever it runs (None: no
    one) — names the holder when it is not under the pane (the shared app-server daemon)."""
    file = codex_lock_files(codex_home).get(thread)
    if file is None:
        return None
    try:
        text = (PROC / "locks").read_text()
    except OSError:
        return None
    return next((lock.pid for lock in parse_locks(text) if lock.kind == "FLOCK"
                 and lock.mode == "WRITE" and lock.file == file), None)
