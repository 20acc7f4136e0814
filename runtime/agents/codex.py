"""Codex's command line: reading a ``codex`` argv, the resume argv, the environment a relaunch
carries and the thread a running codex holds — one rule each, pure (argv and facts in).

The grammar is the pinned CLI's (``codex --help`` / ``codex resume --help`` of 0.169.0):
``codex [OPTIONS] [PROMPT]`` (the TUI), ``codex [OPTIONS] resume [OPTIONS] [SESSION_ID] [PROMPT]``
and ``codex … fork …`` alike; every other sub-command (``exec``, ``review``, …) runs no TUI and
is refused. The resume argv is ``<program> resume ID`` followed by every option of the launch,
in order, except what chose or started a conversation: the old ``SESSION_ID`` or ``--last``, the
initial ``PROMPT`` and its ``-i/--image`` attachments (re-sending them would be a new human turn).
An option this table does not know is refused: whether it takes a value decides what is a prompt.

Stdlib-only, like ``runtime.agents.claude``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from runtime.agents import SHELLS, RunningFacts
from runtime.errors import ConfigError

NAME = "codex"
PROGRAMS = frozenset({"codex", "codex.js"})
# Where codex keeps its config, sessions and thread-writer locks; a resume elsewhere finds nothing.
HOME_VAR = "CODEX_HOME"
# Options that take one value (``-m x``, ``-mx``, ``--model x``, ``--model=x``).
VALUE_OPTIONS = frozenset({
    "-c", "--config", "--enable", "--disable", "--remote", "--remote-auth-token-env",
    "-m", "--model", "--local-provider", "-p", "--profile", "-s", "--sandbox",
    "-C", "--cd", "--add-dir", "-a", "--ask-for-approval",
})
# ``-i/--image <FILE>...``: one or more values, attached to the initial prompt.
IMAGE_OPTIONS = frozenset({"-i", "--image"})
FLAG_OPTIONS = frozenset({
    "--strict-config", "--oss", "--approve-for-me", "--dangerously-bypass-approvals-and-sandbox",
    "--dangerously-bypass-hook-trust", "--worktree", "--search", "--no-alt-screen",
    "--no-daemon", "--all", "--include-non-interactive",
})
LAST = "--last"
SESSION_COMMANDS = frozenset({"resume", "fork"})
# Sub-commands of 0.169.0 that run no interactive session (a launch of one is refused).
OTHER_COMMANDS = frozenset({
    "agents", "exec", "e", "review", "login", "logout", "mcp", "plugin", "app-server",
    "remote-control", "completion", "update", "doctor", "sandbox", "debug", "apply", "a",
    "queue", "archive", "delete", "migrate-rollouts", "migrate-nfs-db", "unarchive", "cloud",
    "exec-server", "features", "help",
})
SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$")


class ResumeArgvError(ConfigError):
    """A codex argv cannot be read one way only, so no resume argv is made from it."""


@dataclass(frozen=True)
class CodexArgv:
    """A codex argv read once: the program, the sub-command, options as written, positionals."""

    program: tuple[str, ...]            # up to and including the codex program (node, codex.js)
    command: str | None                 # "resume", "fork" or None (the TUI)
    options: tuple[tuple[str, ...], ...]  # each option with its value tokens, in order
    positionals: tuple[str, ...]        # SESSION_ID / PROMPT (after ``--`` too)

    @property
    def last(self) -> bool:
        return any(option[0] == LAST for option in self.options)


def parse_argv(argv: Sequence[str]) -> CodexArgv:
    """``argv`` read with codex 0.169.0's grammar; ResumeArgvError when it cannot be."""
    tokens = [str(token) for token in argv]
    program = _program_end(tokens)
    command: str | None = None
    options: list[tuple[str, ...]] = []
    positionals: list[str] = []
    index = program
    while index < len(tokens):
        token = tokens[index]
        if token == "--":
            positionals.extend(tokens[index + 1:])
            break
        if token.startswith("-") and token != "-":
            end = _option_end(tokens, index)
            options.append(tuple(tokens[index:end]))
            index = end
            continue
        if command is None and not positionals and token in SESSION_COMMANDS:
            command = token
        elif command is None and not positionals and token in OTHER_COMMANDS:
            raise ResumeArgvError(
                f"launch argv {tokens!r} runs 'codex {token}', not an interactive session")
        else:
            positionals.append(token)
        index += 1
    return CodexArgv(tuple(tokens[:program]), command, tuple(options), tuple(positionals))


def _program_end(tokens: list[str]) -> int:
    """Index just after the codex program (``node …/codex.js`` counts as one program)."""
    if not tokens:
        raise ResumeArgvError("launch argv is empty; nothing to resume with")
    if os.path.basename(tokens[0]) in SHELLS:
        raise ResumeArgvError(
            f"launch argv {tokens!r} runs a shell; its codex command line cannot be rewritten "
            f"safely (put codex's own argv in the launch argv)")
    for index, token in enumerate(tokens[:2]):
        if os.path.basename(token) in PROGRAMS:
            return index + 1
    raise ResumeArgvError(f"launch argv {tokens!r} has no 'codex' program")


