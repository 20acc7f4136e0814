"""runtime.engine.items: candidate items in Claude Code's session format, and their manifest."""

from __future__ import annotations

import uuid
from pathlib import Path

import orjson
import pytest

from runtime.engine import candidate
from runtime.engine.items import NAMESPACE
from tests.fixtures.transcripts import Transcript, tool_use
from tests.runtime.helpers import build, config, conversation


def test_item_ids_are_uuid5_of_session_position_and_source_uuid(tmp_path: Path) -> None:
    path = conversation().write(tmp_path / "s.jsonl")
    one = candidate.build(path, config(), new_session_id="aaaaaaaa-0000-4000-8000-000000000000")
    two = candidate.build(path, config(), new_session_id="aaaaaaaa-0000-4000-8000-000000000000")
    assert [i["uuid"] for i in one.items] == [i["uuid"] for i in two.items]
    first = one.manifest[0]
    expected = uuid.uuid5(NAMESPACE, f"{one.new_session_id}:0:{first.source_uuid}")
    assert first.item_id == str(expected)


def test_parent_uuids_chain_the_items_linearly(tmp_path: Path) -> None:
    built = build(tmp_path, conversation())
    assert built.items[0]["parentUuid"] is None
    for before, after in zip(built.items, built.items[1:], strict=False):
        assert after["parentUuid"] == before["uuid"]


def test_the_turn_stamp_is_a_separate_leading_block_on_the_first_human_item(
    tmp_path: Path,
) -> None:
    t = Transcript()
    t.user("one")
    t.user("two")
    t.assistant("reply")
    built = build(tmp_path, t)
    first, second, reply = (item["message"]["content"] for item in built.items)
    assert first == [
        {"type": "text", "text": "[2026-04-26 21:55 UTC]"},
        {"type": "text", "text": "one"},
    ]
    assert second == [{"type": "text", "text": "two"}]
    assert reply == [{"type": "text", "text": "reply"}]
    assert built.manifest[0].stamp == "[2026-04-26 21:55 UTC]"


def test_stamp_turns_false_carries_the_utterance_alone(tmp_path: Path) -> None:
    built = build(tmp_path, conversation(1), stamp_turns=False)
    assert built.items[0]["message"]["content"] == [{"type": "text", "text": "question 0"}]


def test_source_fields_and_channel_origin_are_kept_runtime_fields_dropped(tmp_path: Path) -> None:
    t = Transcript()
    t.common.update(cwd="/srv/wo.rk", version="2.1.300", gitBranch="feature/x", userType="ext")
    t.channel("ping")
    t.assistant("pong")
    built = build(tmp_path, t)
    human, reply = built.items
    source = [orjson.loads(line) for line in t.lines if b'"type":"user"' in line][0]
    assert human["timestamp"] == source["timestamp"]
    assert (human["cwd"], human["version"], human["gitBranch"], human["userType"]) == (
        "/srv/wo.rk",
        "2.1.300",
        "feature/x",
        "ext",
    )
    assert human["isMeta"] is False and human["isSidechain"] is False
    assert human["origin"] == source["origin"] == {"kind": "channel", "server": "companion"}
    assert "toolUseResult" not in human
    assert "requestId" not in reply
    assert reply["message"]["usage"] == {"input_tokens": 0, "output_tokens": 0}
    assert reply["message"]["content"] == [{"type": "text", "text": "pong"}]


def test_an_invalid_timestamp_is_replaced_by_the_nearest_earlier_valid_one(tmp_path: Path) -> None:
    t = Transcript()
    t.user("before")
    good = orjson.loads(t.lines[-1])["timestamp"]
    t.system("turn_duration", timestamp="not-a-time")
    t.assistant("bad time", timestamp="yesterday-ish")
    t.user("month 13", timestamp="2026-13-01T00:00:00.000Z")
    built = build(tmp_path, t)
    assert [i["timestamp"] for i in built.items] == [good, good, good]
    assert built.stats()["timestamps_replaced"] == 2


def test_an_impossible_date_of_the_right_shape_takes_the_latest_valid_earlier_time(
    tmp_path: Path,
) -> None:
    t = Transcript()
    t.user("before")
    t.system("turn_duration")  # not speech, but its valid time is the nearest earlier one
    nearest = orjson.loads(t.lines[-1])["timestamp"]
    t.user("feb 30", timestamp="2026-02-30T10:00:00.000Z")
    built = build(tmp_path, t)
    assert built.items[-1]["timestamp"] == nearest
    assert built.stats()["timestamps_replaced"] == 1


