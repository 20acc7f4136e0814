"""The Codex reader's fast path against the plain full parse: same reports, same fork, byte for
byte.

The reference is ``scan(fast=False)``: every line through ``orjson.loads`` and
``Classifier.event``, nothing settled early. Both paths run on every rollout of
``../shared/corpus/codex-0.169/`` (forks and revisions resolved against their parents there),
on hand-built rollouts of every shape the rules know, and on fuzzed lines (odd values where
the fast path reads a field, broken bytes, cut lines). ``plan --json`` and ``dirty --json``
must be identical and fork candidates byte-identical, malformed and partial lines included.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import msgspec
import orjson
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from runtime.config import Config
from runtime.engine.codex import candidate, rollout
from runtime.engine.report import dirty_report, plan_report
from runtime.errors import ThreadlineError
from tests.conftest import corpus_dir
from tests.runtime.codex_rollouts import Rollout
from tests.runtime.engine.test_codex_fuzz import LINE

WORK = Path(tempfile.mkdtemp(prefix="tl-codex-prefilter-",
                             dir=os.environ.get("THREADLINE_TEST_SANDBOX")))
SESSION = "99999999-8888-4777-8666-555555555555"
FOLDER = (corpus_dir() or Path("/nonexistent")) / "codex-0.169"
FILES = sorted(FOLDER.glob("*.jsonl")) if FOLDER.is_dir() else []
FUZZ = settings(max_examples=150, deadline=None)


def _outcome(path: Path, config: Config, fast: bool) -> dict[str, Any]:
    """plan and dirty JSON and the fork's bytes (or the error each gave) on one path."""
    saved = rollout.FAST
    rollout.FAST = fast
    try:
        result: dict[str, Any] = {}
        for name, report in (("plan", plan_report), ("dirty", dirty_report)):
            try:
                result[name] = orjson.dumps(report(path, config, agent="codex"))
            except ThreadlineError as exc:
                result[name] = f"{type(exc).__name__}: {exc}"
        try:
            built = candidate.build(path, config, new_session_id=SESSION)
            folder = WORK / ("fast" if fast else "full")
            written = candidate.write(built, folder)
            result["fork"] = written.read_bytes()
            written.unlink()
        except ThreadlineError as exc:
            result["fork"] = f"{type(exc).__name__}: {exc}"
        return result
    finally:
        rollout.FAST = saved


def _assert_same(path: Path, config: Config | None = None) -> None:
    config = config or Config()
    full = _outcome(path, config, fast=False)
    fast = _outcome(path, config, fast=True)
    for key in ("plan", "dirty", "fork"):
        assert fast[key] == full[key], f"{key} differs on {path.name}"


@pytest.mark.corpus
@pytest.mark.parametrize("path", FILES or [None], ids=lambda p: p.name if p else "missing")
def test_fast_path_matches_the_full_parse_on_every_corpus_rollout(path: Path | None) -> None:
    if path is None:
        pytest.skip(f"Codex corpus not found at {FOLDER} (../shared/corpus/codex-0.169)")
    _assert_same(path)


def _session() -> Rollout:
    rollout_ = Rollout("01a23b12-da7f-7f00-b596-a358c49a08fb")
    rollout_.exchange("hello 世界", "answer")
    rollout_.start("exec")
    rollout_.user("run a tool")
    rollout_.tool_round()
    rollout_.assistant("ran")
    rollout_.end("ran")
    rollout_.developer("<permissions instructions>none</permissions instructions>")
    rollout_.compaction("SUMMARY")
    rollout_.exchange("queued", "queued answer", trigger="queue")
    rollout_.exchange("typed again", "typed answer")
    return rollout_


