"""The tmux door: ``respawn-pane -k`` on an exact target, identity ``#{pane_pid}``."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from runtime import proc
from runtime.errors import ConfigError, DoorError, IdentityConflictError, ProcError

if TYPE_CHECKING:
    from runtime.config import Config


def respawn_command(resume_argv: Sequence[str], workdir: Path | str) -> str:
    """The shell command tmux runs in the pane: ``cd WORKDIR && exec ARGV``, quoted."""
    return f"cd {shlex.quote(str(workdir))} && exec {shlex.join(resume_argv)}"


@dataclass(frozen=True)
class TmuxDoor:
    """One exact pane target on one tmux server (``-L socket_name`` when set)."""

    target: str
    socket_name: str = ""
    name: str = "tmux"

    @classmethod
    def from_config(cls, config: Config) -> TmuxDoor:
        target = config.switch.tmux.target
        if not target:
            raise ConfigError("switch.tmux.target: required for the tmux door")
        return cls(target=target, socket_name=config.switch.tmux.socket_name)

    def _tmux(self, *args: str) -> proc.Result:
        base = ["tmux", "-L", self.socket_name] if self.socket_name else ["tmux"]
        return proc.run([*base, *args], timeout=10)

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
        # Keep the pane if the new process exits at once ("No conversation found"): the
        # rollback needs a pane to respawn the old session into.
        self._tmux("set-option", "-p", "-t", self.target, "remain-on-exit", "on")
        result = self._tmux("respawn-pane", "-k", "-t", self.target, command)
        if not result.ok:
            raise DoorError(
                f"tmux respawn-pane -k -t {self.target!r} failed: {result.stderr.strip()}"
            )

    def confirm(self) -> bool:
        result = self._tmux("send-keys", "-t", self.target, "Enter")
        return result.ok
