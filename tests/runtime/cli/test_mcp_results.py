"""The brief the status tool returns: state, age, failure and one line per phase, within 1 KB."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from runtime.cli.mcp_results import BRIEF_LIMIT, brief_status, span, timeline_lines

CREATED = datetime(2026, 12, 5, 8, 30, 57, 851000, tzinfo=UTC)
SESSION = "b75a57c8-f6af-43e5-a488-14e50e04a508"
PATH = "/home/agent/.claude/projects/-home-agent-work/" + "d" * 36 + ".jsonl"


def stamp(seconds: float) -> str:
    return (CREATED + timedelta(seconds=seconds)).isoformat(timespec="milliseconds")[:-6] + "Z"


def failed_record(phases: int) -> dict[str, Any]:
    """A full ``ops.status`` answer for a rebuild that failed after ``phases`` phases, with the
    evidence, facts and stats a real record carries (paths, argv, digests, counts)."""
    events = [{"state": "pending", "source": "mcp", "bound_session_id": SESSION,
               "at": stamp(0.006), "phase": "created"}]
    for n in range(1, phases - 1):
        events.append({"state": "running", "backup": PATH, "sha256": "2e1f" * 16,
                       "argv": ["/usr/bin/claude", "--resume", SESSION, "--channels", "x"] * 3,
                       "stats": {"items": 812, "turns": {"source": 131, "selected": 131}},
                       "at": stamp(n * 0.7), "phase": f"phase_{n}"})
    events.append({"state": "failed", "previous": "activating", "code": "unhealthy",
                   "message": "x" * 400, "at": stamp(phases * 0.7), "phase": "failed"})
    return {
        "operation_id": "op-20261205T083057.851736Z-2148d3",
        "state": "failed",
        "revision": phases,
        "created_at": stamp(0),
        "updated_at": stamp(phases * 0.7),
        "reasons": [{"reason": "the context is full of tool output " * 8, "source": "mcp",
                     "at": stamp(0), "session_id": SESSION}] * 3,
        "bound_session_id": SESSION,
        "door": "tmux",
        "worker": {"pid": 30117, "start_time": 6708960, "started_at": stamp(0.3)},
        "failure": {"code": "unhealthy",
                    "message": "new session unhealthy (channel server 'telegram' not running "
                               "under the new claude after 20 s); " + "the old one resumed " * 20},
        "facts": {"transcript_path": PATH, "stats": {"speech": {"not_carried": {
            f"kind_{n}": n for n in range(200)}}}, "old_argv": ["claude"] * 50},
        "worker_status": "none",
        "state_dir_size": "29.4 KiB",
        "heartbeat_age_s": 0.039,
        "request_age_s": None,
        "request_expires_in_s": None,
        "events": events,
    }


def test_a_failed_operation_with_a_long_timeline_fits_in_1_kb_failure_first() -> None:
    full = failed_record(phases=60)
    assert len(json.dumps(full)) > 20 * BRIEF_LIMIT  # what the status tool returned before
    brief = brief_status(full, CREATED + timedelta(minutes=5))
    assert len(json.dumps(brief)) <= BRIEF_LIMIT
    assert brief["state"] == "failed" and brief["age_s"] == 300.0
    failure = brief["failure"]
    assert failure is not None and failure["code"] == "unhealthy"
    assert failure["message"].startswith("new session unhealthy (channel server 'telegram'")
    assert brief["message"].startswith("failed — unhealthy, created 5m00s ago")
    assert "detail" not in brief and "facts" not in brief and "events" not in brief
    timeline = brief["timeline"]
    assert timeline[0] == "+0.01s created → pending"
    assert timeline[-1] == "+42.0s failed unhealthy"
    assert [line for line in timeline if line.startswith("… ")] == [
        f"… {60 - (len(timeline) - 1)} more phases"]


def test_a_short_timeline_is_kept_whole_one_line_per_phase() -> None:
    full = failed_record(phases=12)
    brief = brief_status(full, CREATED + timedelta(seconds=30))
    assert brief["timeline"] == timeline_lines(full["events"], full["created_at"])
    assert len(brief["timeline"]) == 12
    assert brief["timeline"][1] == "+0.70s phase_1 → running"
    assert brief["timeline"][2] == "+1.40s phase_2"  # the state did not change: not repeated


def test_detail_carries_the_whole_record_beside_the_brief() -> None:
    full = failed_record(phases=60)
    brief = brief_status(full, CREATED, detail=True)
    assert brief["detail"] == full
    assert brief["timeline"][0] == "+0.01s created → pending"


def test_no_operation_is_said_in_one_message() -> None:
    brief = brief_status({"operation_id": None, "state": None, "message": "no operations yet"},
                         CREATED)
    assert brief == {"operation_id": None, "state": None, "message": "no operations yet"}


def test_an_unhealthy_health_check_names_its_reason() -> None:
    events = [{"state": "activating", "ok": False, "reason": "cwd differs",
               "at": stamp(1.2), "phase": "health"}]
    assert timeline_lines(events, stamp(0)) == ["+1.20s health → activating not ok: cwd differs"]


def test_spans_read_in_the_shortest_unit() -> None:
    assert [span(s) for s in (0.284, 12.34, 245, 7380)] == ["0.28s", "12.3s", "4m05s", "2h03m"]
