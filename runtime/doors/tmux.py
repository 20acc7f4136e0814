"""The tmux door: ``respawn-pane -k`` on an exact target, identity ``#{pane_pid}``.

A switch borrows one pane option: ``remain-on-exit on``, so that a new process that exits at
once ("No conversation found") leaves a pane the rollback can respawn into. The pane's own
value (or its absence: the window's or global value then applies) is saved first in the pane
user option ``@threadline-remain-on-exit`` — on the pane itself, so a rollback in another
process or a worker that crashed still finds it — and ``settle()`` puts it back once the
operation has ended. ``respawn-pane`` keeps pane options, and tmux 3.3 does not close a dead
pane when ``remain-on-exit`` is unset later, so the rollback's pane survives the restore.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from runtime import proc
from runtime.doors.kind import DoorKind
from runtime.errors import ConfigError, DoorError, IdentityConflictError, ProcError

if TYPE_CHECKING:
    from runtime.config import Config

SAVED_OPTION = "@threadline-remain-on-exit"
UNSET = ""  # saved value meaning "the pane had no remain-on-exit of its own"


def tmux_argv(socket_name: str = "", socket_path: str = "") -> list[str]:
    """``tmux`` addressing one server: ``-S PATH`` when a socket path is given (another user's
    server), else ``-L NAME`` when a socket name is, else the default server."""
    if socket_path:
        return ["tmux", "-S", socket_path]
    return ["tmux", "-L", socket_name] if socket_name else ["tmux"]


def respawn_command(resume_argv: Sequence[str], workdir: Path | str) -> str:
    """The shell command tmux runs in the pane: ``cd WORKDIR && exec ARGV``, quoted."""
    return f"cd {shlex.quote(str(workdir))} && exec {shlex.join(resume_argv)}"


@dataclass(frozen=True)
class TmuxDoor:
    """One exact pane target on one tmux server (``-S socket_path``, else ``-L socket_name``
    when set)."""

    target: str
    socket_name: str = ""
    socket_path: str = ""
    name: DoorKind = DoorKind.TMUX

    @classmethod
    def from_config(cls, config: Config) -> TmuxDoor:
        target = config.switch.tmux.target
        if not target:
            raise ConfigError("switch.tmux.target: required for the tmux door")
        return cls(target=target, socket_name=config.switch.tmux.socket_name,
                   socket_path=config.switch.tmux.socket_path)

    def _tmux(self, *args: str) -> proc.Result:
        return proc.run([*tmux_argv(self.socket_name, self.socket_path), *args], timeout=10)

    def identity(self) -> str:
        try:
            result = self._tmux(
                "display-message", "-p", "-t", self.target, "#{pane_dead} #{pane_pid}"
            )
        except ProcError as exc:
            raise IdentityConflictError(
                f"cannot read the identity of tmux pane {self.target!r}: {exc}"
            ) from exc
        dead, _, value = result.stdout.strip().partition(" ")
        if result.ok and dead == "1":
            raise IdentityConflictError(f"tmux pane {self.target!r} is dead (pid {value})")
        if not result.ok or not value.isdigit():
            detail = result.stderr.strip() or "empty pane_pid"
            raise IdentityConflictError(
                f"tmux pane {self.target!r} has no readable identity: {detail}"
            )
        return value

    def process_pid(self, identity: str) -> int | None:
        return int(identity) if identity.isdigit() else None

    def screen(self) -> str:
        try:
            result = self._tmux("capture-pane", "-p", "-J", "-t", self.target)  # visible only
        except ProcError:
            return ""
        return result.stdout if result.ok else ""

    def switch(self, session_id: str, resume_argv: Sequence[str], workdir: Path) -> None:
        del session_id  # the argv already names it
        command = respawn_command(resume_argv, workdir)
        self._borrow_remain_on_exit()
        result = self._tmux("respawn-pane", "-k", "-t", self.target, command)
        if not result.ok:
            raise DoorError(
                f"tmux respawn-pane -k -t {self.target!r} failed: {result.stderr.strip()}"
            )

    def confirm(self) -> bool:
        result = self._tmux("send-keys", "-t", self.target, "Enter")
        return result.ok

    def _pane_option(self, name: str) -> str | None:
        """The pane's own value of ``name`` ("" when a built-in option is unset on the pane);
        None for an unset user option or when tmux cannot be asked."""
        try:
            result = self._tmux("show-options", "-p", "-v", "-t", self.target, name)
        except ProcError:
            return None
        return result.stdout.rstrip("\n") if result.ok else None

    def _borrow_remain_on_exit(self) -> None:
        """Save the pane's own ``remain-on-exit`` (once per borrow), then set it on."""
        if self._pane_option(SAVED_OPTION) is None:
            own = self._pane_option("remain-on-exit")
            if own is None:
                raise DoorError(f"cannot read remain-on-exit of tmux pane {self.target!r}")
            self._tmux("set-option", "-p", "-t", self.target, SAVED_OPTION, own or UNSET)
        self._tmux("set-option", "-p", "-t", self.target, "remain-on-exit", "on")

    def settle(self) -> None:
        """Give the pane back the ``remain-on-exit`` it had before the switch (no-op if none)."""
        saved = self._pane_option(SAVED_OPTION)
        if saved is None:
            return
        if saved == UNSET:
            restore = self._tmux("set-option", "-p", "-u", "-t", self.target, "remain-on-exit")
        else:
            restore = self._tmux("set-option", "-p", "-t", self.target, "remain-on-exit", saved)
        if not restore.ok:
            raise DoorError(f"cannot restore remain-on-exit {saved or 'unset'!r} on tmux pane "
                            f"{self.target!r}: {restore.stderr.strip()}")
        self._tmux("set-option", "-p", "-u", "-t", self.target, SAVED_OPTION)
