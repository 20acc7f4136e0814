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

import os
import re
import shlex
from collections.abc import Callable, Sequence
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


_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
TMUX_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "e": "\033"}  # tmux's C escapes


def split_words(text: str, escapes: dict[str, str], *, literal_single: bool,
                unterminated: Callable[[str], Exception]) -> list[tuple[str, str]]:
    """Split a command language's ``text`` into ``(word, as written)`` pairs.

    Words are separated by spaces and tabs; a backslash takes the next character through
    ``escapes`` (else the character itself), also inside double quotes — and inside single
    quotes unless ``literal_single``. An unclosed quote raises ``unterminated(quote)``.
    """
    words: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i] in " \t":
            i += 1
        if i >= n:
            break
        start, word = i, []
        while i < n and text[i] not in " \t":
            ch = text[i]
            if ch == "'" and literal_single:
                end = text.find("'", i + 1)
                if end < 0:
                    raise unterminated(ch)
                word.append(text[i + 1:end])
                i = end + 1
            elif ch in "'\"":
                i += 1
                while i < n and text[i] != ch:
                    step = 2 if text[i] == "\\" and i + 1 < n else 1
                    word.append(escapes.get(text[i + 1], text[i + 1]) if step == 2 else text[i])
                    i += step
                if i >= n:
                    raise unterminated(ch)
                i += 1
            elif ch == "\\" and i + 1 < n:
                word.append(escapes.get(text[i + 1], text[i + 1]))
                i += 2
            else:
                word.append(ch)
                i += 1
        words.append(("".join(word), text[start:i]))
    return words



@dataclass(frozen=True)
class DeadPane:
    """A pane whose program has exited and which tmux keeps (``remain-on-exit``): the dead
    program's pid, the pane's start command as tmux shows it, and that command read as the
    program's argv and the assignments in front of it (``parse_start_command``)."""

    pid: str
    command: str
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...]


def parse_start_command(text: str) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """``(argv, assignments)`` of a pane's ``#{pane_start_command}`` (tmux 3.3a quotes it in
    its command language): several words were exec'd by tmux, one word was run by the shell
    (``new-session 'CMD'``) and is read as one simple command — a leading ``cd DIR &&``,
    ``NAME=VALUE`` assignments and ``exec``. An ``env NAME=VALUE …`` wrapper (the shape a
    switch respawns) is taken off the argv too. ``((), ())`` when it is no simple command."""
    try:
        words = [word for word, _ in split_words(text, TMUX_ESCAPES, literal_single=True,
                                                 unterminated=ValueError)]
        if len(words) == 1:
            words = shlex.split(words[0])
    except ValueError:
        return (), ()
    if len(words) > 3 and words[0] == "cd" and words[2] == "&&":
        words = words[3:]
    env: list[tuple[str, str]] = []
    while words and _ASSIGNMENT.match(words[0]):
        env.append(_assignment(words.pop(0)))
    if words[:1] == ["exec"]:
        words.pop(0)
    if words and os.path.basename(words[0]) == "env":
        words.pop(0)
        while words and _ASSIGNMENT.match(words[0]):
            env.append(_assignment(words.pop(0)))
    operators = {"&&", "||", ";", "|", "&", "<", ">"}
    if not words or words[0].startswith("-") or any(word in operators for word in words):
        return (), ()
    return tuple(words), tuple(env)


def parse_tmux_environment(text: str) -> dict[str, str]:
    """``tmux show-environment [-g | -t SESSION]`` → the variables it sets.

    ``NAME=value`` sets; ``-NAME`` marks a variable removed from the session (not set, so not
    listed; ``removed_names`` lists them).
    """
    env: dict[str, str] = {}
    for line in text.splitlines():
        if not line or line.startswith("-"):
            continue
        key, eq, value = line.partition("=")
        if eq and _ASSIGNMENT.match(line):
            env[key] = value
    return env


def removed_names(text: str) -> frozenset[str]:
    """The ``-NAME`` lines of ``tmux show-environment -t SESSION``: variables the session
    removes from what it would inherit from the global environment."""
    return frozenset(line[1:] for line in text.splitlines() if line.startswith("-") and
                     _ASSIGNMENT.match(line[1:] + "="))


def _assignment(word: str) -> tuple[str, str]:
    name, _, value = word.partition("=")
    return name, value


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
