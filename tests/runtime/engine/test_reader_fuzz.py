"""Property tests of the reader: arbitrary bytes, truncated lines and odd-shaped events never
crash it and never put anything but user/assistant items into a candidate."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.config import Config
from runtime.engine import candidate
from runtime.engine.verify import verify_candidate
from runtime.errors import TranscriptError
from tests.fixtures.transcripts import Transcript, slash_text, tool_use

FUZZ = settings(max_examples=200, deadline=None)


def _base() -> bytes:
    t = Transcript()
    t.user("<system-reminder>r</system-reminder>\nhello 世界")
    t.tool_round()
    t.assistant("answer", message_id="m1")
    t.channel("from the phone")
    t.assistant(tool_use("mcp__companion__reply", {"text": "reply"}))
    t.queued("queued")
    t.user(slash_text("/orchestrator", "go"))
    t.assistant("on it")
    t.compact("summary")
    t.user("after")
    return b"\n".join(t.lines) + b"\n"


BASE = _base()


# inside the suite sandbox (tests/conftest.py removes it at the end of the run)
WORK = Path(tempfile.mkdtemp(prefix="tl-fuzz-", dir=os.environ.get("THREADLINE_TEST_SANDBOX")))


def _check(data: bytes) -> None:
    """Build from ``data``: a TranscriptError for junk is fine; anything built must be clean."""
    path = WORK / "fuzz.jsonl"
    path.write_bytes(data)
    try:
        built = candidate.build(path, Config())
    except TranscriptError as exc:
        assert "is not a JSONL transcript" in str(exc)
        return
    assert {item["type"] for item in built.items} <= {"user", "assistant"}
    for item in built.items:
        assert all(block["type"] == "text" for block in item["message"]["content"])
    if built.empty_reason is None and built.blocked_reason is None:
        # candidate.write fsyncs (tested elsewhere); here the same bytes go down without it
        out = WORK / f"{built.new_session_id}.jsonl"
        out.write_bytes(b"".join(orjson.dumps(item) + b"\n" for item in built.items))
        os.chmod(out, 0o600)
        verify_candidate(out, built)
        out.unlink()


@FUZZ
@given(st.binary(max_size=2000))
def test_arbitrary_bytes_never_crash_the_reader(data: bytes) -> None:
    _check(data)


@FUZZ
@given(st.integers(min_value=0, max_value=len(BASE)))
def test_a_transcript_cut_anywhere_never_crashes(cut: int) -> None:
    _check(BASE[:cut])


@FUZZ
@given(
    st.integers(min_value=0, max_value=len(BASE)),
    st.binary(min_size=1, max_size=40),
)
def test_garbage_spliced_into_a_line_never_crashes(at: int, garbage: bytes) -> None:
    _check(BASE[:at] + garbage + BASE[at:])


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
FIELDS = {
    "type": st.sampled_from(["user", "assistant", "attachment", "system", "summary", "x"]),
    "isMeta": st.booleans() | JSON,
    "isSidechain": st.booleans() | JSON,
    "isCompactSummary": st.booleans(),
    "origin": st.just({"kind": "channel"}) | JSON,
    "timestamp": st.just("2026-01-01T00:00:00.000Z") | JSON,
    "uuid": st.uuids().map(str) | JSON,
    "message": st.fixed_dictionaries(
        {},
        optional={
            "content": JSON
            | st.lists(
                st.fixed_dictionaries(
                    {
                        "type": st.sampled_from(
                            ["text", "tool_use", "tool_result", "image", "thinking"]
                        )
                    },
                    optional={"text": JSON, "name": JSON, "input": JSON, "content": JSON},
                ),
                max_size=3,
            ),
            "model": st.just("<synthetic>") | JSON,
            "id": JSON,
        },
    )
    | JSON,
    "attachment": st.fixed_dictionaries(
        {"type": st.just("queued_command") | JSON},
        optional={"prompt": JSON, "commandMode": JSON},
    )
    | JSON,
}


@FUZZ
@given(st.lists(st.fixed_dictionaries({}, optional=FIELDS), max_size=8))
def test_odd_shaped_events_never_crash_and_stay_user_or_assistant(events: list[Any]) -> None:
    _check(b"".join(orjson.dumps(event) + b"\n" for event in events))