def test_fast_path_matches_the_full_parse_on_a_hand_built_session() -> None:
    session = _session()
    session.event("item_completed", item={"type": "UserMessage", "content": "a bare string"})
    session.event("item_completed", item={"type": "AgentMessage", "content": None})
    session.event("item_completed", item=["not", "an", "object"])
    session.event("item_completed", item={"type": "UserMessage",
                                          "content": [{"type": "text", "text": 5}]})
    session.event("task_started", turn_attribution=["odd"])
    session.add("response_item", {"type": "web_search_call", "status": "completed"})
    session.add("response_item", {"type": "brand_new_item"})
    session.add("brand_new_line", {"type": "x"})
    session.add("response_item", None)
    session.event("item_completed", item={"type": "CommandExecution", "content": {"odd": 1}})
    session.message("user", "a bare string content")
    session.message("user", None)
    session.message("user", [{"type": "input_image", "image_url": "data:"},
                             {"type": "input_text", "text": "<image name=[Image #1]>"},
                             {"type": "input_text", "text": "look at this é"}])
    session.message("user", [{"type": "input_text", "text": "# Context from my IDE setup:\n"
                              "x\n## My request for Codex:\nfix it"}])
    session.message("user", [{"type": "input_text", "text": "tagged"}], ["not", "a", "dict"])
    session.message("user", [{"type": "input_text", "text": "harness"}],
                    {"content_item_kinds": ["environments.environment_context"]})
    session.message("user", [{"type": "input_text", "text": "provenance"}],
                    {"content_item_metadata": [{"provenance": {"type": "hook"}}]})
    session.message("assistant", [{"type": "output_text", "text": "  "}])
    session.message("assistant", [{"type": "output_text", "text": 7}])
    session.message("assistant", [{"type": "output_text", "text": "summary"}], None,
                    {"compaction_output": True})
    session.message("assistant", [{"type": "output_text", "text": "odd metadata"}], None,
                    ["x"])
    session.add("response_item", {"type": "message", "role": "assistant", "content": [
        {"type": "output_text", "text": "marked"}]}, threadline={"kind": "assistant_text"})
    session.add("response_item", {"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "no id"}]}, timestamp="not a time")
    session.lines.append(b'{"timestamp":"t","type":"turn_context","payload":{"a":"\xff"}}')
    session.lines.append(b'{"timestamp":"t","type":"turn_context","payload":{"cut":')
    _assert_same(session.write(WORK / "hand"))


def test_fast_path_matches_the_full_parse_on_a_legacy_rollout() -> None:
    legacy = Rollout(legacy=True)
    legacy.exchange("legacy hello", "legacy reply")
    legacy.tool_round()
    legacy.event("user_message", message=["not", "text"])
    legacy.event("agent_message", message=None)
    _assert_same(legacy.write(WORK / "legacy"))


def test_one_part_messages_take_the_short_path_exactly_as_the_full_parse() -> None:
    """Every branch of ``Prefilter._one`` (a one-part message booked without ``spoken``) and
    the cases it leaves to ``spoken``: the same plan, dirty and fork as the full parse."""
    session = Rollout()
    session.start("queue")
    session.user("queued one-part")  # kinds user.text under a queue trigger: queued
    session.start("exec")
    typed = {"content_item_kinds": ["user.text"]}
    said_by_user = {"content_item_metadata": [{"provenance": {"type": "user"}}]}
    for role, part, passthrough in [
        ("user", {"type": "input_text", "text": "kinds only"}, typed),
        ("user", {"type": "text", "text": "a text part 世界"}, typed),
        ("user", {"type": "input_text", "text": "provenance only"}, said_by_user),
        ("user", {"type": "input_text", "text": "harness kind, user provenance"},
         {"content_item_kinds": ["environments.environment_context"], **said_by_user}),
        ("user", {"type": "input_text", "text": "harness"},
         {"content_item_kinds": ["environments.environment_context"]}),
        ("user", {"type": "input_text", "text": "no passthrough"}, None),
        ("user", {"type": "input_text", "text": "empty lists"},
         {"content_item_kinds": [], "content_item_metadata": []}),
        ("user", {"type": "input_text", "text": " \n "}, typed),
        ("user", {"type": "input_image", "image_url": "data:"}, typed),
        ("user", {"type": "output_text", "text": "wrong part"}, typed),
        ("user", {"type": ["input_text"], "text": "odd part type"}, typed),
        ("user", {"type": "input_text", "text": "odd provenance"},
         {"content_item_metadata": [{"provenance": ["user"]}]}),
        ("assistant", {"type": "output_text", "text": "an answer é"}, None),
        ("assistant", {"type": "text", "text": "a text answer"}, None),
        ("assistant", {"type": "input_text", "text": "wrong part"}, None),
        ("assistant", {"type": "output_text"}, None),
    ]:
        session.message(role, [part], passthrough)
    session.add("response_item", {"type": "message", "role": "assistant", "content": [
        {"type": "output_text", "text": "no id, odd time"}]}, timestamp=["not a time"])
    session.end("done")
    path = session.write(WORK / "one-part")
    _assert_same(path)
    built = candidate.build(path, Config())
    kinds = [(u.kind, u.text) for t in built.turns for u in t.items]
    assert ("queued", "queued one-part") in kinds
    assert ("typed", "harness kind, user provenance") in kinds
    assert ("untagged", "no passthrough") in kinds
    assert not any(text == "harness" for _, text in kinds)


def test_a_declined_task_started_leaves_the_trigger_to_the_full_parse() -> None:
    """A queue trigger on a line that is not valid UTF-8 is malformed: the next message is
    typed on both paths, not queued on the fast one."""
    session = Rollout()
    session.exchange("first", "reply")
    session.lines.append(b'{"timestamp":"t","type":"event_msg","payload":{"type":"task_started",'
                         b'"turn_attribution":{"turn_trigger":"queue"},"x":"\xff"}}')
    session.user("after a broken trigger")
    session.assistant("reply")
    path = session.write(WORK / "trigger")
    _assert_same(path)
    built = candidate.build(path, Config())
    assert [u.kind for t in built.turns for u in t.items if u.role == "user"] == ["typed"] * 2


# -- fuzz -----------------------------------------------------------------------------------

BASE = b"\n".join(_session().lines) + b"\n"
META = BASE.split(b"\n", 1)[0] + b"\n"


def _overflows(data: bytes) -> bool:
    """A line only a number beyond the float range breaks: orjson rejects it, msgspec skips it
    (the one known difference, see ``runtime/engine/codex/prefilter.py``); serde_json never writes
    one."""
    for line in data.splitlines():
        try:
            orjson.loads(line)
        except orjson.JSONDecodeError:
            try:
                msgspec.json.decode(line)
            except msgspec.DecodeError:
                continue
            if line.isascii() or _utf8(line):
                return True
    return False


def _utf8(line: bytes) -> bool:
    try:
        line.decode()
    except UnicodeDecodeError:
        return False
    return True


def _check(data: bytes) -> None:
    assume(not _overflows(data))
    folder = WORK / "fuzz"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    path = folder / "rollout-2026-12-03T10-00-00-01a23b12-da7f-7f00-b596-a358c49a08fb.jsonl"
    path.write_bytes(data)
    _assert_same(path)


@FUZZ
@given(st.lists(LINE, max_size=8))
@example([{"type": "event_msg", "payload": {"type": "item_completed",
                                            "item": {"type": "UserMessage", "content": {}}}}])
@example([{"type": "event_msg", "payload": {"type": "task_started",
                                            "turn_attribution": {"turn_trigger": "queue"}}},
          {"type": "response_item", "payload": {"type": "message", "role": "user",
                                                "content": [{"type": "input_text", "text": "q"}],
                                                "internal_chat_message_metadata_passthrough": {
                                                    "content_item_kinds": ["user.text"]}}}])
def test_fast_path_matches_the_full_parse_on_odd_shaped_lines(lines: list[Any]) -> None:
    _check(META + b"".join(orjson.dumps(line) + b"\n" for line in lines))


@FUZZ
@given(st.integers(min_value=len(META), max_value=len(BASE)), st.binary(min_size=1, max_size=12))
def test_fast_path_matches_the_full_parse_with_garbage_spliced_in(at: int, garbage: bytes) -> None:
    _check(BASE[:at] + garbage + BASE[at:])


@FUZZ
@given(st.integers(min_value=len(META), max_value=len(BASE)))
def test_fast_path_matches_the_full_parse_on_a_rollout_cut_anywhere(cut: int) -> None:
    _check(BASE[:cut])


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "full"])
def test_a_build_is_freed_by_reference_counting_alone(fast: bool) -> None:
    """Nothing a read or build keeps sits in a reference cycle: ``plan``/``fork`` run with the
    cyclic GC paused (runtime.cli.engine), so a cycle through the reader would hold every turn,
    utterance and UI copy until a collection walks them all (one did: 15 ms of a 100 MB plan,
    through a bound method the prefilter kept of itself)."""
    import gc
    import weakref

    path = _session().write(WORK / f"cycle-{fast}")
    saved = rollout.FAST
    rollout.FAST = fast
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        built = candidate.build(path, Config(), new_session_id=SESSION)
        turn = weakref.ref(built.turns[0])  # a Turn: freed only when the whole read is
        assert built.item_count > 0
        del built
        assert turn() is None, "the build outlived its last reference: a cycle holds it"
    finally:
        rollout.FAST = saved
        if enabled:
            gc.enable()
