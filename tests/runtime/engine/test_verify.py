"""runtime.engine.verify: a written candidate is re-read and proved, check by check (SPEC §3.8)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from runtime.engine import candidate
from runtime.engine.candidate import Build
from runtime.engine.verify import CHECKS, verify_candidate
from runtime.errors import VerificationError
from tests.fixtures.transcripts import Transcript, tool_use
from tests.runtime.helpers import build


def rich(tmp_path: Path) -> Build:
    t = Transcript()
    t.user("typed")
    t.tool_round()
    t.assistant("text answer")
    t.channel("channel message")
    t.assistant(tool_use("mcp__companion__reply", {"text": "channel reply"}))
    t.queued("queued message")
    t.assistant("more")
    t.voice("said on a call")
    t.assistant("heard")
    t.user("open tail")
    return build(tmp_path, t)


def written(tmp_path: Path) -> tuple[Build, Path]:
    built = rich(tmp_path)
    return built, candidate.write(built, tmp_path)


def rewrite(path: Path, change: Callable[[list[dict[str, Any]]], list[dict[str, Any]]]) -> None:
    events = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    path.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in change(events)))
    os.chmod(path, 0o600)


def test_a_written_candidate_passes_every_check_with_a_matching_audit(tmp_path: Path) -> None:
    built, path = written(tmp_path)
    report = verify_candidate(path, built)
    assert report.checks == CHECKS
    assert report.items == len(built.items)
    assert report.audit["channel"] == {"source": 1, "candidate": 1, "left_out_by_rule": 0}
    assert report.audit["channel_reply"]["candidate"] == 1
    assert report.audit["queued"]["candidate"] == 1
    assert report.audit["voice"] == {"source": 1, "candidate": 1, "left_out_by_rule": 0}
    assert report.as_dict()["audit"] == report.audit


VOICE = 6  # the voice line's position in ``rich``'s candidate


@pytest.mark.parametrize(
    ("key", "value", "failure"),
    [("content", "said on a call!", "check 'text_digest' failed .*item 7"),
     ("type", "user", "check 'types' failed .*item 7 is not a voice_call_talk"),
     ("origin", None, "check 'flags' failed .*item 7 is not a voice line"),
     ("isMeta", False, "check 'flags'"),
     ("fold", {"command": {}}, "check 'flags'"),
     ("blocks", [{"type": "text", "text": "said on a call"}], "check 'blocks'"),
     ("threadline", {"kind": "typed"}, "check 'mark'")],
)
def test_a_changed_voice_line_fails_the_check_it_breaks(
    tmp_path: Path, key: str, value: Any, failure: str
) -> None:
    built, path = written(tmp_path)
    assert orjson.loads(path.read_bytes().splitlines()[VOICE])["subtype"] == "voice_call_talk"
    rewrite(path, with_field(VOICE, key, value))
    with pytest.raises(VerificationError, match=failure):
        verify_candidate(path, built)


Events = list[dict[str, Any]]


def with_field(index: int, key: str, value: Any) -> Callable[[Events], Events]:
    """A change that sets ``key`` of event ``index`` to ``value``."""

    def change(events: Events) -> Events:
        events[index][key] = value
        return events

    return change


def changed_character(events: Events) -> Events:
    events[2]["message"]["content"][-1]["text"] += "!"
    return events


def broken_parent_chain(events: Events) -> Events:
    events[3]["parentUuid"] = events[0]["uuid"]
    return events


def added_tool_use(events: Events) -> Events:
    events[1]["message"]["content"].append(tool_use())
    return events


@pytest.mark.parametrize(
    ("change", "failure"),
    [
        pytest.param(changed_character, "check 'text_digest' failed .*item 3",
                     id="a_changed_character_fails_the_text_digest"),
        pytest.param(lambda events: events + [events[-1]], "check 'item_count'",
                     id="an_extra_item_fails_the_item_count"),
        # every item now sits where another belongs: the count is reported, not the item
        pytest.param(lambda events: events[1:], "check 'item_count'",
                     id="a_missing_item_is_reported_as_the_count_before_the_item_it_shifts"),
        pytest.param(with_field(0, "type", "system"), "check 'types'",
                     id="a_foreign_type_fails_the_types_check"),
        pytest.param(with_field(1, "sessionId", "other"), "check 'session_id'",
                     id="another_session_id_fails"),
        pytest.param(broken_parent_chain, "check 'parent_chain'",
                     id="a_broken_parent_chain_fails"),
        pytest.param(added_tool_use, "check 'blocks'.*'tool_use' block",
                     id="a_tool_use_block_fails_the_blocks_check"),
        pytest.param(with_field(0, "timestamp", "yesterday"), "check 'timestamps'",
                     id="a_non_timestamp_fails_the_timestamp_check"),
    ],
)
def test_a_changed_candidate_fails_the_check_it_breaks(
    tmp_path: Path, change: Callable[[Events], Events], failure: str
) -> None:
    built, path = written(tmp_path)
    rewrite(path, change)
    with pytest.raises(VerificationError, match=failure):
        verify_candidate(path, built)


@pytest.mark.parametrize(
    ("key", "value"),
    [("isMeta", None), ("isMeta", True), ("isSidechain", None), ("isSidechain", True)],
)
def test_a_user_item_not_marked_meta_false_and_sidechain_false_fails_the_flags_check(
    tmp_path: Path, key: str, value: bool | None
) -> None:
    built, path = written(tmp_path)

    def edit(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        assert events[0]["type"] == "user"
        if value is None:
            del events[0][key]
        else:
            events[0][key] = value
        return events

    rewrite(path, edit)
    with pytest.raises(VerificationError, match="check 'flags'.*item 1"):
        verify_candidate(path, built)


def test_a_world_readable_candidate_fails_the_mode_check(tmp_path: Path) -> None:
    built, path = written(tmp_path)
    os.chmod(path, 0o644)
    with pytest.raises(VerificationError, match="check 'mode'.*644"):
        verify_candidate(path, built)


def test_a_truncated_file_fails_to_parse(tmp_path: Path) -> None:
    built, path = written(tmp_path)
    path.write_bytes(path.read_bytes()[:-20])
    with pytest.raises(VerificationError, match="check 'parse'"):
        verify_candidate(path, built)


def test_speech_recognised_but_not_in_the_turns_fails_the_recognition_audit(
    tmp_path: Path,
) -> None:
    built, path = written(tmp_path)
    counts = {**built.counts, "source": {**built.counts["source"], "channel": 2}}
    lying = built.replace(counts=counts)
    with pytest.raises(VerificationError, match="check 'recognition_audit'.*channel: source 2"):
        verify_candidate(path, lying)


def test_the_reader_and_the_turns_must_agree_per_kind(tmp_path: Path) -> None:
    built, path = written(tmp_path)
    counts = {**built.counts, "reader": {**built.counts["reader"], "queued": 0}}
    with pytest.raises(VerificationError, match="queued: the reader recognised 0"):
        verify_candidate(path, built.replace(counts=counts))


def test_turns_left_out_by_the_cap_are_accounted_for_in_the_audit(tmp_path: Path) -> None:
    t = Transcript()
    for n in range(4):
        t.user(f"question number {n}")
        t.assistant(f"answer number {n}")
    built = build(tmp_path, t, carry_max_tokens=50, stamp_turns=False)
    report = verify_candidate(candidate.write(built, tmp_path), built)
    dropped = built.stats()["turns"]["dropped_oldest_turns"]
    assert dropped >= 1
    assert report.audit["typed"] == {
        "source": 4,
        "candidate": 4 - dropped,
        "left_out_by_rule": dropped,
    }


def test_a_line_that_is_not_json_is_reported_before_an_earlier_broken_item(
    tmp_path: Path,
) -> None:
    built, path = written(tmp_path)
    rewrite(path, lambda events: [{**events[0], "sessionId": "other"}, *events[1:]])
    path.write_bytes(path.read_bytes() + b"{not json\n")
    with pytest.raises(VerificationError, match=r"check 'parse': line \d+ of .* is not JSON"):
        verify_candidate(path, built)


def test_a_candidate_without_a_final_newline_fails_to_parse_before_anything_else(
    tmp_path: Path,
) -> None:
    built, path = written(tmp_path)
    rewrite(path, lambda events: [{**events[0], "sessionId": "other"}, *events[1:]])
    path.write_bytes(path.read_bytes()[:-1])
    with pytest.raises(VerificationError, match="does not end with a newline"):
        verify_candidate(path, built)
