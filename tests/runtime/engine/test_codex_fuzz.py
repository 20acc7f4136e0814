"""Property tests of the Codex reader: arbitrary bytes, cut or spliced rollouts and odd-shaped
lines never crash it and never put anything but user/assistant messages into a rebuilt rollout."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import orjson
from hypothesis import example, given, settings
from hypothesis import strategies as st

from runtime.config import Config
from runtime.engine.codex import candidate
from runtime.engine.codex.verify import verify_rollout
from runtime.errors import TranscriptError
from tests.runtime.codex_rollouts import Rollout

FUZZ = settings(max_examples=200, deadline=None)
REFUSALS = ("does not start with session_meta", "is not a JSONL rollout", "continues thread",
            "has no thread_id")


def _base() -> bytes:
    rollout = Rollout("01a23b12-da7f-7f00-b596-a358c49a08fb")
    rollout.exchange("hello 世界", "answer")
    rollout.start("exec")
    rollout.user("run a tool")
    rollout.tool_round()
    rollout.assistant("ran")
    rollout.end("ran")
    rollout.compaction("SUMMARY")
    rollout.exchange("queued", "queued answer", trigger="queue")
    return b"\n".join(rollout.lines) + b"\n"


BASE = _base()
META = BASE.split(b"\n", 1)[0] + b"\n"
WORK = Path(tempfile.mkdtemp(prefix="tl-codex-fuzz-",
                             dir=os.environ.get("THREADLINE_TEST_SANDBOX")))


def _check(data: bytes) -> None:
    """Build from ``data``: a refusal naming the problem is fine; anything built must be clean."""
    path = WORK / "rollout-2026-12-03T10-00-00-01a23b12-da7f-7f00-b596-a358c49a08fb.jsonl"
    path.write_bytes(data)
    try:
        built = candidate.build(path, Config())
    except TranscriptError as exc:
        assert any(reason in str(exc) for reason in REFUSALS), str(exc)
        return
    for line in built.items[1:]:
        assert line["type"] == "response_item"
        assert line["payload"]["type"] == "message"
        assert line["payload"]["role"] in ("user", "assistant")
        assert {part["type"] for part in line["payload"]["content"]} <= {
            "input_text", "output_text"}
    if built.empty_reason is None and built.blocked_reason is None:
        out = WORK / built.file_name
        out.write_bytes(b"".join(orjson.dumps(item) + b"\n" for item in built.items))
        os.chmod(out, 0o600)
        verify_rollout(out, built)
        out.unlink()


@FUZZ
@given(st.binary(max_size=2000))
def test_arbitrary_bytes_never_crash_the_codex_reader(data: bytes) -> None:
    _check(data)


@FUZZ
@given(st.integers(min_value=0, max_value=len(BASE)))
def test_a_rollout_cut_anywhere_never_crashes(cut: int) -> None:
    _check(BASE[:cut])


@FUZZ
@given(st.integers(min_value=0, max_value=len(BASE)), st.binary(min_size=1, max_size=40))
def test_garbage_spliced_into_a_rollout_never_crashes(at: int, garbage: bytes) -> None:
    _check(BASE[:at] + garbage + BASE[at:])


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
PART = st.fixed_dictionaries(
    {"type": st.sampled_from(["input_text", "output_text", "input_image", "text"]) | JSON},
    optional={"text": st.text(max_size=30) | JSON},
)
PAYLOAD = st.fixed_dictionaries(
    {"type": st.sampled_from(["message", "reasoning", "function_call", "item_completed",
                              "task_started", "compaction"]) | JSON},
    optional={
        "role": st.sampled_from(["user", "assistant", "developer"]) | JSON,
        "content": st.lists(PART, max_size=3) | JSON,
        "internal_chat_message_metadata_passthrough": st.fixed_dictionaries({}, optional={
            "content_item_kinds": st.lists(
                st.sampled_from(["user.text", "unknown", "environments.environment_context"])
                | JSON, max_size=3) | JSON,
            "content_item_metadata": st.lists(JSON, max_size=3) | JSON,
        }) | JSON,
        "item": JSON,
        "turn_attribution": JSON,
        "history_base": JSON,
    },
)
LINE = st.fixed_dictionaries(
    {"type": st.sampled_from(["response_item", "event_msg", "compacted", "world_state",
                              "session_meta"]) | JSON},
    optional={"payload": PAYLOAD | JSON, "ordinal": JSON, "timestamp": JSON,
              "metadata": st.fixed_dictionaries({}, optional={"compaction_output": JSON}) | JSON,
              "threadline": st.fixed_dictionaries({}, optional={"kind": JSON, "lead": JSON})
              | JSON},
)


def _message(role: str, part_type: Any, passthrough: Any = None) -> dict[str, Any]:
    payload = {"type": "message", "role": role, "content": [{"type": part_type, "text": "hi"}]}
    if passthrough is not None:
        payload["internal_chat_message_metadata_passthrough"] = passthrough
    return {"type": "response_item", "payload": payload}


@FUZZ
@given(st.lists(LINE, max_size=8))
@example([_message("user", ["input_text"])])  # unhashable where a string belongs: found by hand
@example([_message("assistant", {"type": "output_text"})])
@example([_message("user", "input_text", {
    "content_item_kinds": [["user.text"]],
    "content_item_metadata": [{"provenance": {"type": []}}]})])
def test_odd_shaped_lines_never_crash_and_stay_user_or_assistant(lines: list[Any]) -> None:
    _check(META + b"".join(orjson.dumps(line) + b"\n" for line in lines))


def test_a_deeply_nested_value_in_a_noise_line_is_read_not_a_recursion_crash() -> None:
    """A value nested 1000 deep in a tool line (orjson reads up to 1024): msgspec's skip of
    it recursed past Python's limit, and ``plan`` died with a RecursionError traceback."""
    deep = b"[" * 1000 + b"]" * 1000
    data = BASE.replace(b'"encrypted_content"', b'"nested":' + deep + b',"encrypted_content"', 1)
    assert data != BASE
    path = WORK / "rollout-2026-12-03T10-00-00-01a23b12-da7f-7f00-b596-a358c49a08fb.jsonl"
    path.write_bytes(data)
    built = candidate.build(path, Config())
    path.write_bytes(BASE)
    plain = candidate.build(path, Config())
    assert built.read.malformed == 0
    assert [i["payload"] for i in built.items[1:]] == [i["payload"] for i in plain.items[1:]]
