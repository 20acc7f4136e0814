"""The provision package's one door to the machine: commands (plumbum) and file reads/writes.

Every task reads facts and every action changes the machine through a ``Host``. ``LocalHost``
drives this machine (``connection: local``); tests pass ``tests/fakes.py: FakeHost``, which
serves canned files and command outputs and records what was written.
"""

from __future__ import annotations

import os
import stat as stat_module
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from provision.errors import HostError
from runtime.errors import ProcError
from runtime.proc import Result, atomic_write


@dataclass(frozen=True)
class FileStat:
    """The parts of ``stat`` tasks compare: kind, permission bits, owner, mtime."""

    is_dir: bool
    mode: int
    uid: int
    gid: int
    mtime: float
    executable: bool


class Host:
    """The interface tasks and actions use; LocalHost and FakeHost implement it.

    A Host is a ``runtime.proc.Runner`` (run, read_bytes, write_file) plus what provision
    alone needs (stat, links, directories, /proc).
    """

    name: str = "localhost"

    def run(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None,
            cwd: str | None = None, timeout: float = 30.0,
            input_text: str | None = None) -> Result:
        """Run ``argv`` without a shell; a missing binary or a timeout is a HostError."""
        raise NotImplementedError

    def read_bytes(self, path: str) -> bytes | None:
        """The file's bytes, or None when it does not exist."""
        raise NotImplementedError

    def stat(self, path: str) -> FileStat | None:
        """The file's stat (following symlinks), or None when it does not exist."""
        raise NotImplementedError

    def readlink(self, path: str) -> str | None:
        """The symlink's target (e.g. /proc/PID/cwd), or None when unreadable."""
        raise NotImplementedError

    def listdir(self, path: str) -> list[str]:
        """Names in a directory ([] when it does not exist)."""
        raise NotImplementedError

    def realpath(self, path: str) -> str:
        """``path`` (absolute) with every symlink in it resolved through ``readlink``."""
        parts, done, hops = [p for p in path.split("/") if p], "", 0
        while parts:
            part = parts.pop(0)
            if part in (".", ""):
                continue
            if part == "..":
                done = done.rsplit("/", 1)[0]
                continue
            target = self.readlink(f"{done}/{part}")
            hops += 1
            if target is None or hops > 40:
                done = f"{done}/{part}"
                continue
            parts = [p for p in target.split("/") if p] + parts
            if target.startswith("/"):
                done = ""
        return done or "/"

    def which(self, name: str) -> str | None:
        """The absolute path of ``name`` found on PATH (or ``name`` itself if absolute)."""
        raise NotImplementedError

    def write_file(self, path: str, data: bytes, *, mode: int | None = None,
                   backup: bool = True, overwrite_read_only: bool = False) -> str | None:
        """Replace ``path`` atomically; return the backup path of the old file, if any."""
        raise NotImplementedError

    def ensure_dir(self, path: str, mode: int) -> None:
        """Create ``path`` with parents, then set ``mode`` on it."""
        raise NotImplementedError

    def read_text(self, path: str) -> str | None:
        data = self.read_bytes(path)
        return None if data is None else data.decode("utf-8", "replace")

    def proc_cmdline(self, pid: int) -> tuple[str, ...]:
        """argv of a live process from /proc/PID/cmdline (() when gone or a zombie)."""
        from runtime.agents import decode_cmdline

        return decode_cmdline(self.read_bytes(f"/proc/{pid}/cmdline") or b"")

    def proc_children(self, pid: int) -> list[int]:
        """Direct children of ``pid`` from /proc/PID/task/*/children."""
        children: list[int] = []
        for tid in self.listdir(f"/proc/{pid}/task"):
            text = self.read_text(f"/proc/{pid}/task/{tid}/children") or ""
            children.extend(int(token) for token in text.split())
        return children


