"""The runtime's one door to the machine: running commands and durable file writes.

Every subprocess the runtime starts and every file it writes goes through this module, so
tests can see exactly what touches the machine, and errors name the command or path.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Protocol, runtime_checkable

from runtime.errors import ProcError
from runtime.record import Record

if TYPE_CHECKING:  # imported where a command is run: fork and plan only write files
    import subprocess


class Result(Record):
    """Outcome of one command: argv, exit code and decoded output."""

    argv: tuple[str, ...]
    rc: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.rc == 0


@runtime_checkable
class Runner(Protocol):
    """What both packages need of a machine: run a command, read a file, write one atomically.

    ``LocalRunner`` (this module) and ``provision.host.Host`` (LocalHost, the tests' FakeHost)
    satisfy it, so one fake serves tests of either side. A missing binary or a timeout raises
    the implementing package's error (ProcError here, HostError in provision).
    """

    def run(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None,
            cwd: str | None = None, timeout: float = 30.0,
            input_text: str | None = None) -> Result: ...

    def read_bytes(self, path: str) -> bytes | None: ...

    def write_file(self, path: str, data: bytes, *, mode: int | None = None) -> object: ...


class LocalRunner:
    """This machine through this module's functions: the runtime's ``Runner``."""

    def run(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None,
            cwd: str | None = None, timeout: float = 30.0,
            input_text: str | None = None) -> Result:
        return run(argv, env=env, cwd=cwd, timeout=timeout, input_text=input_text)

    def read_bytes(self, path: str) -> bytes | None:
        """The file's bytes, or None when it does not exist."""
        try:
            return Path(path).read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            raise ProcError(f"cannot read {path!r}: {exc.strerror}") from exc

    def write_file(self, path: str, data: bytes, *, mode: int | None = None) -> None:
        """``atomic_write`` (0600 unless ``mode`` says otherwise)."""
        atomic_write(path, data, 0o600 if mode is None else mode)


LOCAL = LocalRunner()


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
    import subprocess

    argv = tuple(str(a) for a in argv)
    try:
        proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE if input_text is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=dict(env) if env is not None else None, cwd=cwd, start_new_session=True)
    except FileNotFoundError as exc:
        raise ProcError(f"command not found: {argv[0]!r}") from exc
    try:
        out, err = communicate_bounded(
            proc, None if input_text is None else input_text.encode("utf-8"), timeout)
    except subprocess.TimeoutExpired as exc:
        raise ProcError(f"command timed out after {timeout:g}s: {' '.join(argv)!r}") from exc
    done = subprocess.CompletedProcess(argv, proc.returncode, out.decode("utf-8", "replace"),
                                       err.decode("utf-8", "replace"))
    result = Result(argv, done.returncode, done.stdout, done.stderr)
    if check and not result.ok:
        detail = (result.stderr or result.stdout).strip().splitlines()
        tail = detail[-1] if detail else ""
        raise ProcError(f"command failed (rc={result.rc}): {' '.join(argv)!r}: {tail}")
    return result


def communicate_bounded(proc: subprocess.Popen[bytes], data: bytes | None,
                        timeout: float) -> tuple[bytes, bytes]:
    """``proc.communicate`` within ``timeout``; on a timeout or an interrupt, end its group.

    ``proc`` must lead a session of its own (``start_new_session``): killing only the direct
    child leaves grandchildren running and, while they hold its stdout, keeps the caller
    waiting for them. The one owner of that rule (provision's LocalHost uses it too).
    """
    try:
        return proc.communicate(input=data, timeout=timeout)
    except BaseException:
        _end_group(proc)
        raise


