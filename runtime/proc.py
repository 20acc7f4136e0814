"""The runtime's one door to the machine: running commands and durable file writes.

Every subprocess the runtime starts and every file it writes goes through this module, so
tests can see exactly what touches the machine, and errors name the command or path.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from runtime.errors import ProcError


@dataclass(frozen=True)
class Result:
    """Outcome of one command: argv, exit code and decoded output."""

    argv: tuple[str, ...]
    rc: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.rc == 0


def run(
    argv: Sequence[str],
    *,
    timeout: float = 30.0,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    check: bool = False,
    input_text: str | None = None,
) -> Result:
    """Run ``argv`` (no shell) and return its result; a missing binary or timeout is a ProcError."""
    argv = tuple(str(a) for a in argv)
    try:
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            input=input_text,
            stdin=None if input_text is not None else subprocess.DEVNULL,
        )
    except FileNotFoundError as exc:
        raise ProcError(f"command not found: {argv[0]!r}") from exc
    except subprocess.TimeoutExpired as exc:
        raise ProcError(f"command timed out after {timeout:g}s: {' '.join(argv)!r}") from exc
    result = Result(argv, done.returncode, done.stdout, done.stderr)
    if check and not result.ok:
        detail = (result.stderr or result.stdout).strip().splitlines()
        tail = detail[-1] if detail else ""
        raise ProcError(f"command failed (rc={result.rc}): {' '.join(argv)!r}: {tail}")
    return result


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """fsync a directory so a rename inside it is durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: str | os.PathLike[str], data: bytes, mode: int = 0o600) -> None:
    """Write ``data`` to ``path`` atomically: temp file in the same dir, fsync, rename, fsync dir."""
    target = Path(path)
    directory = target.parent
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise ProcError(f"cannot write {str(target)!r}: {exc.strerror}") from exc
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), mode)
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
        fsync_dir(directory)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise ProcError(f"cannot write {str(target)!r}: {exc.strerror}") from exc


def ensure_dir(path: str | os.PathLike[str], mode: int = 0o700) -> Path:
    """Create ``path`` (and parents) if missing and set its mode; return it."""
    directory = Path(path)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        os.chmod(directory, mode)
    except OSError as exc:
        raise ProcError(f"cannot create directory {str(directory)!r}: {exc.strerror}") from exc
    return directory
