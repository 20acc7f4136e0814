"""The door protocol: how the worker reads who is running and switches the running claude.

A door answers three questions and does one thing:
- ``identity()``: the compare-and-swap token of what runs now (tmux ``#{pane_pid}``, systemd
  ``MainPID``, pointer file content). Empty or unreadable is an IdentityConflictError — a
  conflict, never a match.
- ``process_pid(identity)``: the pid of the claude process behind an identity (None when the
  door has no process, as for the pointer door).
- ``screen()``: recent output of the claude process (pane text, journal), for the health check.
- ``switch(session_id, resume_argv, workdir)``: make the target run ``session_id``.
- ``confirm()``: press Enter in the claude's terminal (the development-channels warning that
  claude shows on every start with ``--dangerously-load-development-channels``).
- ``settle()``: once the operation has ended (activated, rolled back or failed), give back any
  setting the switch borrowed from the user's target (tmux: the pane's ``remain-on-exit``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from runtime.errors import ConfigError

if TYPE_CHECKING:
    from runtime.config import Config


class Door(Protocol):
    """What the worker needs from a door."""

    @property
    def name(self) -> str:
        """``tmux`` | ``systemd`` | ``pointer``."""
        ...

    def identity(self) -> str:
        """The current identity; raise IdentityConflictError when empty or unreadable."""
        ...

    def process_pid(self, identity: str) -> int | None:
        """The claude pid behind ``identity`` (None for doors without a process)."""
        ...

    def screen(self) -> str:
        """Recent output of the running claude ("" when the door has none)."""
        ...

    def switch(self, session_id: str, resume_argv: Sequence[str], workdir: Path) -> None:
        """Make the target run ``session_id`` with ``resume_argv`` in ``workdir``."""
        ...

    def confirm(self) -> bool:
        """Answer a start-up prompt with its preselected choice; False when the door cannot."""
        ...

    def settle(self) -> None:
        """Restore what the switch borrowed from the target; a no-op when nothing was."""
        ...


def open_door(config: Config) -> Door:
    """The door named by ``switch.door``, built from the config."""
    name = config.switch.door
    if name == "tmux":
        from runtime.doors.tmux import TmuxDoor

        return TmuxDoor.from_config(config)
    if name == "pointer":
        from runtime.doors.pointer import PointerDoor

        return PointerDoor.from_config(config)
    if name == "systemd":
        from runtime.doors.systemd import SystemdDoor

        return SystemdAdapter(SystemdDoor.from_config(config))
    raise ConfigError(f"switch.door: unknown door {name!r}")


class SystemdAdapter:
    """The systemd door seen through this protocol: MainPID is the claude pid."""

    name = "systemd"

    def __init__(self, door: Any) -> None:
        self.door = door

    def identity(self) -> str:
        return str(self.door.identity())

    def process_pid(self, identity: str) -> int | None:
        return int(identity) if identity.isdigit() else None

    def screen(self) -> str:
        return ""

    def switch(self, session_id: str, resume_argv: Sequence[str], workdir: Path) -> None:
        del resume_argv, workdir  # tl-launch builds the argv and the unit sets the cwd
        self.door.switch(session_id)

    def confirm(self) -> bool:
        return False

    def settle(self) -> None:
        """Nothing to give back: a unit restart borrows no setting."""
