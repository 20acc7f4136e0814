"""The JSON that ``plan`` and ``dirty`` print (and the MCP tools return).

Both resolve the transcript through the input checks first; without a path they take the
newest session transcript in the configured ``project_dir``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from runtime.agents.detect import detect
from runtime.agents.kind import AgentKind
from runtime.config import Config
from runtime.engine.transcript import Progress, resolve_transcript, scan
from runtime.errors import TranscriptError
from runtime.paths import latest_transcript


def pick_transcript(path: str | os.PathLike[str] | None, config: Config) -> Path:
    """``path`` after the input checks, else the newest transcript of ``project_dir``."""
    if path is not None:
        return resolve_transcript(path, config)
    if config.project_dir is None:
        raise TranscriptError("no --transcript given and no project_dir configured")
    newest = latest_transcript(config.project_dir)
    if newest is None:
        raise TranscriptError(f"no session transcript in project_dir {str(config.project_dir)!r}")
    return resolve_transcript(newest, config)


def plan_report(
    path: str | os.PathLike[str] | None,
    config: Config,
    progress: Progress | None = None,
    agent: str | None = None,
) -> dict[str, Any]:
    """What a rebuild of ``path`` would carry, what it would leave, and the dirty ledger.

    ``agent`` (claude | codex) forces the reader; by default line 0 of the file decides.
    """
    source = pick_transcript(path, config)
    if detect(source, agent) is AgentKind.CODEX:
        from runtime.engine.codex import candidate
    else:
        from runtime.engine import candidate  # type: ignore[no-redef]  # not needed by dirty
    built = candidate.build(source, config, progress=progress, lay_out=False)
    stats = built.stats()
    read = stats.pop("read")
    for key in ("new_session_id", "source"):
        stats.pop(key)
    return {
        "transcript": str(source),
        **stats,
        "ignored": {"types": read["ignored_types"], "reasons": read["ignored_reasons"]},
        "malformed": {
            "lines": read["malformed"],
            "non_utf8": read["malformed_non_utf8"],
            "sample_line_numbers": read["malformed_sample_lines"],
            "partial_tail": read["partial_tail"],
        },
        "read": {"lines": read["lines"], "bytes": read["bytes"], "events": read["events"]},
        # a branch the human rewound past: read, never carried (Claude Code never sends it)
        "rewound": {"lines": read["rewound_lines"], "speech": read["rewound_speech"]},
        "dirty": built.ledger.report(
            config.rebuild.dirty_budget_bytes, config.rebuild.rebuild_on_image
        ),
    }


def dirty_report(
    path: str | os.PathLike[str] | None,
    config: Config,
    progress: Progress | None = None,
    agent: str | None = None,
) -> dict[str, Any]:
    """How much runtime noise ``path`` holds, by category, and whether a rebuild is advised."""
    source = pick_transcript(path, config)
    if detect(source, agent) is AgentKind.CODEX:
        from runtime.engine.codex.rollout import scan as scan_rollout

        read, ledger, _, _ = scan_rollout(source, None, progress)
    else:
        read, ledger = scan(source, config.rebuild, None, progress)
    return {
        "transcript": str(source),
        **ledger.report(config.rebuild.dirty_budget_bytes, config.rebuild.rebuild_on_image),
        "lines": read.lines,
        "bytes": read.bytes,
        "malformed_lines": read.malformed,
    }
