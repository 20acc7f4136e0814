"""What each ``thread_rebuild_*`` tool returns: typed results, so ``tools/list`` publishes a
real ``outputSchema`` per tool, and the compact status the model reads by default.

The SDK validates every result against its type and drops keys the type does not declare;
a tool that should pass a report through whole says so (``extra="allow"``).
``brief_status`` cuts the full operation record (≈10 KB for one rolled-back rebuild) to what
the model needs — state, age, failure, one short line per phase — within ``BRIEF_LIMIT``.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, NotRequired

from pydantic import ConfigDict

# pydantic takes nested TypedDicts below Python 3.12 only from typing_extensions
from typing_extensions import TypedDict

from runtime.cli.render import clip as _clip
from runtime.cli.render import span, timeline_lines
from runtime.cli.render import when as _when

__all__ = ["BRIEF_LIMIT", "brief_status", "span", "timeline_lines"]

BRIEF_LIMIT = 1024  # bytes of JSON; the status tool exists to keep the model's context clean
MESSAGE_CHARS = 240
REASON_CHARS = 100


class Check(TypedDict):
    """One doctor check."""

    ok: bool
    detail: Any


class DoctorResult(TypedDict):
    """Whether the runtime config, store and door are ready to rebuild this session."""

    ok: bool
    checks: dict[str, Check]
    active: dict[str, Any] | None


class DirtyLedger(TypedDict):
    """Noise by category and the advisory verdict."""

    categories: dict[str, int]
    other_by_type: dict[str, int]
    malformed_bytes: int
    noise_bytes: int
    conversation_bytes: int
    noise_ratio: float
    dirty_budget_bytes: int
    image_seen: bool
    should_rebuild: bool
    reasons: list[str]


class DirtyResult(DirtyLedger):
    """The dirty ledger of one transcript and which transcript was measured (and why that one)."""

    transcript: str
    transcript_source: str
    lines: int
    bytes: int
    malformed_lines: int


class PlanTurns(TypedDict):
    """Turns in the source and the turns a rebuild would carry."""

    source: int
    selected: int
    open_tail: bool
    excluded_open_tail: int
    dropped_oldest_turns: int


class PlanResult(TypedDict):
    """What a rebuild would carry and drop; reader-specific details pass through as they are."""

    # Claude and Codex builds add different detail keys; all of them pass through.
    __pydantic_config__ = ConfigDict(extra="allow")  # type: ignore[misc]  # pydantic's hook

    transcript: str
    transcript_source: str
    items: int
    turns: PlanTurns
    speech: dict[str, Any]
    blocked_reason: str | None
    nothing_to_carry: str | None
    ignored: dict[str, Any]
    malformed: dict[str, Any]
    read: dict[str, int]
    dirty: DirtyLedger


class RequestResult(TypedDict):
    """The pending operation a request registered or joined."""

    operation_id: str
    state: str
    reasons: list[str]
    bound_session_id: str | None
    message: str


class CancelResult(TypedDict):
    """The operation after a cancel."""

    operation_id: str
    state: str
    message: str


class RollbackResult(CancelResult):
    """The operation after a rollback request, and what the old session will not have."""

    turns_since_switch: int | None


class Failure(TypedDict):
    """Why an operation failed: a stable code and a one-sentence message."""

    code: str
    message: str


class StatusResult(TypedDict):
    """One operation at a glance; ``detail`` holds the whole record and timeline on request."""

    operation_id: str | None
    state: str | None
    message: str
    age_s: NotRequired[float | None]
    door: NotRequired[str]
    worker_status: NotRequired[str]
    bound_session_id: NotRequired[str | None]
    new_session_id: NotRequired[str | None]
    reasons: NotRequired[int]
    reason: NotRequired[str | None]
    request_expires_in_s: NotRequired[float | None]
    failure: NotRequired[Failure | None]
    timeline: NotRequired[list[str]]
    detail: NotRequired[dict[str, Any]]


def brief_status(full: dict[str, Any], now: datetime, detail: bool = False) -> StatusResult:
    """``full`` (``ops.status``) cut to at most ``BRIEF_LIMIT`` bytes of JSON; with ``detail``
    the whole of ``full`` rides along under ``detail``.

    A long timeline keeps its first and last phases and says how many it left out between.
    """
    if full.get("operation_id") is None:
        return {"operation_id": None, "state": None,
                "message": str(full.get("message", "no operations yet"))}
    created = _when(full.get("created_at"))
    failure = full.get("failure") or None
    reasons = full.get("reasons") or []
    facts = full.get("facts") or {}
    brief: StatusResult = {
        "operation_id": full["operation_id"],
        "state": full["state"],
        "message": "",
        "age_s": round((now - created).total_seconds(), 1) if created else None,
        "door": str(full.get("door", "")),
        "worker_status": str(full.get("worker_status", "")),
        "bound_session_id": full.get("bound_session_id"),
        "new_session_id": facts.get("new_session_id"),
        "reasons": len(reasons),
        "reason": _clip(str(reasons[-1].get("reason", "")), REASON_CHARS) if reasons else None,
        "failure": None if failure is None else {
            "code": str(failure.get("code", "")),
            "message": _clip(str(failure.get("message", "")), MESSAGE_CHARS),
        },
        "timeline": timeline_lines(list(full.get("events") or []), full.get("created_at")),
    }
    if full.get("request_expires_in_s") is not None:
        brief["request_expires_in_s"] = full["request_expires_in_s"]
    age_s = brief.get("age_s")
    age = f", created {span(age_s)} ago" if age_s is not None else ""
    why = f" — {failure.get('code')}" if failure else ""
    brief["message"] = f"{full['state']}{why}{age}; detail=true gives the full record"
    _fit(brief)
    if detail:
        brief["detail"] = full
    return brief


def _fit(brief: StatusResult) -> None:
    """Keep the first and last phases of the timeline, with one line saying how many were left
    out between them, so that the brief fits ``BRIEF_LIMIT``."""
    lines = brief.get("timeline", [])
    for keep in range(len(lines), -1, -1):
        head, tail = lines[: (keep + 1) // 2], lines[len(lines) - keep // 2:]
        left_out = len(lines) - keep
        brief["timeline"] = [*head, f"… {left_out} more phases", *tail] if left_out else lines
        if len(json.dumps(brief)) <= BRIEF_LIMIT:  # \u escapes: never shorter than UTF-8
            return
