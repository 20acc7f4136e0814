"""Claude Code's command line: channel flags, the resume argv, the environment a relaunch
carries and its ``sessions/<pid>.json`` record — one rule each, pure (argv and bytes in).

The resume argv (SPEC §4.3): ``--continue`` / ``-c`` becomes ``--resume ID``; an existing
``--resume X`` / ``-r X`` / ``--resume=X`` (or a bare ``--resume``, the picker) becomes
``--resume ID``; every other argument stays, in order. A launch argv that names no session
gets ``--resume ID`` right after the ``claude`` program. Anything that cannot be read one way
only is refused, never guessed.

Stdlib-only: ``tl-launch`` (a unit's ExecStart), the worker and ``tl-provision`` all use it.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from runtime.agents import SHELLS, RunningFacts
from runtime.errors import ConfigError

NAME = "claude"
PROGRAMS = frozenset({"claude", "claude.exe", "cli.js"})
# Flags that attach a channel; a relaunch must keep every one the old process had. Claude
# asks on every start with the development flag (a warning that waits for Enter).
DEV_CHANNELS_FLAG = "--dangerously-load-development-channels"
CHANNEL_FLAGS = ("--channels", DEV_CHANNELS_FLAG)
CONTINUE_FLAGS = frozenset({"--continue", "-c"})
RESUME_FLAGS = frozenset({"--resume", "-r"})
# Options that change what resuming means (a forced id, a forked copy, a PR's session).
REFUSED = frozenset({"--session-id", "--fork-session", "--from-pr"})
SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$")
SESSION_TOKEN = "{session_id}"  # the placeholder of a configured resume argv
# Where claude keeps sessions, settings and MCP config; a resume elsewhere finds no session.
CONFIG_DIR_VAR = "CLAUDE_CONFIG_DIR"
_UNCHOSEN = "\0session"  # stands for the session choice when two argvs are compared


class ResumeArgvError(ConfigError):
    """A launch argv cannot be turned into a resume argv unambiguously."""


# ---------------------------------------------------------------- channels

def _channel_spans(argv: Sequence[str]) -> list[tuple[int, int]]:
    """(start, end) of each channel option with its values: ``--opt v1 v2`` or ``--opt=v``."""
    spans: list[tuple[int, int]] = []
    index = 0
    while index < len(argv):
        name, eq, _ = argv[index].partition("=")
        end = index + 1
        if name in CHANNEL_FLAGS:
            while not eq and end < len(argv) and not argv[end].startswith("-"):
                end += 1
            spans.append((index, end))
        index = end
    return spans


def channel_flags(argv: Sequence[str]) -> tuple[str, ...]:
    """Each channel attached by ``argv`` as ``"FLAG VALUE"`` (variadic values, ``=`` form too)."""
    found: list[str] = []
    for start, end in _channel_spans(argv):
        name, eq, value = argv[start].partition("=")
        found.extend([f"{name} {value}"] if eq else [f"{name} {v}" for v in argv[start + 1:end]])
    return tuple(found)


def asks_dev_warning(flags: Iterable[str]) -> bool:
    """True when channel ``flags`` (``"FLAG VALUE"``) load a development channel: claude then
    shows its development-channels warning on every start and waits for Enter."""
    return any(flag.startswith(DEV_CHANNELS_FLAG) for flag in flags)


def dev_channel_servers(argv: Sequence[str]) -> list[str]:
    """``NAME`` of every ``server:NAME`` development channel in ``argv``."""
    prefix = f"{DEV_CHANNELS_FLAG} server:"
    return [flag[len(prefix):] for flag in channel_flags(argv) if flag.startswith(prefix)]


def channel_tokens(argv: Sequence[str]) -> tuple[str, ...]:
    """The channel options of ``argv`` as written there (``--opt v1 v2``, ``--opt=v``), in
    order: the argv fragment a resume argv or ``switch.channel_flags`` holds."""
    return tuple(token for start, end in _channel_spans(argv) for token in argv[start:end])


# ---------------------------------------------------------------- sessions

def resumed_session(argv: Sequence[str]) -> str | None:
    """The session id given to ``--resume``/``-r``/``--session-id`` in ``argv``, or None."""
    for i, token in enumerate(argv):
        name, eq, value = token.partition("=")
        if name in ("--resume", "-r", "--session-id"):
            if eq:
                return value
            if i + 1 < len(argv):
                return argv[i + 1]
    return None


def format_argv(template: Sequence[str], session_id: str) -> tuple[str, ...]:
    """The resume argv for ``session_id``: ``{session_id}`` replaced in every token."""
    return tuple(token.replace(SESSION_TOKEN, session_id) for token in template)


def resume_argv(launch_argv: Sequence[str], session_id: str) -> list[str]:
    """Return ``launch_argv`` with its session choice replaced by ``--resume session_id``."""
    argv = [str(arg) for arg in launch_argv]
    if not argv:
        raise ResumeArgvError("launch argv is empty; nothing to resume with")
    if os.path.basename(argv[0]) in SHELLS:
        raise ResumeArgvError(
            f"launch argv {argv!r} runs a shell; its claude command line cannot be rewritten "
            f"safely (put claude's own argv in the launch argv)"
        )
    if not SESSION_ID.fullmatch(session_id):
        raise ResumeArgvError(f"session id {session_id!r} is not a valid session id")
    refused = _refused_option(argv)
    if refused:
        raise ResumeArgvError(f"launch argv holds {refused!r}, which changes what resuming means")
    spans = _session_flags(argv)
    if len(spans) > 1:
        found = ", ".join(repr(" ".join(argv[a:b])) for a, b in spans)
        raise ResumeArgvError(
            f"launch argv chooses the session more than once ({found}); keep exactly one of "
            f"--continue/-c/--resume in {argv!r}"
        )
    if spans:
        start, end = spans[0]
        return [*argv[:start], "--resume", session_id, *argv[end:]]
    program = _claude_position(argv)
    return [*argv[: program + 1], "--resume", session_id, *argv[program + 1 :]]


def same_launch(a: Sequence[str], b: Sequence[str]) -> bool:
    """Same program (by name) and same arguments up to the session choice: a claude that
    tl-launch or a switch started with ``--resume ID`` still matches a ``--continue`` launch."""
    if not a or not b or os.path.basename(a[0]) != os.path.basename(b[0]):
        return False
    left, right = _without_session_choice(a), _without_session_choice(b)
    if left is None or right is None:
        return tuple(a[1:]) == tuple(b[1:])
    return left == right


def _without_session_choice(argv: Sequence[str]) -> tuple[str, ...] | None:
    """``argv[1:]`` with its one session choice as a marker in place (first when it has none);
    None when it chooses more than once or holds an option that changes what resuming means."""
    tokens = list(argv)
    spans = _session_flags(tokens)
    if len(spans) > 1 or _refused_option(tokens):
        return None
    if not spans:
        return (_UNCHOSEN, *tokens[1:])
    start, end = spans[0]
    return (*tokens[1:start], _UNCHOSEN, *tokens[end:])


def _refused_option(argv: list[str]) -> str | None:
    for token in argv[1:]:
        if token == "--":
            return None
        name = token.split("=", 1)[0]
        if name in REFUSED:
            return name
    return None


def _session_flags(argv: list[str]) -> list[tuple[int, int]]:
    """(start, end) index spans of every session-choosing option before a literal ``--``."""
    spans: list[tuple[int, int]] = []
    index = 1
    while index < len(argv):
        arg = argv[index]
        if arg == "--":
            break
        if arg in CONTINUE_FLAGS or arg.startswith("--resume="):
            spans.append((index, index + 1))
        elif arg in RESUME_FLAGS:
            takes_value = index + 1 < len(argv) and not argv[index + 1].startswith("-")
            spans.append((index, index + 2 if takes_value else index + 1))
            index += 1 if takes_value else 0
        index += 1
    return spans


def _claude_position(argv: list[str]) -> int:
    """Index of the ``claude`` program in an argv that names no session (else refuse)."""
    for index, arg in enumerate(argv):
        if arg == "--":
            break
        if os.path.basename(arg) in PROGRAMS:
            return index
    raise ResumeArgvError(
        f"launch argv {argv!r} has no --continue/--resume and no 'claude' program to add "
        f"--resume after"
    )


# ---------------------------------------------------------------- environment

def environment_names(launch_names: Iterable[str], config_dir_in_use: bool) -> tuple[str, ...]:
    """The variables a relaunch carries (names only, sorted): every assignment of the launch,
    and ``CLAUDE_CONFIG_DIR`` whenever a config dir is in use (a resume in another config dir
    fails with "No conversation found")."""
    names = set(launch_names)
    if config_dir_in_use:
        names.add(CONFIG_DIR_VAR)
    return tuple(sorted(names))


# ---------------------------------------------------------------- session record

def session_record_path(config_dir: Path, pid: int) -> Path:
    """Where claude ``pid`` says which session it runs: ``<config_dir>/sessions/<pid>.json``."""
    return config_dir / "sessions" / f"{pid}.json"


def parse_session_record(data: bytes | str, started: int | None) -> dict[str, Any] | None:
    """The record claude wrote for a pid whose kernel start time is ``started``, or None.

    Claude Code (2.1.328, measured) writes ``{"pid", "sessionId", "procStart", "status":
    "idle"|"busy", …}``. A record whose ``procStart`` is not ``started`` was left by an
    earlier process with the same (recycled) pid: it names another session and is ignored,
    as is any record when the pid is gone (``started`` None) or the text is no JSON object.
    """
    try:
        record = json.loads(data)
    except ValueError:
        return None
    if not isinstance(record, dict) or started is None:
        return None
    if str(record.get("procStart", started)) != str(started):
        return None
    return record


def running_session(pid: int, facts: RunningFacts) -> str | None:
    """The ``sessionId`` of the record claude ``pid`` wrote (``facts.session_record``, read
    from ``session_record_path``), unless an earlier process with the same pid left it."""
    if facts.session_record is None:
        return None
    record = parse_session_record(facts.session_record, facts.started)
    session = record.get("sessionId") if record else None
    return session if isinstance(session, str) and session else None
