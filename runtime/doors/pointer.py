"""The pointer door: write the session id to a file; the runner's next call resumes it.

Nothing is killed. A runner loop reads the pointer before each ``claude -p --resume`` call and
runs ``tl-rebuild hook-stop --wait`` after it, so the next call picks up the new session.

This module owns the pointer file, for the pointer door and the systemd door's ``tl-launch``
alike: the session id on its first line (what ``head -n 1`` gives a runner loop), written
atomically with mode 0600 — it names a private session and sits in the claude user's pointer
dir (0700). Root writing it (``tl-rebuild restart`` from apply) gives it the owner of the file
it replaces, else of its directory, so the claude user's runner or tl-launch still reads it.
Stdlib and runtime.proc only: tl-launch reads it on every start of the service.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from runtime import proc
from runtime.doors.kind import DoorKind
from runtime.errors import ConfigError, IdentityConflictError

if TYPE_CHECKING:
    from runtime.config import Config


POINTER_MODE = 0o600


def parse_pointer(text: str) -> str | None:
    """The session id a pointer's text names: its first non-blank line, stripped; None if blank."""
    lines = text.strip().splitlines()
    return lines[0].strip() if lines else None


def pointed_session(path: str | os.PathLike[str]) -> str | None:
    """The session id in pointer file ``path``, or None when it is missing, unreadable or blank."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return parse_pointer(text)


def read_pointer(path: Path) -> str:
    """The session id in the pointer file; empty or unreadable is an IdentityConflictError."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise IdentityConflictError(
            f"cannot read pointer file {str(path)!r}: {exc.strerror}"
        ) from exc
    value = parse_pointer(text)
    if not value or any(c.isspace() for c in value):
        raise IdentityConflictError(f"pointer file {str(path)!r} holds no session id")
    return value


def write_pointer(path: Path, session_id: str) -> None:
    """Replace the pointer file atomically with ``session_id`` (0600, see the module doc)."""
    proc.atomic_write(path, (session_id + "\n").encode("utf-8"), POINTER_MODE,
                      owner=_owner_for(path))


def _owner_for(path: Path) -> tuple[int, int] | None:
    """Root's write keeps the pointer the claude user's: the old file's owner, else the dir's."""
    if os.geteuid() != 0:
        return None
    for source in (path, path.parent):
        try:
            st = os.stat(source)
        except OSError:
            continue
        return st.st_uid, st.st_gid
    return None


@dataclass(frozen=True)
class PointerDoor:
    """A pointer file that a runner loop reads before each call."""

    path: Path
    name: DoorKind = DoorKind.POINTER

    @classmethod
    def from_config(cls, config: Config) -> PointerDoor:
        if not config.switch.pointer.path:
            raise ConfigError("switch.pointer.path: required for the pointer door")
        return cls(path=Path(config.switch.pointer.path).expanduser())

    def identity(self) -> str:
        return read_pointer(self.path)

    def process_pid(self, identity: str) -> int | None:
        del identity
        return None

    def screen(self) -> str:
        return ""

    def switch(self, session_id: str, resume_argv: Sequence[str], workdir: Path) -> None:
        del resume_argv, workdir  # the runner owns the argv and the cwd
        write_pointer(self.path, session_id)

    def confirm(self) -> bool:
        return False

    def settle(self) -> None:
        """Nothing to give back: a pointer switch borrows no setting."""
