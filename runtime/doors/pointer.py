"""The pointer door: write the session id to a file; the runner's next call resumes it.

Nothing is killed. A runner loop reads the pointer before each ``claude -p --resume`` call and
runs ``tl-rebuild hook-stop --wait`` after it, so the next call picks up the new session.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from runtime import proc
from runtime.doors.kind import DoorKind
from runtime.errors import ConfigError, IdentityConflictError

if TYPE_CHECKING:
    from runtime.config import Config


def read_pointer(path: Path) -> str:
    """The session id in the pointer file; empty or unreadable is an IdentityConflictError."""
    try:
        value = path.read_text("utf-8").strip()
    except OSError as exc:
        raise IdentityConflictError(
            f"cannot read pointer file {str(path)!r}: {exc.strerror}"
        ) from exc
    if not value or any(c.isspace() for c in value):
        raise IdentityConflictError(f"pointer file {str(path)!r} holds no session id")
    return value


def write_pointer(path: Path, session_id: str) -> None:
    """Replace the pointer file atomically with ``session_id`` (0600)."""
    proc.atomic_write(path, (session_id + "\n").encode("utf-8"), 0o600)


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
