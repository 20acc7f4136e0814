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

from runtime.doors.kind import DoorKind
from runtime.errors import ConfigError, DoorError

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

            terminal = None
            if config.switch.tmux.target:
                from runtime.doors.tmux import TmuxDoor

                terminal = TmuxDoor.from_config(config)
            return SystemdAdapter(SystemdDoor.from_config(config), terminal)
    raise ConfigError(f"switch.door: unknown door {config.switch.door!r}")


class SystemdAdapter:
    """The systemd door seen through this protocol.

    Claude is a TUI: started as a unit's bare ExecStart it gets no terminal and 2.1.328 exits
    at once ("Input must be provided either through stdin or as a prompt argument when using
    --print"). A unit therefore runs claude inside a terminal, normally tmux (``Type=forking``,
    ``tmux new-session -d … 'tl-launch --pointer P -- claude …'``). When ``switch.tmux.target``
    names that pane, it is the door's terminal: the claude pid is the pane's pid, the screen
    is the pane's text and ``confirm`` presses Enter there (the development-channels warning
    after every restart). Without it, MainPID is the claude pid and nothing can be answered.
    """

    name = DoorKind.SYSTEMD

    def __init__(self, door: Any, terminal: Any = None) -> None:
        self.door = door
        self.terminal = terminal

    def identity(self) -> str:
        return str(self.door.identity())

    def process_pid(self, identity: str) -> int | None:
        if self.terminal is None:
            return int(identity) if identity.isdigit() else None
        try:
            return self.terminal.process_pid(self.terminal.identity())  # type: ignore[no-any-return]
        except DoorError:
            return None

    def screen(self) -> str:
        return str(self.terminal.screen()) if self.terminal is not None else ""

    def switch(self, session_id: str, resume_argv: Sequence[str], workdir: Path) -> None:
        del resume_argv, workdir  # tl-launch builds the argv and the unit sets the cwd
        self.door.switch(session_id)

    def confirm(self) -> bool:
        return bool(self.terminal.confirm()) if self.terminal is not None else False

    def settle(self) -> None:
        """Nothing to give back: a unit restart borrows no setting."""
