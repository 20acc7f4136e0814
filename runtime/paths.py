"""Where Claude Code keeps transcripts: the cwd -> project folder rule and the newest session;
and where Codex keeps a thread's rollout.

The folder name rule was measured on Claude Code 2.1.328: every character of the absolute cwd
that is not an ASCII letter or digit becomes ``-`` (``/srv/wo.rk_x y`` -> ``-srv-wo-rk-x-y``).
It lives here only, so provision and the switch check the same rule.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

_NOT_ALNUM = re.compile(r"[^A-Za-z0-9]")


def encode_project_dir(cwd: str) -> str:
    """The projects/ folder name Claude Code uses for the working directory ``cwd``."""
    return _NOT_ALNUM.sub("-", cwd)


def claude_config_dir(environ: Mapping[str, str] | None = None) -> Path:
    """``$CLAUDE_CONFIG_DIR``, else ``$HOME/.claude``, read from ``environ`` (default: ours)."""
    env = os.environ if environ is None else environ
    configured = env.get("CLAUDE_CONFIG_DIR", "")
    if configured:
        return Path(configured).expanduser()
    return Path(env.get("HOME") or os.path.expanduser("~")) / ".claude"


def project_dir_for(cwd: str, config_dir: Path | None = None) -> Path:
    """The folder holding the transcripts of sessions started in ``cwd``."""
    base = config_dir if config_dir is not None else claude_config_dir()
    return base / "projects" / encode_project_dir(cwd)


def is_session_file(path: Path) -> bool:
    """True for a top-level session transcript name (``*.jsonl``, not a subagent ``agent-*``)."""
    return path.name.endswith(".jsonl") and not path.name.startswith("agent-")


def latest_transcript(project_dir: str | os.PathLike[str]) -> Path | None:
    """The most recently modified top-level session transcript in ``project_dir``, or None."""
    best: tuple[float, str] | None = None
    found: Path | None = None
    try:
        entries = list(os.scandir(project_dir))
    except (FileNotFoundError, NotADirectoryError):
        return None
    for entry in entries:
        path = Path(entry.path)
        if not is_session_file(path):
            continue
        try:
            if not entry.is_file():
                continue
            key = (entry.stat().st_mtime, entry.name)
        except OSError:
            continue
        if best is None or key > best:
            best, found = key, path
    return found


def codex_rollout(sessions: Path, thread_id: str | None) -> Path | None:
    """The file thread ``thread_id`` continues in under ``sessions`` (any folder), or None.

    Codex finds a thread by the name end ``rollout-…-<thread_id>.jsonl`` (notes/codex-live.md
    §5). ``thread/revert`` leaves that file as it was and writes a revision
    ``rollout-…-<thread_id>_<revision>.jsonl`` (revision ids are UUIDv7: time-ordered); measured
    with 0.169.0, a resume appends to the newest revision (also with Codex's sqlite state
    deleted), so the newest revision is the thread's current history when there is one.
    Two files with the thread's newest name (a copy in another date folder) are a
    TranscriptError naming both: which one Codex resumes follows its sqlite index, else a fuzzy
    file search (measured with 0.169.0), nothing the files say.
    """
    from runtime.agents.codex import SESSION_ID

    if not thread_id or not SESSION_ID.fullmatch(thread_id):
        return None
    revisions = sorted((codex_revision_of(path) or "", path)
                       for path in sessions.rglob(f"rollout-*-{thread_id}_*.jsonl")
                       if codex_thread_of(path) == thread_id)
    newest = [path for revision, path in revisions if revision == revisions[-1][0]] \
        if revisions else sorted(sessions.rglob(f"rollout-*-{thread_id}.jsonl"))
    if len(newest) > 1:
        from runtime.errors import TranscriptError

        raise TranscriptError(
            f"thread {thread_id!r} has {len(newest)} rollouts of one name under "
            f"{str(sessions)!r} ({', '.join(repr(str(path)) for path in newest)}): which one "
            "Codex resumes is not theirs to say; move the copy out of the folder")
    return newest[0] if newest else None


def codex_history_files(sessions: Path, history_id: str) -> tuple[Path, ...]:
    """The files a ``history_base.thread_id`` names under ``sessions`` (sorted; none: ()).

    Measured with 0.169.0: the first revision's base is the thread id (its first file,
    ``rollout-…-<id>.jsonl``); a later revision's base, and a fork's of a reverted thread, is
    the revision it continues (``rollout-…_<id>.jsonl``). More than one file is a copy under
    another folder: which one Codex loads is not the files' to say (its sqlite index first,
    else a fuzzy file search that ranked the shorter path first, measured), so the caller
    refuses rather than pick."""
    from runtime.agents.codex import SESSION_ID

    if not SESSION_ID.fullmatch(history_id):
        return ()
    for pattern in (f"rollout-*-{history_id}.jsonl", f"rollout-*_{history_id}.jsonl"):
        found = sorted(sessions.rglob(pattern))
        if found:
            return tuple(found)
    return ()


_CODEX_NAME = re.compile(r"rollout-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-"
                         r"(?P<thread>[A-Za-z0-9-]+?)(?:_(?P<revision>[A-Za-z0-9-]+))?\.jsonl")


def codex_thread_of(path: Path) -> str | None:
    """The thread id a rollout's name ends in, a revision's (``…-<thread>_<revision>``) too."""
    match = _CODEX_NAME.fullmatch(path.name)
    return match["thread"] if match else None


def codex_revision_of(path: Path) -> str | None:
    """The revision id of a revision file's name, else None."""
    match = _CODEX_NAME.fullmatch(path.name)
    return match["revision"] if match else None
