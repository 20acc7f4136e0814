"""The Codex reader and speech allowlist, one hand-made rollout per rule."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest

from runtime.agents.detect import detect
from runtime.config import Config
from runtime.engine.codex import candidate
from runtime.engine.codex.rollout import scan
from runtime.engine.turns import TurnBuilder
from runtime.errors import ConfigError, TranscriptError
from tests.fixtures.transcripts import Transcript
from tests.runtime.codex_rollouts import ENV_CONTEXT, Rollout


def carried(path: Path) -> list[tuple[str, str, str]]:
    built = candidate.build(path, Config())
    return [(u.role, u.kind, u.text) for i in built.selected for u in built.turns[i].items]


def test_line0_session_meta_picks_codex_and_a_transcript_stays_claude(tmp_path: Path) -> None:
    rollout = Rollout()
    rollout.exchange("hi", "hello")
    codex = rollout.write(tmp_path)
    t = Transcript()
    t.user("hello")
    claude = t.write(tmp_path / "11111111-2222-3333-4444-555555555555.jsonl")
    assert detect(codex) == "codex"
    assert detect(claude) == "claude"
    assert detect(claude, "codex") == "codex"
    with pytest.raises(TranscriptError, match="is a Codex rollout .* leave out --agent claude"):
        detect(codex, "claude")  # read as a transcript it would hold nothing: refused
    with pytest.raises(ConfigError, match="'gemini' is not one of claude, codex"):
        detect(codex, "gemini")


def test_forcing_codex_on_a_claude_transcript_fails_with_the_path(tmp_path: Path) -> None:
    t = Transcript()
    t.user("hello")
    claude = t.write(tmp_path / "11111111-2222-3333-4444-555555555555.jsonl")
    with pytest.raises(TranscriptError, match="does not start with session_meta"):
        scan(claude)


def test_typed_messages_are_speech_and_ui_copies_are_not_counted_twice(tmp_path: Path) -> None:
    rollout = Rollout()
    rollout.exchange('with "quotes"\nand é ✓', "answer one")
    rollout.exchange("second", "answer two", trigger="user")
    built = candidate.build(rollout.write(tmp_path), Config())
    assert carried(built.source) == [
        ("user", "typed", 'with "quotes"\nand é ✓'), ("assistant", "assistant_text", "answer one"),
        ("user", "typed", "second"), ("assistant", "assistant_text", "answer two"),
    ]
    assert built.counts["source"] == {"typed": 2, "queued": 0, "untagged": 0,
                                      "assistant_text": 2}
    assert built.read.ignored_types["event_msg:item_completed"] == 4
    assert built.details["recognition_audit"]["unrecognised"] == {}


@pytest.mark.parametrize("lay_out", [True, False])  # fork keeps every text; plan lets go
@pytest.mark.parametrize("stray", [False, True])
def test_the_audit_matches_copies_in_any_order_and_names_a_copy_nothing_said(
    tmp_path: Path, stray: bool, lay_out: bool
) -> None:
    rollout = Rollout()
    rollout.start(harness=True)
    for text in ("first", "second"):  # the messages, their copies written later, swapped
        rollout.message("user", [{"type": "input_text", "text": text}],
                        {"content_item_kinds": ["user.text"]})
    for text in ("second", "first"):
        rollout.event("item_completed", item={"type": "UserMessage", "id": text,
                                              "content": [{"type": "text", "text": text}]})
    rollout.assistant("reply")
    if stray:
        rollout.event("item_completed", item={"type": "AgentMessage", "id": "stray",
                                              "content": [{"type": "Text", "text": "unsaid"}]})
    path = rollout.write(tmp_path)
    audit = candidate.build(path, Config(), lay_out=lay_out).details["recognition_audit"]
    assert audit["candidates"] == {"user ui copy": 2, "assistant ui copy": 1 + stray}
    assert audit["unrecognised"] == ({"assistant ui copy": 1} if stray else {})


@pytest.mark.parametrize("fast", [True, False])
def test_a_ui_copy_is_held_as_the_string_of_its_message(tmp_path: Path, fast: bool) -> None:
    rollout = Rollout()
    for _ in range(2):  # the same words twice: each copy pairs with its own message only
        rollout.exchange("a long paste → " * 50, "a reply — " * 50)
    sink = TurnBuilder()
    _, _, classifier, _ = scan(rollout.write(tmp_path), sink, fast=fast)
    said = [u.text for turn in sink.finish() for u in turn.items]
    copies = [classifier.ui_user[0], classifier.ui_assistant[0],
              classifier.ui_user[1], classifier.ui_assistant[1]]
    assert copies == said
    assert all(copy is text for copy, text in zip(copies, said, strict=True))
    assert said[0] is not said[2] and said[1] is not said[3]


def test_environment_context_and_developer_messages_are_harness_not_speech(
    tmp_path: Path,
) -> None:
    rollout = Rollout()
    rollout.exchange("hello", "hi")
    rollout.developer("<collaboration_mode>default</collaboration_mode>")
    texts = [text for _, _, text in carried(rollout.write(tmp_path))]
    assert texts == ["hello", "hi"]
    assert ENV_CONTEXT not in texts


def test_a_message_delivered_by_codex_queue_is_queued_human_speech(tmp_path: Path) -> None:
    rollout = Rollout()
    rollout.exchange("typed", "reply")
    rollout.exchange("QUEUED-MSG", "reply to queue", trigger="queue")
    assert carried(rollout.write(tmp_path))[2] == ("user", "queued", "QUEUED-MSG")


def test_parts_are_judged_one_by_one_in_a_desktop_message(tmp_path: Path) -> None:
    rollout = Rollout()
    rollout.start("user", harness=True)
    rollout.message("user", [
        {"type": "input_text", "text": "# AGENTS.md instructions for /w\n\nbe terse"},
        {"type": "input_text", "text": ENV_CONTEXT},
        {"type": "input_text", "text": "<image name=[Image #1]>"},
        {"type": "input_image", "image_url": "data:image/png;base64,AAAA"},
        {"type": "input_text", "text": "</image>"},
        {"type": "input_text", "text": "what is in the picture?"},
    ])
    rollout.message("user", [{"type": "input_text", "text": (
        "# Context from my IDE setup:\n\n## Open tabs:\n- a.py\n\n"
        "## My request for Codex:\nfix the bug in a.py")}])
    rollout.message("user", [{"type": "input_text", "text": "<turn_aborted>\nx\n</turn_aborted>"}])
    rollout.assistant("done")
    path = rollout.write(tmp_path)
    built = candidate.build(path, Config())
    line = next(x for x in path.read_bytes().splitlines() if b"what is in the picture" in x)
    desktop = orjson.loads(line)["payload"]["content"]
    harness_text = sum(len(p["text"].encode()) for p in desktop if "text" in p) - len(
        b"what is in the picture?")
    assert built.ledger.noise["harness_message"] >= harness_text + len(ENV_CONTEXT.encode())
    assert carried(built.source) == [
        ("user", "untagged", "what is in the picture?"),
        ("user", "untagged", "fix the bug in a.py"),
        ("assistant", "assistant_text", "done"),
    ]
    assert built.ledger.image_seen is True


def test_noise_goes_to_its_category_by_the_bytes_of_its_lines(tmp_path: Path) -> None:
    rollout = Rollout()
    rollout.start("exec", harness=True)
    rollout.user("run it")
    before = len(rollout.lines)
    rollout.tool_round()
    tool_lines = rollout.lines[before:]
    rollout.add("response_item", {"type": "custom_tool_call", "name": "apply_patch",
                                  "input": "*** Begin Patch"})
    rollout.add("response_item", {"type": "web_search_call", "action": {"query": "x"}})
    rollout.add("response_item", {"type": "ghost_snapshot", "ghost_commit": {"id": "abc"}})
    rollout.add("mystery_line", {"x": 1})
    rollout.assistant("ran it")
    rollout.end("ran it")
    read, ledger, _, _ = scan(rollout.write(tmp_path))
    size = {i: len(line) + 1 for i, line in enumerate(tool_lines)}
    assert ledger.noise["reasoning"] == size[0]
    assert ledger.noise["function_call"] == size[2]
    assert ledger.noise["function_call_output"] == size[3]
    assert ledger.noise["custom_tool_call"] > 0 and ledger.noise["web_search_call"] > 0
    assert ledger.noise["world_state"] > 0 and ledger.noise["turn_context"] > 0
    assert ledger.noise["token_records"] > 0 and ledger.noise["harness_message"] > 0
    assert set(ledger.other_by_type) >= {"response_item:ghost_snapshot", "mystery_line"}
    assert read.ignored_types["mystery_line"] == 1
    assert ledger.noise_bytes + ledger.conversation_bytes == read.bytes
    assert ledger.conversation_bytes < read.bytes // 2


def test_compaction_keeps_the_earlier_conversation_and_drops_a_covered_summary(
    tmp_path: Path,
) -> None:
    rollout = Rollout()
    rollout.exchange("first", "reply one")
    rollout.exchange("second", "reply two")
    rollout.compaction("SUMMARY-OF-CONVERSATION")
    rollout.user("third")
    rollout.assistant("reply three")
    rollout.end("reply three")
    built = candidate.build(rollout.write(tmp_path), Config())
    texts = [text for _, _, text in carried(built.source)]
    assert texts == ["first", "reply one", "second", "reply two", "third", "reply three"]
    assert built.details["compaction"] == {"summaries": 1, "carried": 0}
    assert built.ledger.noise["compaction"] > 0


def test_a_fork_inlines_its_parent_before_the_end_ordinal(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    parent = Rollout()
    parent.exchange("parent one", "parent reply one")
    cut = parent.ordinal
    parent.exchange("parent two (after the fork point)", "not in the fork")
    parent.write(sessions / "2026" / "12" / "02")
    child = Rollout(first_ordinal=cut, history_base={
        "thread_id": parent.id, "end_ordinal_exclusive": cut, "end_byte_offset": 0})
    child.exchange("child", "child reply", trigger="exec")
    built = candidate.build(child.write(sessions / "2026" / "12" / "03"), Config())
    assert [text for _, _, text in carried(built.source)] == [
        "parent one", "parent reply one", "child", "child reply"]
    assert len(built.parents) == 1 and parent.id in built.parents[0]


def test_a_revision_of_the_same_thread_inlines_the_revised_file(tmp_path: Path) -> None:
    original = Rollout()
    original.exchange("turn one", "reply one")
    cut = original.ordinal
    original.exchange("turn two (reverted)", "reverted reply")
    original.write(tmp_path)
    revision = Rollout(original.id, first_ordinal=cut, history_base={
        "thread_id": original.id, "end_ordinal_exclusive": cut, "end_byte_offset": 0})
    revision.message("user", [{"type": "input_text", "text": "INJECTED"}],
                     {"turn_id": "auto-compact-1", "content_item_kinds": ["unknown"]})
    revision.assistant("after revert")
    path = revision.write(tmp_path, f"rollout-2026-12-03T11-00-00-{original.id}_rev1.jsonl")
    assert carried(path) == [
        ("user", "typed", "turn one"), ("assistant", "assistant_text", "reply one"),
        ("user", "untagged", "INJECTED"), ("assistant", "assistant_text", "after revert")]


REV1 = "01a24916-263a-7b23-9a45-119d92d0f8b8"  # revision ids are UUIDv7 (measured)
REV2 = "01a24916-26cf-70f0-bca7-ca7be2469e69"


def reverted_twice(sessions: Path) -> tuple[Rollout, Path, Path]:
    """Shaped like two ``thread/revert``s measured with 0.169.0: the original file stays as it
    was; revision 1's base is the thread id, revision 2's base is revision 1's id; both files
    carry the thread id in line 0 and in the name, ``…-<thread>_<revision>.jsonl``."""
    folder = sessions / "2026" / "12" / "06"
    original = Rollout()
    original.exchange("one", "reply one")
    first_cut = original.ordinal
    original.exchange("two (reverted)", "reverted")
    original.write(folder, f"rollout-2026-12-06T02-01-57-{original.id}.jsonl")
    first = Rollout(original.id, first_ordinal=first_cut, history_base={
        "thread_id": original.id, "end_ordinal_exclusive": first_cut, "end_byte_offset": 0})
    first.exchange("three", "reply three")
    second_cut = first.ordinal
    first.exchange("four (reverted)", "reverted")
    rev1 = first.write(folder, f"rollout-2026-12-06T02-01-58-{original.id}_{REV1}.jsonl")
    second = Rollout(original.id, first_ordinal=second_cut, history_base={
        "thread_id": REV1, "end_ordinal_exclusive": second_cut, "end_byte_offset": 0})
    second.exchange("five", "reply five")
    rev2 = second.write(folder, f"rollout-2026-12-06T02-01-58-{original.id}_{REV2}.jsonl")
    return original, rev1, rev2


def test_a_revision_of_a_revision_reads_each_file_once(tmp_path: Path) -> None:
    original, rev1, rev2 = reverted_twice(tmp_path / "sessions")
    os.utime(rev1, (1, 1))  # by name, not by age
    assert [text for _, _, text in carried(rev2)] == [
        "one", "reply one", "three", "reply three", "five", "reply five"]


def test_an_older_revision_inlines_the_original_even_when_a_newer_one_exists(
    tmp_path: Path,
) -> None:
    _, rev1, _ = reverted_twice(tmp_path / "sessions")
    assert [text for _, _, text in carried(rev1)] == [
        "one", "reply one", "three", "reply three", "four (reverted)", "reverted"]


def test_a_fork_of_a_reverted_thread_inlines_the_revision_its_base_names(
    tmp_path: Path,
) -> None:
    sessions = tmp_path / "sessions"
    _, _, rev2 = reverted_twice(sessions)
    cut = int(orjson.loads(rev2.read_bytes().splitlines()[-1])["ordinal"]) + 1
    fork = Rollout(first_ordinal=cut, history_base={
        "thread_id": REV2, "end_ordinal_exclusive": cut, "end_byte_offset": 0})
    fork.exchange("forked", "reply forked")
    path = fork.write(sessions / "2026" / "12" / "06")
    assert [text for _, _, text in carried(path)] == [
        "one", "reply one", "three", "reply three", "five", "reply five", "forked",
        "reply forked"]


def test_a_fork_of_a_fork_cut_inside_the_inherited_history_inlines_the_grandparent(
    tmp_path: Path,
) -> None:
    """The middle thread's own lines start past the cut (its ordinals continue the
    grandparent's): the grandparent's lines before the cut are still the history."""
    sessions = tmp_path / "sessions"
    grandparent = Rollout()
    grandparent.exchange("one", "reply one")
    cut = grandparent.ordinal
    grandparent.exchange("two", "reply two")
    middle_start = grandparent.ordinal
    grandparent.write(sessions / "2026" / "12" / "01")
    middle = Rollout(first_ordinal=middle_start, history_base={
        "thread_id": grandparent.id, "end_ordinal_exclusive": middle_start})
    middle.exchange("middle", "reply middle")
    middle.write(sessions / "2026" / "12" / "02")
    child = Rollout(first_ordinal=cut, history_base={
        "thread_id": middle.id, "end_ordinal_exclusive": cut})
    child.exchange("child", "reply child")
    path = child.write(sessions / "2026" / "12" / "03")
    assert [text for _, _, text in carried(path)] == ["one", "reply one", "child", "reply child"]


def test_histories_that_name_each_other_or_themselves_are_refused_as_a_cycle(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "sessions" / "2026" / "12" / "03"
    one, two, alone = (str(uuid.uuid4()) for _ in range(3))
    paths = []
    for thread, base in ((one, two), (two, one), (alone, alone)):
        rollout = Rollout(thread, first_ordinal=5, history_base={
            "thread_id": base, "end_ordinal_exclusive": 5})
        rollout.exchange("said", "answered")
        paths.append(rollout.write(folder))
    for path, thread in ((paths[0], two), (paths[2], alone)):
        with pytest.raises(TranscriptError) as caught:
            candidate.build(path, Config())
        message = str(caught.value)
        assert "cycle" in message and thread in message and "\n" not in message


def test_a_missing_parent_is_an_error_naming_thread_and_folder(tmp_path: Path) -> None:
    child = Rollout(first_ordinal=9, history_base={
        "thread_id": "01a23b12-0000-7000-8000-000000000000", "end_ordinal_exclusive": 9})
    child.exchange("child", "reply")
    path = child.write(tmp_path / "sessions")
    with pytest.raises(TranscriptError) as caught:
        candidate.build(path, Config())
    message = str(caught.value)
    assert "01a23b12-0000-7000-8000-000000000000" in message
    assert str(tmp_path / "sessions") in message and "\n" not in message


def fork_after(parent: Rollout, folder: Path, sessions: Path) -> Path:
    """``parent`` written into ``folder``, and a fork of it cut after its last line written
    into ``sessions``: the fork's path."""
    parent.write(folder)
    child = Rollout(first_ordinal=parent.ordinal, history_base={
        "thread_id": parent.id, "end_ordinal_exclusive": parent.ordinal, "end_byte_offset": 0})
    child.exchange("child", "child reply")
    return child.write(sessions / "2026" / "12" / "03")


