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
    """``sessions/**/rollout-…-<thread_id>.jsonl``, or None: Codex finds a thread by that name
    end in any folder under ``$CODEX_HOME/sessions`` (notes/codex-live.md §5). A revision file
    (``…-<thread_id>_<revision>.jsonl``) is not the thread's rollout."""
    from runtime.agents.codex import SESSION_ID

    if not thread_id or not SESSION_ID.fullmatch(thread_id):
        return None
    found = sorted(sessions.rglob(f"rollout-*-{thread_id}.jsonl"))
    return found[0] if found else None