def test_an_invalid_first_timestamp_takes_the_next_valid_one(tmp_path: Path) -> None:
    t = Transcript()
    t.user("no time yet", timestamp=None)
    t.assistant("timed")
    later = orjson.loads(t.lines[-1])["timestamp"]
    built = build(tmp_path, t)
    assert built.items[0]["timestamp"] == later


def test_a_missing_version_is_filled(tmp_path: Path) -> None:
    t = Transcript()
    t.user("hello", version=None)
    t.assistant("hi", version="")
    built = build(tmp_path, t)
    assert all(isinstance(i["version"], str) and i["version"] for i in built.items)
    assert built.stats()["versions_filled"] == 2


def test_manifest_records_source_uuid_timestamp_and_equal_digests(tmp_path: Path) -> None:
    t = Transcript()
    uid = t.user("hello")
    t.assistant(tool_use("mcp__companion__reply", {"text": "hi there"}))
    built = build(tmp_path, t)
    first, second = built.manifest
    assert first.source_uuid == uid and first.role == "user" and first.turn == 0
    assert second.kind == "channel_reply"
    for entry in built.manifest:
        assert entry.source_sha256 == entry.candidate_sha256
        assert entry.as_dict()["item_id"] == entry.item_id


def test_an_impossible_date_is_never_used_as_a_replacement(tmp_path: Path) -> None:
    t = Transcript()
    t.system("turn_duration", timestamp="2026-02-30T10:00:00.000Z")  # right shape, no such day
    t.user("no time", timestamp="soon")
    t.assistant("timed")
    later = orjson.loads(t.lines[-1])["timestamp"]
    built = build(tmp_path, t)
    assert built.items[0]["timestamp"] == later


def test_a_message_id_is_shared_only_by_adjacent_parts(tmp_path: Path) -> None:
    t = Transcript()
    t.user("q")
    t.assistant("part one", message_id="msg_1")
    t.assistant("part two", message_id="msg_1")
    t.queued("typed in between")
    t.assistant("part three", message_id="msg_1")
    built = build(tmp_path, t)
    ids = [item["message"].get("id") for item in built.items if item["type"] == "assistant"]
    assert ids[:2] == ["msg_1", "msg_1"]
    assert ids[2] != "msg_1" and ids[2].startswith("msg_tl_")


def test_with_no_earlier_valid_timestamp_the_rule_and_the_count_are_stated(
    tmp_path: Path,
) -> None:
    t = Transcript()
    t.user("no time yet", timestamp=None)
    t.assistant("still none", timestamp="soon")
    t.user("timed")
    t.assistant("bad again", timestamp="2026-02-30T10:00:00.000Z")
    built = build(tmp_path, t)
    fallbacks = built.stats()["timestamp_fallbacks"]
    assert (fallbacks["replaced"], fallbacks["earlier"], fallbacks["later"], fallbacks["epoch"]) \
        == (3, 1, 2, 0)
    assert "with none earlier, the first valid one of the carried items" in fallbacks["rule"]


def test_with_no_valid_timestamp_at_all_every_item_takes_the_epoch_and_says_so(
    tmp_path: Path,
) -> None:
    t = Transcript()
    t.user("undated", timestamp="never")
    t.assistant("undated too", timestamp=None)
    built = build(tmp_path, t)
    assert [i["timestamp"] for i in built.items] == ["1970-01-01T00:00:00.000Z"] * 2
    fallbacks = built.stats()["timestamp_fallbacks"]
    assert (fallbacks["replaced"], fallbacks["epoch"]) == (2, 2)
    assert fallbacks["rule"].endswith("with none at all, 1970-01-01T00:00:00.000Z")


def test_plan_prints_the_timestamp_rule_when_a_timestamp_was_replaced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from runtime.cli import main

    t = Transcript()
    t.user("undated", timestamp="never")
    t.assistant("ok")
    assert main(["plan", "--transcript", str(t.write(tmp_path / "s.jsonl"))]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if "timestamps replaced" in x)
    assert "1 (earlier=0, later=1, epoch=0; rule: an invalid timestamp takes" in line
