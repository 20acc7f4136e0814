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
from typing import TYPE_CHECKING, Protocol

from runtime.doors.kind import DoorKind
from runtime.errors import ConfigError

if TYPE_CHECKING:
    from runtime.config import Config


class Door(Protocol):
    """What the worker needs from a door."""

    @property
    def name(self) -> DoorKind:
        """Which door this is; what the kind means elsewhere is a property of DoorKind."""
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
    match config.switch.door:
        case DoorKind.TMUX:
            from runtime.doors.tmux import TmuxDoor

            return TmuxDoor.from_config(config)
        case DoorKind.POINTER:
            from runtime.doors.pointer import PointerDoor

            return PointerDoor.from_config(config)
        case DoorKind.SYSTEMD:
            from runtime.doors.systemd import SystemdDoor

            return SystemdDoor.from_config(config)
    raise ConfigError(f"switch.door: unknown door {config.switch.door!r}")
