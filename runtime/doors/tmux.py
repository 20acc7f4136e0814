"""The tmux door: ``respawn-pane -k`` on an exact target, identity ``#{pane_pid}``.

Exact means exactly the configured server and pane, whatever the caller's surroundings: the
default server is named (``-L default``), so a ``TMUX`` variable of the shell or pane the
command runs in cannot redirect it to another server; a ``SESSION:…`` target matches that
session name only (``=SESSION:…``), never the prefix of another session once it is gone.
The new process is started by tmux itself (``respawn-pane -c WORKDIR ARGV…``, exec'd without
a shell), so the user's ``default-shell`` — fish, nushell, … — never parses the argv.

A switch borrows one pane option: ``remain-on-exit on``, so that a new process that exits at
once ("No conversation found") leaves a pane the rollback can respawn into. The pane's own
value (or its absence: the window's or global value then applies) is saved first in the pane
user option ``@threadline-remain-on-exit`` — on the pane itself, so a rollback in another
process or a worker that crashed still finds it — and ``settle()`` puts it back once the
operation has ended. ``respawn-pane`` keeps pane options, and tmux 3.3 does not close a dead
pane when ``remain-on-exit`` is unset later, so the rollback's pane survives the restore.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from runtime import proc
from runtime.doors.kind import DoorKind
from runtime.doors.tmux_text import parse_start_command, parse_tmux_environment, removed_names
from runtime.errors import ConfigError, DoorError, IdentityConflictError, ProcError

if TYPE_CHECKING:
    from runtime.config import Config

SAVED_OPTION = "@threadline-remain-on-exit"
UNSET = ""  # saved value meaning "the pane had no remain-on-exit of its own"
ENTER_BUFFER = "threadline-enter"  # pasted and deleted at once: the user's buffers stay as they are


DEFAULT_SOCKET = "default"  # tmux's own name for the server of ``tmux`` without -L/-S


def tmux_argv(socket_name: str = "", socket_path: str = "") -> list[str]:
    """``tmux`` addressing one server: ``-S PATH`` when a socket path is given (another user's
    server), else ``-L NAME`` when a socket name is, else ``-L default`` — never the server a
    ``TMUX`` variable in the environment names (a plain ``tmux`` inside any pane goes there)."""
    if socket_path:
        return ["tmux", "-S", socket_path]
    return ["tmux", "-L", socket_name or DEFAULT_SOCKET]


def exact_target(target: str) -> str:
    """``target`` as tmux matches it exactly: ``SESSION:WINDOW.PANE`` becomes
    ``=SESSION:WINDOW.PANE`` (without ``=``, tmux takes a session whose name merely starts
    with SESSION when SESSION itself is gone); ids (``%3``, ``$1``, ``@2``) stay as given."""
    session, colon, _ = target.partition(":")
    if not colon or not session or session[0] in "=%$@":
        return target
    return "=" + target


@dataclass(frozen=True)
class DeadPane:
    """A pane whose program has exited and which tmux keeps (``remain-on-exit``): the dead
    program's pid, the pane's start command as tmux shows it, and that command read as the
    program's argv and the assignments in front of it (``parse_start_command``)."""

    pid: str
    command: str
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...]