def _option_end(tokens: list[str], index: int) -> int:
    """Index just after the option at ``index`` and its values."""
    token = tokens[index]
    if token.startswith("--"):
        name, eq, _ = token.partition("=")
        attached = bool(eq)
    else:
        name, attached = token[:2], len(token) > 2
    if name in FLAG_OPTIONS or name == LAST:
        if attached:
            raise ResumeArgvError(f"option {token!r} takes no value")
        return index + 1
    if name in VALUE_OPTIONS or name in IMAGE_OPTIONS:
        if attached:
            return index + 1
        if index + 1 >= len(tokens):
            raise ResumeArgvError(f"option {name!r} has no value at the end of the argv")
        end = index + 2
        while name in IMAGE_OPTIONS and end < len(tokens) and not tokens[end].startswith("-"):
            end += 1  # <FILE>...: every following word up to the next option
        return end
    raise ResumeArgvError(
        f"option {token!r} is not one codex 0.169.0 knows; whether it takes a value decides "
        f"what the prompt is, so the argv is not rewritten")


# Options after which codex 0.169.0 keeps its threads in the pane's own process (measured:
# ``--no-daemon``, documented "Run without the shared background server"; any ``-c key=value``
# override, which a shared server cannot apply). Without one, the TUI attaches to the shared
# ``codex app-server --managed-daemon`` of CODEX_HOME, which then holds the thread-writer lock.
OWN_SERVER_OPTIONS = frozenset({"--no-daemon", "-c", "--config"})


def own_app_server(argv: Sequence[str]) -> str | None:
    """The option of ``argv`` that makes codex hold its threads in its own process, or None
    when it runs them in the shared daemon (ResumeArgvError when ``argv`` cannot be read)."""
    for option in parse_argv(argv).options:
        name = option[0].partition("=")[0] if option[0].startswith("--") else option[0][:2]
        if name in OWN_SERVER_OPTIONS:
            return name
    return None


# ---------------------------------------------------------------- sessions

def channel_flags(argv: Sequence[str]) -> tuple[str, ...]:
    """Codex attaches no channels on its command line."""
    return ()


def resumed_session(argv: Sequence[str]) -> str | None:
    """The thread ``codex resume ID`` runs, or None (a new thread, ``--last``, a picker, a fork,
    or an argv that cannot be read)."""
    try:
        parsed = parse_argv(argv)
    except ResumeArgvError:
        return None
    if parsed.command != "resume" or parsed.last or not parsed.positionals:
        return None
    return parsed.positionals[0]


def resume_argv(launch_argv: Sequence[str], session_id: str) -> list[str]:
    """``<program> resume session_id`` followed by every option of ``launch_argv`` in order,
    without its session choice (old id, ``--last``), initial prompt and prompt images."""
    if not SESSION_ID.fullmatch(session_id):
        raise ResumeArgvError(f"session id {session_id!r} is not a valid thread id")
    parsed = parse_argv(launch_argv)
    kept = [token for option in parsed.options
            if option[0] != LAST and _name(option[0]) not in IMAGE_OPTIONS
            for token in option]
    return [*parsed.program, "resume", session_id, *kept]


def _name(token: str) -> str:
    return token.partition("=")[0] if token.startswith("--") else token[:2]


# ---------------------------------------------------------------- environment

def environment_names(launch_names: Iterable[str], config_dir_in_use: bool) -> tuple[str, ...]:
    """The variables a relaunch carries (sorted): every assignment of the launch and always
    ``CODEX_HOME`` (the threads and their locks live there)."""
    return tuple(sorted({*launch_names, HOME_VAR}))


def same_launch(a: Sequence[str], b: Sequence[str]) -> bool:
    """Two argvs name the same launch: the same program (by name) and the same options (a
    ``resume ID`` a switch added is a session choice, not a change). An argv this grammar
    refuses compares token for token after its program."""
    if not a or not b or os.path.basename(a[0]) != os.path.basename(b[0]):
        return False
    try:
        left, right = parse_argv(a), parse_argv(b)
    except ResumeArgvError:
        return tuple(a[1:]) == tuple(b[1:])
    return [o for o in left.options if o[0] != LAST] == [o for o in right.options if o[0] != LAST]


# ---------------------------------------------------------------- the running thread

def running_session(pid: int, facts: RunningFacts) -> str | None:
    """The thread codex ``pid`` holds the writer lock for; None when it holds none or more than
    one (after ``/fork`` the old and the new thread are both locked: ambiguous)."""
    threads = set(facts.writer_locks)
    return threads.pop() if len(threads) == 1 else None
