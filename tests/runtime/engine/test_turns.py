"""runtime.engine.turns: turn grouping (SPEC §3.4) — nothing said is ever dropped for its
position."""

from __future__ import annotations

from pathlib import Path

from tests.fixtures.transcripts import Transcript, thinking
from tests.runtime.helpers import build, texts


def test_consecutive_human_messages_share_one_turn(tmp_path: Path) -> None:
    t = Transcript()
    t.user("first")
    t.user("second")
    t.channel("third, from the phone")
    t.assistant("answer to all three")
    built = build(tmp_path, t)
    assert len(built.turns) == 1
    assert built.turns[0].humans == 3
    assert len(texts(built)) == 4


def test_a_human_message_after_a_reply_opens_a_new_turn(tmp_path: Path) -> None:
    t = Transcript()
    t.user("q1")
    t.assistant("a1")
    t.user("q2")
    t.assistant("a2")
    built = build(tmp_path, t)
    assert [len(turn.items) for turn in built.turns] == [2, 2]


def test_injected_items_tool_traffic_and_thinking_do_not_close_a_turn(tmp_path: Path) -> None:
    t = Transcript()
    t.user("do it")
    t.assistant(thinking())
    t.tool_round()
    t.meta("<system-reminder>todo list changed</system-reminder>")
    t.user("<system-reminder>x</system-reminder>")
    t.assistant("done")
    built = build(tmp_path, t)
    assert len(built.turns) == 1
    assert texts(built) == ["do it", "done"]


def test_assistant_speech_before_the_first_human_line_belongs_to_the_first_turn(
    tmp_path: Path,
) -> None:
    t = Transcript()
    t.assistant("Ready when you are.")
    t.user("hello")
    t.user("are you there?")
    t.assistant("yes")
    built = build(tmp_path, t)
    assert len(built.turns) == 1
    assert built.turns[0].humans == 2
    assert texts(built) == ["Ready when you are.", "hello", "are you there?", "yes"]


def test_a_transcript_of_assistant_speech_only_is_one_carried_turn(tmp_path: Path) -> None:
    t = Transcript()
    t.assistant("monologue")
    built = build(tmp_path, t)
    assert texts(built) == ["monologue"]
    assert built.empty_reason is None


def test_the_open_last_turn_is_carried_by_default(tmp_path: Path) -> None:
    t = Transcript()
    t.user("q1")
    t.assistant("a1")
    t.user("still waiting for an answer")
    built = build(tmp_path, t)
    assert built.turns[-1].open
    assert texts(built)[-1] == "still waiting for an answer"
    assert built.stats()["turns"]["open_tail"] is True


def test_include_open_tail_false_leaves_the_open_turn_out_and_says_so(tmp_path: Path) -> None:
    t = Transcript()
    t.user("q1")
    t.assistant("a1")
    t.user("unanswered")
    built = build(tmp_path, t, include_open_tail=False)
    assert texts(built) == ["q1", "a1"]
    assert built.stats()["turns"]["excluded_open_tail"] == 1
    assert built.counts["not_carried"]["typed"] == 1


def test_no_human_message_is_dropped_for_lack_of_a_reply(tmp_path: Path) -> None:
    t = Transcript()
    t.user("q1")
    t.user("q1 again, louder")
    t.assistant("sorry, a1")
    t.user("q2")
    t.tool_round()
    t.user("q3 while tools ran")
    t.assistant("a2+a3")
    built = build(tmp_path, t)
    assert texts(built) == [
        "q1",
        "q1 again, louder",
        "sorry, a1",
        "q2",
        "q3 while tools ran",
        "a2+a3",
    ]
