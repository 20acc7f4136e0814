"""Months of rebuilds: a rebuilt session rebuilds to the same conversation (issue 12 §1).

Every corpus transcript is forked three times in a row: each generation must carry the same
speech as the first (role, kind, byte-identical text, the same one time stamp per turn, the
same item count and per-kind counts), and ``plan`` on a rebuilt session must report the counts
of its source. A hypothesis test appends random live events (typed, channel, queued, reply
tool, slash commands, compaction, tool traffic, injections) to a rebuilt session and checks
that rebuilding it carries exactly what rebuilding the never-rebuilt history would.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime.engine import candidate
from runtime.engine.candidate import Build
from runtime.engine.report import plan_report
from runtime.engine.verify import verify_candidate
from tests.conftest import corpus_dir
from tests.fixtures.transcripts import Transcript, slash_text, thinking, tool_use
from tests.runtime.engine.test_corpus import EXPECTED
from tests.runtime.helpers import config

Speech = list[tuple[str, str, str, str | None]]


def speech(built: Build) -> Speech:
    """``(role, kind, text, stamp)`` of every carried item, in order."""
    return [
        (entry.role, entry.kind, item["content"] if entry.kind == "voice"
         else item["message"]["content"][-1]["text"], entry.stamp)
        for entry, item in zip(built.manifest, built.items, strict=True)
    ]


def rebuild(source: Path, into: Path) -> tuple[Build, Path]:
    built = candidate.build(source, config())
    path = candidate.write(built, into)
    verify_candidate(path, built)
    return built, path


def corpus_files() -> list[Any]:
    found = corpus_dir()
    if found is None:
        return [pytest.param(None, marks=pytest.mark.skip(reason="shared corpus not found"))]
    files = sorted(found.glob("*.jsonl")) + sorted((found / "live-2.1.328").glob("*.jsonl"))
    return [pytest.param(p, id=p.name) for p in files]


@pytest.mark.corpus
@pytest.mark.parametrize("source", corpus_files())
def test_three_generations_of_a_corpus_transcript_carry_what_the_first_carried(
    source: Path, tmp_path: Path
) -> None:
    first = candidate.build(source, config())
    refusal = EXPECTED[str(source.relative_to(source.parent.parent if source.parent.name
                                              == "live-2.1.328" else source.parent))]
    if first.empty_reason is not None:  # a file with nothing to carry has no generations
        assert refusal is not None and refusal in first.empty_reason
        return
    first, path = rebuild(source, tmp_path)
    second, path = rebuild(path, tmp_path)
    third, path = rebuild(path, tmp_path)

    assert speech(second) == speech(first)
    assert speech(third) == speech(first)
    assert third.item_count == first.item_count
    assert third.counts["source"] == first.counts["candidate"]
    assert third.counts["candidate"] == first.counts["candidate"]
    assert plan_report(path, config())["speech"]["source"] == first.counts["candidate"]


def test_an_added_stamp_is_never_read_as_speech_and_never_stacked(tmp_path: Path) -> None:
    t = Transcript()
    t.user("hello")
    t.assistant("hi")
    first, path = rebuild(t.write(tmp_path / "source.jsonl"), tmp_path)
    second, _ = rebuild(path, tmp_path)

    assert [i["message"]["content"] for i in second.items] == [
        [{"type": "text", "text": "[2026-04-26 21:55 UTC]"}, {"type": "text", "text": "hello"}],
        [{"type": "text", "text": "hi"}],
    ]
    assert second.counts["source"]["typed"] == 1


def test_a_text_shaped_like_a_stamp_is_still_speech(tmp_path: Path) -> None:
    t = Transcript()
    t.user("[2026-04-26 21:55 UTC]")
    t.assistant("that is a time")
    first, path = rebuild(t.write(tmp_path / "source.jsonl"), tmp_path)
    second, _ = rebuild(path, tmp_path)

    assert speech(second) == speech(first)
    assert second.counts["source"]["typed"] == 1


def test_an_item_whose_mark_names_a_wrong_kind_is_judged_like_any_event(tmp_path: Path) -> None:
    t = Transcript()
    t.user("hello", threadline={"kind": "assistant_text"})  # not a kind a user item carries
    t.assistant("hi", threadline={"kind": "typed"})
    t.user("odd", threadline={"kind": ["typed"], "lead": 3})
    t.assistant("odder", threadline="queued")
    built = candidate.build(t.write(tmp_path / "source.jsonl"), config())
    assert [(e.role, e.kind) for e in built.manifest] == [
        ("user", "typed"),
        ("assistant", "assistant_text"),
        ("user", "typed"),
        ("assistant", "assistant_text"),
    ]


def test_a_carried_compaction_summary_stays_a_marked_summary(tmp_path: Path) -> None:
    t = Transcript()
    t.compact("summary of turns that are gone", logical_parent="not-in-this-file")
    t.user("after")
    t.assistant("ok")
    first, path = rebuild(t.write(tmp_path / "source.jsonl"), tmp_path)
    second, _ = rebuild(path, tmp_path)

    assert [e.kind for e in second.manifest] == ["compact_summary", "typed", "assistant_text"]
    assert speech(second) == speech(first)


# -- live events appended to a rebuilt session ------------------------------------------------

WORDS = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=12
)


def _typed(t: Transcript, text: str) -> None:
    t.user(text)


def _channel(t: Transcript, text: str) -> None:
    t.channel(text)


def _queued(t: Transcript, text: str) -> None:
    t.queued(text)


def _reply(t: Transcript, text: str) -> None:
    t.assistant(tool_use("mcp__companion__reply", {"chat_id": "42", "text": text}))
    t.tool_round()


def _answer(t: Transcript, text: str) -> None:
    t.assistant(thinking(), text)


def _slash(t: Transcript, text: str) -> None:
    t.user(slash_text("/review", text))
    t.assistant(f"reviewed {text}")


def _local_slash(t: Transcript, text: str) -> None:
    t.user(slash_text("/model"))
    t.user(f"<local-command-stdout>{text}</local-command-stdout>")


def _voice(t: Transcript, text: str) -> None:
    t.voice(text)
    t.assistant(f"heard {text}")


def _voice_blocks(t: Transcript, text: str) -> None:
    t.voice([{"type": "text", "text": text}, {"type": "image", "source": {"data": "AAAA"}},
             {"type": "text", "text": f"then {text}"}])
    t.assistant(f"heard both {text}")


def _noise(t: Transcript, text: str) -> None:
    t.tool_round(result=text)
    t.meta(f"<system-reminder>{text}</system-reminder>")


def _compaction(t: Transcript, text: str) -> None:
    t.compact(f"summary: {text}")


LIVE = [_typed, _channel, _queued, _reply, _answer, _slash, _local_slash, _voice,
        _voice_blocks, _noise, _compaction]
EVENTS = st.lists(st.tuples(st.sampled_from(LIVE), WORDS), min_size=1, max_size=12)


def _continue(path: Path, base: Transcript) -> Transcript:
    """A transcript that goes on from the rebuilt session at ``path``, at the clock of ``base``."""
    lines = path.read_bytes().splitlines()
    t = Transcript(session=orjson.loads(lines[-1])["sessionId"])
    t.lines = list(lines)
    t.parent = orjson.loads(lines[-1])["uuid"]
    t.tick = base.tick
    return t


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(history=EVENTS, live=EVENTS)
def test_a_rebuilt_session_that_went_on_living_rebuilds_to_every_utterance_once(
    tmp_path_factory: pytest.TempPathFactory, history: list[Any], live: list[Any]
) -> None:
    folder = tmp_path_factory.mktemp("gen")
    never = Transcript()
    for add, text in [*history, *live]:
        add(never, text)
    base = Transcript()
    for add, text in history:
        add(base, text)
    base_path = base.write(folder / "base.jsonl")
    if candidate.build(base_path, config()).empty_reason is not None:
        return  # nothing carried: no rebuilt session to go on living
    _, first = rebuild(base_path, folder)
    lived = _continue(first, base)
    for add, text in live:
        add(lived, text)
    expected = candidate.build(never.write(folder / "never.jsonl"), config())

    second, path = rebuild(lived.write(folder / "lived.jsonl"), folder)
    third, _ = rebuild(path, folder)

    assert speech(second) == speech(expected)
    assert second.counts["candidate"] == expected.counts["candidate"]
    assert speech(third) == speech(second)