def test_two_copies_of_a_parent_in_two_date_folders_are_refused_naming_both(
    tmp_path: Path,
) -> None:
    """Measured with 0.169.0: which copy Codex loads follows its sqlite index, else its fuzzy
    file search (the shorter path won, not the newer date or mtime) — nothing in the files
    says. The reader took the sorted-first path silently: ``2025/…`` over ``2026/…``."""
    sessions = tmp_path / "sessions"
    parent = Rollout()
    parent.exchange("the original question", "the original answer")
    copy = Rollout(parent.id)
    copy.exchange("a copy that says otherwise", "another answer")
    copied = copy.write(sessions / "2025" / "01" / "15",
                        f"rollout-2025-01-15T09-00-00-{parent.id}.jsonl")
    child = fork_after(parent, sessions / "2026" / "12" / "02", sessions)
    kept = sessions / "2026" / "12" / "02" / f"rollout-2026-12-03T10-00-00-{parent.id}.jsonl"
    with pytest.raises(TranscriptError) as caught:
        candidate.build(child, Config())
    message = str(caught.value)
    assert str(kept) in message and str(copied) in message and parent.id in message
    assert "\n" not in message


def test_a_fork_whose_parent_was_archived_inlines_it_from_archived_sessions(
    tmp_path: Path,
) -> None:
    """``codex archive`` moves the parent to ``$CODEX_HOME/archived_sessions``; 0.169.0 still
    resolves a fork's parent there (measured: ``codex exec resume <fork>`` sent the archived
    parent's messages). The reader refused it as "not under sessions"."""
    parent = Rollout()
    parent.exchange("archived parent question", "archived parent answer")
    path = fork_after(parent, tmp_path / "archived_sessions" / "2026" / "12" / "02",
                      tmp_path / "sessions")
    assert [text for _, _, text in carried(path)] == [
        "archived parent question", "archived parent answer", "child", "child reply"]


