"""The reader's fast path against the plain full parse: same reports, same fork, byte for byte.

The reference is ``scan(fast=False)``: every line through ``orjson.loads`` and
``Classifier.event``, nothing settled early. Both paths run on every real transcript of the
corpus and on fuzzed lines shaped like what the prefilter settles (tool results with images,
thinking, tool calls, sidechains, attachments, system lines) with odd values and broken bytes
mixed in. ``plan --json`` and ``dirty --json`` must be identical and fork candidates
byte-identical, malformed and partial lines included.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.config import Config, RebuildConfig, SpeechTool
from runtime.engine import candidate, prefilter, transcript
from runtime.engine.classify import Classifier
from runtime.engine.dirty import Ledger
from runtime.engine.report import dirty_report, plan_report
from runtime.engine.speech import SpeechRules
from runtime.engine.transcript import ReadStats
from runtime.errors import ThreadlineError
from tests.conftest import corpus_dir
from tests.fixtures.transcripts import Transcript, image, text, thinking, tool_result, tool_use

WORK = Path(tempfile.mkdtemp(prefix="tl-prefilter-", dir=os.environ.get("THREADLINE_TEST_SANDBOX")))
SESSION = "99999999-8888-7777-6666-555555555555"
CONFIG = Config(rebuild=RebuildConfig(speech_tools=(SpeechTool("Speak", "words"),)))


def _outcome(path: Path, config: Config, fast: bool) -> dict[str, Any]:
    """plan and dirty JSON and the fork's bytes (or the error each gave) on one path."""
    saved = transcript.FAST
    transcript.FAST = fast
    try:
        result: dict[str, Any] = {}
        for name, report in (("plan", plan_report), ("dirty", dirty_report)):
            try:
                result[name] = orjson.dumps(report(path, config), option=orjson.OPT_SORT_KEYS)
            except ThreadlineError as exc:
                result[name] = f"{type(exc).__name__}: {exc}"
        try:
            built = candidate.build(path, config, new_session_id=SESSION)
            folder = WORK / ("fast" if fast else "full")
            folder.mkdir(exist_ok=True)
            written = candidate.write(built, folder)
            result["fork"] = written.read_bytes()
            written.unlink()
        except ThreadlineError as exc:
            result["fork"] = f"{type(exc).__name__}: {exc}"
        return result
    finally:
        transcript.FAST = saved


def _assert_same(path: Path, config: Config = CONFIG) -> None:
    full = _outcome(path, config, fast=False)
    fast = _outcome(path, config, fast=True)
    for key in ("plan", "dirty", "fork"):
        assert fast[key] == full[key], f"{key} differs on {path.name}"


def _corpus_files() -> list[Path]:
    found = corpus_dir()
    return sorted(found.rglob("*.jsonl")) if found is not None else []


@pytest.mark.corpus
@pytest.mark.parametrize("path", _corpus_files(), ids=lambda p: p.name)
def test_fast_path_matches_the_full_parse_on_every_corpus_transcript(path: Path) -> None:
    _assert_same(path)


def test_the_corpus_is_there_to_compare_on(corpus: Path) -> None:
    assert len(_corpus_files()) >= 40


def test_fast_path_matches_the_full_parse_on_a_hand_built_session() -> None:
    t = Transcript()
    t.user("<system-reminder>r</system-reminder>\nhello")
    t.tool_round(result=[text("listing"), image(6000)])
    t.assistant(thinking("x" * 5000))
    t.assistant(tool_use("mcp__companion__reply", {"text": "from the reply tool"}))
    t.assistant(tool_use("Speak", {"words": "from a speech tool"}))
    t.assistant(tool_use("Speak", {"words": ""}))
    t.channel("from the phone")
    t.queued("queued")
    t.event("attachment", {"attachment": {"type": "hook_success"}})
    t.assistant("on it", isSidechain=True)
    t.assistant("error", isApiErrorMessage=True)
    t.assistant("synthetic", model="<synthetic>")
    t.tool_round()  # a settled line with a good time stamp, then speech with a bad one
    t.user("late", timestamp="2026-02-31T00:00:00.000Z")
    t.assistant("answer")
    t.compact("summary")
    t.user("after")
    t.raw_line(b'{"type":"user","message":{"content":[{"type":"tool_result"')  # partial
    _assert_same(t.write(WORK / "hand.jsonl", trailing_newline=False))