def _end_group(proc: subprocess.Popen[bytes]) -> None:
    import signal
    import subprocess

    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        # a process that left the group (setsid) still holds the pipes: stop reading them
        for pipe in (proc.stdout, proc.stderr, proc.stdin):
            if pipe is not None:
                pipe.close()
        proc.wait()


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """fsync a directory so a rename inside it is durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _replace_atomically(target: Path, fill: Callable[[BinaryIO], object], mode: int,
                        failure: str, owner: tuple[int, int] | None = None) -> None:
    """Temp file beside ``target`` (``owner``, ``mode``), ``fill`` it, fsync, rename, fsync dir.

    Any failure removes the temp file; an OSError becomes ``ProcError(f"{failure}: {strerror}")``.
    A ``target`` that is there but is neither a file nor a symlink is refused: the rename would
    put a file in place of a device or a pipe (``--manifest /dev/null`` run as root).
    """
    try:
        kind = os.lstat(target).st_mode
    except FileNotFoundError:
        kind = stat.S_IFREG
    except OSError as exc:
        raise ProcError(f"{failure}: {exc.strerror}") from exc
    if not (stat.S_ISREG(kind) or stat.S_ISLNK(kind) or stat.S_ISDIR(kind)):
        raise ProcError(f"{failure}: it exists and is not a regular file")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise ProcError(f"cannot write {str(target)!r}: {exc.strerror}") from exc
    try:
        with os.fdopen(fd, "wb") as handle:
            if owner is not None:  # before the mode: a chown may clear set-id bits
                os.fchown(handle.fileno(), *owner)
            os.fchmod(handle.fileno(), mode)
            fill(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
        fsync_dir(target.parent)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(exc, OSError):
            raise ProcError(f"{failure}: {exc.strerror}") from exc
        raise


def atomic_write(path: str | os.PathLike[str], data: bytes, mode: int = 0o600, *,
                 owner: tuple[int, int] | None = None) -> None:
    """Write ``data`` to ``path`` atomically: temp file in its dir, fsync, rename, fsync dir.

    ``owner`` (uid, gid) gives the new file that owner (root writing another user's file).
    """
    target = Path(path)
    _replace_atomically(target, lambda handle: handle.write(data), mode,
                        f"cannot write {str(target)!r}", owner)


def atomic_write_chunks(
    path: str | os.PathLike[str], chunks: Iterable[bytes], mode: int = 0o600
) -> None:
    """``atomic_write`` of data given in pieces, written as they come (never joined in memory)."""
    target = Path(path)
    _replace_atomically(target, lambda handle: handle.writelines(chunks), mode,
                        f"cannot write {str(target)!r}")


def ensure_dir(path: str | os.PathLike[str], mode: int = 0o700) -> Path:
    """Create ``path`` (and parents) if missing and set its mode; return it."""
    directory = Path(path)
    _make_dirs(directory, mode, chmod=True)
    return directory


def make_parents(path: str | os.PathLike[str], mode: int = 0o700) -> None:
    """Create the missing directories above ``path`` with ``mode``; existing ones are left as
    they are (``ensure_dir`` would chmod them)."""
    _make_dirs(Path(path).parent, mode, chmod=False)


def _make_dirs(directory: Path, mode: int, *, chmod: bool) -> None:
    try:
        directory.mkdir(parents=True, exist_ok=True, mode=mode)
        if chmod:
            os.chmod(directory, mode)
    except FileExistsError as exc:
        raise ProcError(
            f"cannot create directory {str(directory)!r}: it exists and is not a directory"
        ) from exc
    except OSError as exc:
        raise ProcError(f"cannot create directory {str(directory)!r}: {exc.strerror}") from exc


def append_line(path: str | os.PathLike[str], line: bytes, mode: int = 0o600) -> None:
    """Append one line to ``path`` (created with ``mode``) and fsync it.

    Every byte is written or it is an error: a full disk takes only part of a write and
    says nothing. A file whose last line was torn that way (or by a crash) gets a newline
    first, so the torn line does not swallow this one too.
    """
    data = line if line.endswith(b"\n") else line + b"\n"
    try:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, mode)
        try:
            end = os.fstat(fd).st_size
            if end and os.pread(fd, 1, end - 1) != b"\n":
                data = b"\n" + data
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                if written <= 0:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                view = view[written:]
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise ProcError(f"cannot append to {str(path)!r}: {exc.strerror}") from exc


def copy_file(src: str | os.PathLike[str], dst: str | os.PathLike[str], mode: int = 0o600) -> str:
    """Copy ``src`` to ``dst`` atomically with ``mode``; return the SHA-256 of the bytes written."""
    target = Path(dst)
    digest = hashlib.sha256()

    def fill(writer: BinaryIO) -> None:
        with open(src, "rb") as reader:
            while chunk := reader.read(1 << 20):
                digest.update(chunk)
                writer.write(chunk)

    _replace_atomically(target, fill, mode, f"cannot copy {str(src)!r} to {str(target)!r}")
    return digest.hexdigest()


def remove(path: str | os.PathLike[str]) -> bool:
    """Remove a file or a whole directory tree; return False when it did not exist."""
    target = Path(path)
    try:
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        else:
            target.unlink()
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise ProcError(f"cannot remove {str(target)!r}: {exc.strerror}") from exc
    return True


@contextmanager
def locked(path: str | os.PathLike[str], timeout: float | None = None) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created 0600) for the duration of the block.

    The holder writes its pid and start time into the file, so a caller that waits longer
    than ``timeout`` seconds gets a ProcError naming who holds it ("locked by pid N since …").
    """
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise ProcError(f"cannot open lock file {str(path)!r}: {exc.strerror}") from exc
    try:
        _acquire(fd, path, timeout)
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()} {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}"
                      .encode(), 0)
        except OSError:
            pass  # the holder note is a courtesy for error messages, not part of the lock
        yield
    finally:
        os.close(fd)