def test_a_parent_in_sessions_wins_over_its_archived_copy(tmp_path: Path) -> None:
    """Codex looks under ``sessions`` first and under ``archived_sessions`` only when that
    finds nothing: the same thread in both is no ambiguity."""
    parent = Rollout()
    parent.exchange("live parent", "live answer")
    stale = Rollout(parent.id)
    stale.exchange("archived copy", "archived answer")
    stale.write(tmp_path / "archived_sessions" / "2026" / "12" / "02")
    path = fork_after(parent, tmp_path / "sessions" / "2026" / "12" / "02",
                      tmp_path / "sessions")
    assert [text for _, _, text in carried(path)][:2] == ["live parent", "live answer"]


def test_a_missing_parent_names_sessions_and_archived_sessions(tmp_path: Path) -> None:
    child = Rollout(first_ordinal=9, history_base={
        "thread_id": "01a23b12-0000-7000-8000-000000000000", "end_ordinal_exclusive": 9})
    child.exchange("child", "reply")
    path = child.write(tmp_path / "sessions" / "2026" / "12" / "03")
    with pytest.raises(TranscriptError) as caught:
        candidate.build(path, Config())
    message = str(caught.value)
    assert repr(str(tmp_path / "sessions")) in message
    assert repr(str(tmp_path / "archived_sessions")) in message and "\n" not in message