# -- what the prefilter settles ------------------------------------------------------------


def _take(line: bytes, config: Config = CONFIG) -> tuple[bool, ReadStats, Ledger]:
    stats, ledger = ReadStats(), Ledger()
    classifier = Classifier(SpeechRules.from_config(config.rebuild), stats, ledger, None)
    taken = prefilter.Prefilter(classifier).take(line, len(line))
    return taken, stats, ledger


def _line(t: Transcript) -> bytes:
    return t.lines[-1] + b"\n"


def test_a_tool_result_with_an_image_is_settled_with_the_image_bytes_apart() -> None:
    t = Transcript()
    t.user([tool_result([text("shot"), image(5000)])])
    taken, stats, ledger = _take(_line(t))
    assert taken
    assert ledger.noise["image"] == 5080
    assert ledger.noise["tool_result"] == len(_line(t)) - 5080
    assert ledger.image_seen and stats.ignored_reasons["tool_result"] == 1


def test_thinking_and_ordinary_tool_calls_are_settled_as_noise() -> None:
    t = Transcript()
    t.assistant(thinking("hmm " * 500))
    line = _line(t)
    taken, _, ledger = _take(line)
    assert taken and ledger.noise["thinking"] == len(line)
    t.assistant(tool_use("Bash", {"command": "ls"}))
    taken, _, ledger = _take(_line(t))
    assert taken and ledger.noise["tool_use"] == len(_line(t))


def test_lines_that_may_carry_speech_go_to_the_full_parse() -> None:
    t = Transcript()
    t.user("hello")
    assert not _take(_line(t))[0]
    t.assistant("an answer")
    assert not _take(_line(t))[0]
    t.assistant(tool_use("mcp__companion__reply", {"text": "hi"}))
    assert not _take(_line(t))[0]
    t.assistant(tool_use("Speak", {"words": "said"}))
    assert not _take(_line(t))[0]
    t.queued("later")
    assert not _take(_line(t))[0]
    t.user([image(100), text("look at this")])
    assert not _take(_line(t))[0]
    t.compact("summary")
    assert not _take(t.lines[-2] + b"\n")[0]  # the compaction boundary


def test_a_line_that_is_not_utf8_goes_to_the_full_parse() -> None:
    t = Transcript()
    t.user([tool_result("out \xe9")])
    line = _line(t).replace("\xe9".encode(), b"\xff")
    assert not _take(line)[0]


def test_a_number_beyond_the_double_range_reads_the_same_on_both_paths() -> None:
    """msgspec skips such a number in a field it does not decode and settles the line; the
    full parse reads the line as Claude Code's ``JSON.parse`` does (``Infinity``), so the two
    agree: the tool result is noise, the words beside a wide number are speech."""
    t = Transcript()
    t.user("hello")
    t.tool_round(result="out")
    t.user("the code is 4471", costUSD="WIDE")
    t.assistant("noted", costUSD="WIDE")
    data = (b"\n".join(t.lines) + b"\n").replace(b'"WIDE"', b"1e400").replace(
        b'"tool_use_id"', b'"size":-9E999,"tool_use_id"')
    path = WORK / "wide.jsonl"
    path.write_bytes(data)
    _assert_same(path)
    built = candidate.build(path, CONFIG, new_session_id=SESSION)
    assert [u.text for turn in built.turns for u in turn.items] == [
        "hello", "the code is 4471", "noted"]


# -- fuzzed lines --------------------------------------------------------------------------