def pane_command(argv: Sequence[str], workdir: Path | str) -> list[str]:
    """The ``respawn-pane``/``new-session`` arguments that start ``argv`` in ``workdir``:
    ``-c WORKDIR -- ARGV…``. tmux execs two or more words itself; one word would go through
    the user's ``default-shell``, so a lone program name gets ``env`` in front."""
    words = list(argv) if len(argv) > 1 else ["env", *argv]
    return ["-c", str(workdir), "--", *words]


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

    @property
    def pane(self) -> str:
        """The target as passed to ``-t``: matched exactly (``exact_target``)."""
        return exact_target(self.target)

    def identity(self) -> str:
        try:
            result = self._tmux(
                "display-message", "-p", "-t", self.pane, "#{pane_dead} #{pane_pid}"
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

    def dead(self) -> DeadPane | None:
        """The pane as tmux keeps it after its program exited (``remain-on-exit``: a crash,
        or a failed switch whose old session did not come back), None while its program
        runs; IdentityConflictError when tmux cannot say."""
        try:
            result = self._tmux("display-message", "-p", "-t", self.pane,
                                "#{pane_dead} #{pane_pid} #{pane_start_command}")
        except ProcError as exc:
            raise IdentityConflictError(
                f"cannot read the state of tmux pane {self.target!r}: {exc}") from exc
        dead, _, rest = result.stdout.rstrip("\n").partition(" ")
        pid, _, command = rest.partition(" ")
        if not result.ok or dead != "1" or not pid.isdigit():
            return None
        argv, env = parse_start_command(command)
        return DeadPane(pid, command, argv, env)

    def inherited_names(self) -> frozenset[str] | None:
        """Names of the variables a process respawned in the pane gets from tmux itself: the
        global environment, less what the pane's session removes, plus what it sets; None
        when tmux cannot say."""
        try:
            session = self._tmux("display-message", "-p", "-t", self.pane, "#{session_name}")
            name = session.stdout.rstrip("\n")
            every = self._tmux("show-environment", "-g")
            own = self._tmux("show-environment", "-t", f"={name}")
        except ProcError:
            return None
        if not (session.ok and name and every.ok and own.ok):
            return None
        kept = set(parse_tmux_environment(every.stdout)) - removed_names(own.stdout)
        return frozenset(kept | set(parse_tmux_environment(own.stdout)))

    def screen(self) -> str:
        try:
            result = self._tmux("capture-pane", "-p", "-J", "-t", self.pane)  # visible only
        except ProcError:
            return ""
        return result.stdout if result.ok else ""

    def switch(self, session_id: str, resume_argv: Sequence[str], workdir: Path) -> None:
        del session_id  # the argv already names it
        if not Path(workdir).is_dir():  # tmux would start it in the server's cwd instead
            raise DoorError(f"workdir {str(workdir)!r} is not a directory; tmux pane "
                            f"{self.target!r} left as it is")
        self._borrow_remain_on_exit()
        result = self._tmux("respawn-pane", "-k", "-t", self.pane,
                            *pane_command(resume_argv, workdir))
        if not result.ok:
            raise DoorError(
                f"tmux respawn-pane -k -t {self.target!r} failed: {result.stderr.strip()}"
            )

    def confirm(self) -> bool:
        """Write Enter (``\\r``) to the pane's program through a buffer of our own.

        Not ``send-keys``: a pane in copy-mode (a mouse wheel scrolled it) takes keys itself,
        and with ``synchronize-panes`` the key also goes to every other pane of the window —
        an Enter in the user's shells. A paste goes to this pane's program only, in any mode.
        """
        result = self._tmux("set-buffer", "-b", ENTER_BUFFER, "\r", ";",
                            "paste-buffer", "-d", "-r", "-b", ENTER_BUFFER, "-t", self.pane)
        return result.ok

    def _pane_option(self, name: str) -> str | None:
        """The pane's own value of ``name`` ("" when a built-in option is unset on the pane);
        None for an unset user option or when tmux cannot be asked."""
        try:
            result = self._tmux("show-options", "-p", "-v", "-t", self.pane, name)
        except ProcError:
            return None
        return result.stdout.rstrip("\n") if result.ok else None

    def _borrow_remain_on_exit(self) -> None:
        """Save the pane's own ``remain-on-exit`` (once per borrow), then set it on."""
        if self._pane_option(SAVED_OPTION) is None:
            own = self._pane_option("remain-on-exit")
            if own is None:
                raise DoorError(f"cannot read remain-on-exit of tmux pane {self.target!r}")
            self._tmux("set-option", "-p", "-t", self.pane, SAVED_OPTION, own or UNSET)
        self._tmux("set-option", "-p", "-t", self.pane, "remain-on-exit", "on")

    def settle(self) -> None:
        """Give the pane back the ``remain-on-exit`` it had before the switch (no-op if none)."""
        saved = self._pane_option(SAVED_OPTION)
        if saved is None:
            return
        if saved == UNSET:
            restore = self._tmux("set-option", "-p", "-u", "-t", self.pane, "remain-on-exit")
        else:
            restore = self._tmux("set-option", "-p", "-t", self.pane, "remain-on-exit", saved)
        if not restore.ok:
            raise DoorError(f"cannot restore remain-on-exit {saved or 'unset'!r} on tmux pane "
                            f"{self.target!r}: {restore.stderr.strip()}")
        self._tmux("set-option", "-p", "-u", "-t", self.pane, SAVED_OPTION)