def _acquire(fd: int, path: str | os.PathLike[str], timeout: float | None) -> None:
    if timeout is None:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return
    deadline = time.monotonic() + max(0.0, timeout)
    pause = 0.001
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                try:
                    holder = os.pread(fd, 200, 0).decode("utf-8", "replace").split()
                except OSError:
                    holder = []
                who = (f"pid {holder[0]} since {holder[1]}" if len(holder) == 2
                       else "another process")
                raise ProcError(f"{str(path)!r} locked by {who}; gave up after {timeout:g}s"
                                ) from None
            time.sleep(pause)
            pause = min(pause * 2, 0.05)


LOG_BYTES = 1 << 20  # a log file is rotated once it holds this much
LOG_FILES = 5  # the log plus four rotated ones: LOG.1 (newest) … LOG.4 (oldest)


def rotate_log(
    path: str | os.PathLike[str], limit: int = LOG_BYTES, files: int = LOG_FILES
) -> bool:
    """Rotate ``path`` when it holds ``limit`` bytes or more: LOG → LOG.1 → … → LOG.{files-1}.

    The oldest rotated file is dropped, so the log never holds much more than ``files`` ×
    ``limit`` bytes. Returns True when it rotated. A writer still holding the old file keeps
    writing to it (now LOG.1): nothing is lost.
    """
    target = Path(path)
    try:
        if target.stat().st_size < limit:
            return False
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise ProcError(f"cannot stat log {str(target)!r}: {exc.strerror}") from exc
    try:
        for number in range(files - 1, 0, -1):
            older = target.with_name(f"{target.name}.{number}")
            newer = target.with_name(f"{target.name}.{number - 1}") if number > 1 else target
            if newer.exists():
                os.replace(newer, older)
    except OSError as exc:
        raise ProcError(f"cannot rotate log {str(target)!r}: {exc.strerror}") from exc
    return True


# children ``spawn_detached(watch=True)`` started, until ``wait_spawned`` asks for them: a Popen
# dropped at once reaps a child that already exited (``Popen.__del__`` polls it), and the exit
# code of a sudo that refused was lost before anyone could read it
_WATCHED: dict[int, subprocess.Popen[bytes]] = {}


def spawn_detached(
    argv: Sequence[str],
    *,
    log_path: str | os.PathLike[str],
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    watch: bool = False,
) -> int:
    """Start ``argv`` in its own session (``setsid``), output to ``log_path``; return its pid.

    stdin is /dev/null and nothing is inherited from the caller's terminal or pipes, so the
    caller (a Stop hook) can exit at once and the child survives the caller's pane being killed.
    ``watch``: keep the child so ``wait_spawned`` can read its exit code.
    """
    import subprocess

    argv = tuple(str(a) for a in argv)
    rotate_log(log_path)
    try:
        log_fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    except OSError as exc:
        raise ProcError(f"cannot open log {str(log_path)!r}: {exc.strerror}") from exc
    try:
        child = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log_fd,
            stderr=log_fd,
            start_new_session=True,
            close_fds=True,
            env=dict(env) if env is not None else None,
            cwd=cwd,
        )
    except OSError as exc:
        raise ProcError(f"cannot start {' '.join(argv)!r}: {exc.strerror}") from exc
    finally:
        os.close(log_fd)
    if watch:
        _WATCHED[child.pid] = child
    return child.pid


def wait_spawned(pid: int, timeout: float) -> int | None:
    """The exit code of ``pid`` (started with ``spawn_detached(watch=True)``) once it exits
    within ``timeout`` seconds; None when it still runs or was not watched. Forgets it."""
    import subprocess

    child = _WATCHED.pop(pid, None)
    if child is None:
        return None
    try:
        return int(child.wait(timeout))
    except subprocess.TimeoutExpired:
        return None