# Line-0 fields Codex 0.169.0 refused in ``codex exec resume`` (each measured), and one odd
# but accepted value of each kind that must still be read.
REFUSED_META = [
    ({"cwd": ["/srv/probe/work"]}, "'cwd' is array"),
    ({"cwd": None}, "'cwd' is null"),
    ({"cli_version": 169}, "'cli_version' is number"),
    ({"originator": 5}, "'originator' is number"),
    ({"timestamp": 5}, "'timestamp' is number"),
    ({"source": 5}, "'source' is number"),
    ({"source": None}, "'source' is null"),
    ({"model_provider": 5}, "'model_provider' is number"),
    ({"history_mode": "bogus"}, "'history_mode' is string ('bogus')"),
    ({"git": "main"}, "'git' is string"),
    ({"git": {"branch": 5}}, "'git.branch' is number"),
    ({"base_instructions": "x"}, "'base_instructions' is string"),
    ({"base_instructions": {}}, "'base_instructions.text' is missing"),
    ({"thread_source": 5}, "'thread_source' is number"),
    ({"account_scoped": "x"}, "'account_scoped' is string"),
]
ACCEPTED_META = [{"cwd": "relative/dir"}, {"source": "bogus"}, {"source": {"subagent": "review"}},
                 {"model_provider": None}, {"git": None}, {"base_instructions": None},
                 {"timestamp": "yesterday"}, {"history_mode": "legacy"}, {"zzz_unknown": [1]}]


