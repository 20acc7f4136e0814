"""The resume argv (SPEC §4.3) as provision computes and shows it: the launch argv with its
session choice replaced by ``--resume {session_id}``, every other token kept.

The rule is ``runtime.agents.claude.resume_argv`` — the one ``tl-launch`` applies at start —
so provision and runtime cannot disagree. ``token_table`` shows launch vs resume token by token.
"""

from __future__ import annotations

from collections.abc import Sequence

from provision.errors import ResumeError
from runtime.agents import claude, cli_for
from runtime.errors import ConfigError

SESSION_TOKEN = claude.SESSION_TOKEN
_PLACEHOLDER = "tlprovisionsessionplaceholder0"


def resume_argv(launch_argv: Sequence[str], session_id: str = SESSION_TOKEN,
                agent: str = "claude") -> tuple[str, ...]:
    """The resume argv for ``launch_argv`` (``{session_id}`` placeholder by default).

    The rule runs with a placeholder id (``{session_id}`` is no valid session id) that is then
    replaced by ``session_id``. For codex it is ``runtime.agents.codex.resume_argv``:
    ``<codex> resume {session_id}`` + every option, so a TUI started without an id resumes too.
    """
    try:
        argv = cli_for(agent).resume_argv(list(launch_argv), _PLACEHOLDER)
    except ConfigError as exc:  # each agent's ResumeArgvError, or an agent with no rules
        raise ResumeError(f"cannot compute the resume argv: {exc}") from exc
    return tuple(session_id if token == _PLACEHOLDER else token for token in argv)


def token_table(launch: Sequence[str], resume: Sequence[str]) -> list[str]:
    """Launch and resume argv side by side, one token per line, changed rows marked ``*``."""
    import difflib

    rows = []
    matcher = difflib.SequenceMatcher(a=list(launch), b=list(resume), autojunk=False)
    for tag, a0, a1, b0, b1 in matcher.get_opcodes():
        left, right = list(launch[a0:a1]), list(resume[b0:b1])
        for k in range(max(len(left), len(right))):
            lt = left[k] if k < len(left) else ""
            rt = right[k] if k < len(right) else ""
            mark = " " if tag == "equal" else "*"
            rows.append(f"{mark} {lt!r:<48} {rt!r}")
    return rows
