"""The resume argv: the real launch argv with its session choice replaced by one session id.

SPEC §4.3: ``--continue`` / ``-c`` becomes ``--resume ID``; an existing ``--resume X`` / ``-r X``
/ ``--resume=X`` (or a bare ``--resume``, the picker) becomes ``--resume ID``; every other
argument stays, in order. A launch argv that names no session gets ``--resume ID`` right after
the ``claude`` program. Anything that cannot be read one way only is refused, never guessed.

Pure and stdlib-only: ``tl-launch`` (a unit's ExecStart) and ``tl-provision`` both use it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from runtime.errors import ConfigError

CONTINUE_FLAGS = frozenset({"--continue", "-c"})
RESUME_FLAGS = frozenset({"--resume", "-r"})
# Options that change what resuming means (a forced id, a forked copy, a PR's session).
REFUSED = frozenset({"--session-id", "--fork-session", "--from-pr"})
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "fish"})
SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$")


class ResumeArgvError(ConfigError):
    """A launch argv cannot be turned into a resume argv unambiguously."""


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
    _refuse_options(argv)
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


def _refuse_options(argv: list[str]) -> None:
    for token in argv[1:]:
        if token == "--":
            return
        name = token.split("=", 1)[0]
        if name in REFUSED:
            raise ResumeArgvError(f"launch argv holds {name!r}, which changes what resuming means")


def _session_flags(argv: list[str]) -> list[tuple[int, int]]:
    """(start, end) index spans of every session-choosing option before a literal ``--``."""
    spans: list[tuple[int, int]] = []
    index = 1
    while index < len(argv):
        arg = argv[index]
        if arg == "--":
            break
        if arg in CONTINUE_FLAGS:
            spans.append((index, index + 1))
        elif arg.startswith("--resume="):
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
        if os.path.basename(arg) in ("claude", "claude.exe", "cli.js"):
            return index
    raise ResumeArgvError(
        f"launch argv {argv!r} has no --continue/--resume and no 'claude' program to add "
        f"--resume after"
    )