def _with_meta(tmp_path: Path, **fields: Any) -> Path:
    rollout = Rollout()
    rollout.exchange("keep me", "kept")
    head = orjson.loads(rollout.lines[0])
    head["payload"].update(fields)
    rollout.lines[0] = orjson.dumps(head)
    return rollout.write(tmp_path / "sessions")


@pytest.mark.parametrize(("fields", "said"), REFUSED_META)
def test_a_line0_field_codex_cannot_read_is_refused_when_read(
    tmp_path: Path, fields: dict[str, Any], said: str
) -> None:
    """The rebuild copies line 0's fields verbatim: a candidate with ``cwd`` a list verified,
    and Codex then refused to resume it ("does not start with session metadata")."""
    path = _with_meta(tmp_path, **fields)
    for read in (lambda: candidate.build(path, Config()), lambda: scan(path)):
        with pytest.raises(TranscriptError) as caught:
            read()
        message = str(caught.value)
        assert said in message and str(path) in message and "\n" not in message


@pytest.mark.parametrize("fields", ACCEPTED_META)
def test_a_line0_field_codex_reads_is_carried(tmp_path: Path, fields: dict[str, Any]) -> None:
    path = _with_meta(tmp_path, **fields)
    assert [text for _, _, text in carried(path)] == ["keep me", "kept"]


