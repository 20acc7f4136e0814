"""The resume argv (SPEC §4.3): the real launch argv with ``--continue``/``-c`` replaced by
``--resume {session_id}`` (or an existing ``--resume X`` replaced), every other token kept.

``runtime/resume.py: resume_argv(launch_argv, session_id)`` (used by ``tl-launch``) is the
rule; this module delegates to it so both halves agree (the local rule below is only the
fallback for an installation without it). ``token_table`` shows launch vs resume token by token.
"""

from __future__ import annotations

from collections.abc import Sequence

from provision.errors import ResumeError

SESSION_TOKEN = "{session_id}"
CONTINUE = ("--continue", "-c")
RESUME = ("--resume", "-r")
REFUSED = ("--session-id", "--fork-session", "--from-pr")


def _local_resume_argv(launch_argv: Sequence[str], session_id: str) -> tuple[str, ...]:
    argv = list(launch_argv)
    if not argv:
        raise ResumeError("launch argv is empty; nothing to resume")
    for token in argv[1:]:
        name = token.split("=", 1)[0]
        if name in REFUSED:
            raise ResumeError(f"launch argv holds {name!r}, which changes what resume means")
    continues = [i for i, t in enumerate(argv) if i > 0 and t in CONTINUE]
    resumes = [i for i, t in enumerate(argv)
               if i > 0 and (t in RESUME or t.startswith("--resume="))]
    if len(continues) + len(resumes) > 1:
        raise ResumeError(
            f"launch argv holds {len(continues)} --continue and {len(resumes)} --resume "
            f"tokens; expected at most one: {argv!r}")
    if continues:
        i = continues[0]
        return tuple(argv[:i] + ["--resume", session_id] + argv[i + 1:])
    if resumes:
        i = resumes[0]
        if argv[i].startswith("--resume="):
            return tuple(argv[:i] + ["--resume", session_id] + argv[i + 1:])
        if i + 1 >= len(argv) or argv[i + 1].startswith("-"):
            raise ResumeError(f"{argv[i]!r} has no session id in the launch argv: {argv!r}")
        return tuple(argv[:i] + ["--resume", session_id] + argv[i + 2:])
    return tuple([argv[0], "--resume", session_id] + argv[1:])


_PLACEHOLDER = "tlprovisionsessionplaceholder0"


def resume_argv(launch_argv: Sequence[str], session_id: str = SESSION_TOKEN) -> tuple[str, ...]:
    """The resume argv for ``launch_argv`` (``{session_id}`` placeholder by default).

    Delegates to ``runtime.resume.resume_argv`` (the rule tl-launch applies at start) with a
    placeholder id, so provision and runtime cannot disagree on the rule.
    """
    try:
        from runtime.resume import resume_argv as runtime_resume_argv
    except ImportError:
        return _local_resume_argv(launch_argv, session_id)
    for token in list(launch_argv)[1:]:
        name = token.split("=", 1)[0]
        if name in REFUSED:
            raise ResumeError(f"launch argv holds {name!r}, which changes what resume means")
    try:
        argv = runtime_resume_argv(list(launch_argv), _PLACEHOLDER)
    except Exception as exc:  # runtime's ConfigError tree, translated at this boundary
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