class LocalHost(Host):
    """This machine, through plumbum (commands) and the os module (files)."""

    def __init__(self, name: str = "localhost") -> None:
        self.name = name

    def run(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None,
            cwd: str | None = None, timeout: float = 30.0,
            input_text: str | None = None) -> Result:
        import subprocess

        from plumbum import local
        from plumbum.commands.processes import CommandNotFound

        from runtime.proc import communicate_bounded

        argv = tuple(str(arg) for arg in argv)
        try:
            command: Any = local[argv[0]][argv[1:]]
            if env is not None:
                command = command.with_env(**env)
            if cwd is not None:
                command = command.with_cwd(cwd)
            # a session of its own: a timeout ends the whole group (runtime.proc owns the rule)
            stdin = subprocess.DEVNULL if input_text is None else subprocess.PIPE
            proc = command.popen(stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 new_session=True)
        except CommandNotFound as exc:
            raise HostError(f"command not found: {argv[0]!r}") from exc
        except OSError as exc:
            raise HostError(f"command could not start: {' '.join(argv)!r}: {exc}") from exc
        data = None if input_text is None else input_text.encode("utf-8")
        try:
            out, err = communicate_bounded(proc, data, timeout)
        except subprocess.TimeoutExpired as exc:
            raise HostError(f"command timed out after {timeout:g}s: {' '.join(argv)!r}") from exc
        rc = proc.returncode
        return Result(argv, int(rc), _text(out), _text(err))

    def read_bytes(self, path: str) -> bytes | None:
        try:
            return Path(path).read_bytes()
        except (FileNotFoundError, NotADirectoryError, ProcessLookupError):
            return None
        except IsADirectoryError as exc:
            raise HostError(f"expected a file, found a directory: {path!r}") from exc
        except OSError as exc:
            raise HostError(f"cannot read {path!r}: {exc.strerror}") from exc

    def stat(self, path: str) -> FileStat | None:
        try:
            st = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            raise HostError(f"cannot stat {path!r}: {exc.strerror}") from exc
        return FileStat(stat_module.S_ISDIR(st.st_mode), stat_module.S_IMODE(st.st_mode),
                        st.st_uid, st.st_gid, st.st_mtime, os.access(path, os.X_OK))

    def readlink(self, path: str) -> str | None:
        try:
            return os.readlink(path)
        except OSError:
            return None

    def realpath(self, path: str) -> str:
        return os.path.realpath(path)

    def listdir(self, path: str) -> list[str]:
        try:
            return sorted(os.listdir(path))
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            return []

    def which(self, name: str) -> str | None:
        import shutil

        return shutil.which(name)

    def write_file(self, path: str, data: bytes, *, mode: int | None = None,
                   backup: bool = True, overwrite_read_only: bool = False) -> str | None:
        """A symlink is written through to its target (the link and the user's dotfiles
        stay); a dangling link, a directory or a read-only file is refused untouched; a
        failed write removes the backup it made."""
        path = _write_target(path)
        target = Path(path)
        old = self.stat(path)
        if old is not None and old.is_dir:
            raise HostError(f"cannot write {path!r}: it is a directory; nothing written")
        if old is not None and not old.mode & 0o200 and not overwrite_read_only:
            raise HostError(f"{path!r} is read-only (mode {old.mode:04o}); nothing written — "
                            "make it writable (chmod u+w) or set install.overwrite_read_only")
        final_mode = mode if mode is not None else (old.mode if old else 0o644)
        backup_path = None
        # root replacing another user's file (settings.json of the claude user) keeps its owner
        owner = (old.uid, old.gid) if old is not None and os.geteuid() == 0 else None
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            if backup and old is not None:
                stem = f"{path}.{time.strftime('%Y%m%dT%H%M%S')}.{os.getpid()}"
                backup_path, n = f"{stem}~", 1
                while os.path.lexists(backup_path):  # a second write of it in this second
                    backup_path, n = f"{stem}.{n}~", n + 1
                atomic_write(backup_path, target.read_bytes(), old.mode, owner=owner)
            atomic_write(target, data, final_mode, owner=owner)
        except (OSError, ProcError) as exc:
            if backup_path is not None:
                Path(backup_path).unlink(missing_ok=True)
            cause = exc.__cause__ if isinstance(exc.__cause__, OSError) else exc
            reason = cause.strerror if isinstance(cause, OSError) and cause.strerror else cause
            raise HostError(f"cannot write {path!r}: {reason}") from exc
        return backup_path

    def ensure_dir(self, path: str, mode: int) -> None:
        try:
            os.makedirs(path, mode=mode, exist_ok=True)
            os.chmod(path, mode)
        except OSError as exc:
            raise HostError(f"cannot create directory {path!r}: {exc.strerror}") from exc


def _write_target(path: str) -> str:
    """The file a write of ``path`` must change: ``path``, or the file its symlink names."""
    if not os.path.islink(path):
        return path
    resolved = os.path.realpath(path)
    if not os.path.exists(resolved):
        raise HostError(f"{path!r} is a symlink to {resolved!r}, which does not exist; "
                        "nothing written — create the target or replace the link")
    return resolved


def _text(value: str | bytes) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value