def test_a_rollout_cut_inside_its_last_message_names_the_partial_tail(tmp_path: Path) -> None:
    """Codex writes the assistant's UI copy before its message: a rollout cut inside that
    message left its copy alone, and the rebuild was blocked as "unrecognised speech"."""
    rollout = Rollout()
    rollout.exchange("first question", "first answer")
    rollout.start("exec")
    rollout.user("second question")
    rollout.assistant("the answer being written when the file was cut")
    rollout.lines[-1] = rollout.lines[-1][: len(rollout.lines[-1]) // 2]
    path = rollout.write(tmp_path / "sessions")
    path.write_bytes(path.read_bytes().rstrip(b"\n"))  # no newline after the cut line
    built = candidate.build(path, Config())
    assert built.blocked_reason is not None
    assert built.blocked_reason.startswith(f"partial tail: the last line ({len(rollout.lines)})")
    assert "unrecognised" not in built.blocked_reason


def test_a_legacy_rollout_is_read_from_its_user_and_agent_message_events_once(
    tmp_path: Path,
) -> None:
    rollout = Rollout(legacy=True)
    rollout.exchange("legacy hello", "legacy reply")
    built = candidate.build(rollout.write(tmp_path), Config())
    assert [text for _, _, text in carried(built.source)] == ["legacy hello", "legacy reply"]
    assert built.read.ignored_types["event_msg:user_message"] == 1
    assert all("ordinal" not in line for line in built.items)
    assert "history_mode" not in built.meta


def test_a_pre_envelope_rollout_is_read(tmp_path: Path) -> None:
    lines: list[dict[str, Any]] = [
        {"id": "5973b6c0-94b8-487b-a530-2aeb6098ae0e", "timestamp": "2025-06-01T10:00:00.000Z",
         "instructions": None, "git": {}},
        {"record_type": "state"},
        {"type": "message", "id": None, "role": "user",
         "content": [{"type": "input_text", "text": "old format question"}]},
        {"type": "reasoning", "id": "rs", "summary": [],
         "content": [{"type": "reasoning_text", "text": "plain reasoning"}]},
        {"type": "message", "id": None, "role": "assistant",
         "content": [{"type": "output_text", "text": "old format answer"}]},
    ]
    path = tmp_path / "rollout-2025-06-01T10-00-00-5973b6c0-94b8-487b-a530-2aeb6098ae0e.jsonl"
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    assert detect(path) == "codex"
    built = candidate.build(path, Config())
    assert [u.text for u in built.turns[0].items] == ["old format question", "old format answer"]
    assert built.ledger.noise["reasoning"] > 0


def test_a_rollout_appended_to_while_it_is_read_is_read_as_it_was_when_opened(
    tmp_path: Path,
) -> None:
    """Codex appends while ``plan`` reads: the reader went on into lines written after it
    began (and could meet a half-written line and its rest as two lines)."""
    rollout = Rollout()
    rollout.exchange("keep the blue door", "noted")
    rollout.tool_round(output="x" * 1_100_000)  # a big tool output: the reader reports progress
    rollout.exchange("and the red one", "noted too")
    path = rollout.write(tmp_path)
    size = path.stat().st_size
    later = Rollout(rollout.id)
    later.exchange("typed after the read began", "late answer")
    appended: list[int] = []

    def codex_writes(position: int, total: int) -> None:
        if not appended:
            with open(path, "ab") as out:
                appended.append(out.write(b"\n".join(later.lines[1:]) + b"\n"))

    # the reference path: the fast one reads on to the end between two reports of progress
    stats, _, _, _ = scan(path, TurnBuilder(), codex_writes, fast=False)
    assert appended  # written while the file was read
    assert stats.bytes == size and stats.lines == len(rollout.lines)
    assert stats.speech["typed"] == 2