ODD: st.SearchStrategy[Any] = (
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=6) | st.just([])
)
SAID = st.text(min_size=1, max_size=8)
STAMP = st.sampled_from(
    ["2026-01-01T00:00:00.000Z", "2026-02-31T00:00:00.000Z", "2026-01-02T03:04:05Z", "x" * 24]
)
BLOCK = st.one_of(
    st.builds(lambda n: image(n), st.integers(0, 300) | st.just(5000)),  # long: the guess
    st.builds(lambda s: text(s), st.text(max_size=20)),
    st.just(thinking()),
    st.just({"type": "redacted_thinking", "data": "xx"}),
    st.builds(
        lambda name, args: tool_use(name, args),
        st.sampled_from(["Bash", "Speak", "mcp__companion__reply", "Read"]),
        st.fixed_dictionaries({"words": SAID | ODD, "text": SAID | ODD}, optional={"x": ODD}),
    ),
    st.builds(
        lambda inner: tool_result(inner),
        st.text(max_size=10)
        | st.lists(
            st.builds(lambda n: image(n), st.integers(0, 50))
            | st.builds(lambda s: text(s), st.text(max_size=10))
            | st.fixed_dictionaries({"type": st.just("image")}, optional={"source": ODD})
            | ODD,
            max_size=3,
        )
        | ODD,
    ),
    st.fixed_dictionaries({"type": ODD}, optional={"source": ODD, "content": ODD, "name": ODD}),
    ODD,
)
SHAPED = st.builds(  # the lines the prefilter settles, as Claude Code writes them, then varied
    lambda kind, blocks, extra: {"type": kind, "message": {"content": blocks}, **extra},
    st.sampled_from(["user", "assistant"]),
    st.lists(BLOCK, min_size=1, max_size=3),
    st.fixed_dictionaries(
        {},
        optional={
            "isSidechain": st.booleans(),
            "isCompactSummary": st.booleans(),
            "isApiErrorMessage": st.booleans(),
            "uuid": st.uuids().map(str),
            "timestamp": STAMP,
        },
    ),
)
EVENT = SHAPED | st.fixed_dictionaries(
    {"type": st.sampled_from(["user", "assistant", "attachment", "system", "progress"]) | ODD},
    optional={
        "isSidechain": st.booleans() | ODD,
        "isApiErrorMessage": st.booleans() | ODD,
        "isCompactSummary": st.booleans(),
        "isMeta": st.booleans(),
        "subtype": st.sampled_from(["compact_boundary", "local_command", "voice_call_talk", "x"])
        | ODD,
        # a voice-call line's fields (system lines of subtype voice_call_talk carry speech)
        "content": SAID | st.just("  ") | ODD,
        "origin": st.fixed_dictionaries({"kind": st.sampled_from(["voice-call", "channel"])
                                         | ODD}) | ODD,
        "fold": st.fixed_dictionaries({}, optional={"command": st.just({}) | ODD}) | ODD,
        "uuid": st.uuids().map(str) | ODD,
        "timestamp": STAMP | ODD,
        "message": st.fixed_dictionaries(
            {},
            optional={
                "content": st.lists(BLOCK, max_size=3) | st.text(max_size=10) | ODD,
                "model": st.just("<synthetic>") | ODD,
            },
        )
        | ODD,
        "attachment": st.fixed_dictionaries(
            {"type": st.sampled_from(["queued_command", "hook"]) | ODD},
            optional={"prompt": ODD, "commandMode": ODD},
        )
        | ODD,
    },
)
BREAK = st.sampled_from([b"", b"", b"", b"\xff", b"\xc0\xaf", b"\x01", b"\\ud800", b"]", b"\n"])


def _lines(events: list[Any], breaks: list[tuple[int, bytes]]) -> Iterator[bytes]:
    for index, event in enumerate(events):
        line = orjson.dumps(event)
        for at, junk in breaks:
            if at % (len(events) or 1) == index:
                cut = at % (len(line) + 1)
                line = line[:cut] + junk + line[cut:]
        yield line + b"\n"


@settings(max_examples=300, deadline=None)
@given(
    st.lists(EVENT, max_size=8),
    st.lists(st.tuples(st.integers(0, 10_000), BREAK), max_size=3),
    st.booleans(),
)
def test_fast_path_matches_the_full_parse_on_fuzzed_lines(
    events: list[Any], breaks: list[tuple[int, bytes]], cut_tail: bool
) -> None:
    data = b"".join(_lines(events, breaks))
    if cut_tail and data:
        data = data[: len(data) * 2 // 3]  # a partial last line
    path = WORK / "fuzz.jsonl"
    path.write_bytes(data)
    _assert_same(path)


def test_progress_is_reported_while_reading_lines_the_prefilter_settles() -> None:
    t = Transcript()
    t.user("look")
    for _ in range(40):  # ≈ 4 MB of tool results, all settled without a full parse
        t.tool_round(result=[text("shot"), image(100_000)])
    path = t.write(WORK / "progress.jsonl")
    seen: list[int] = []
    transcript.scan(path, CONFIG.rebuild, None, lambda done, total: seen.append(done))
    size = path.stat().st_size
    assert seen[-1] == size
    assert len(seen) >= 3 and seen[0] < size and seen == sorted(seen)
