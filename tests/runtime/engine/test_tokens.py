"""The token estimate and the carry cap: the CJK count's byte gate never changes the regex's
count; the cap's bisection keeps what the one-by-one walk kept."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.config import Config, config_from_mapping
from runtime.engine import tokens
from runtime.engine.items import SUMMARY_MARK

# characters at and around every edge of the CJK ranges, and common non-CJK ones above ASCII
EDGES = [0x2FFF, 0x3000, 0x303F, 0x3040, 0x30FF, 0x3100, 0x33FF, 0x3400, 0x4DBF, 0x4DC0,
         0x4E00, 0x9FFF, 0xA000, 0xABFF, 0xAC00, 0xD7AF, 0xD7B0, 0xF8FF, 0xF900, 0xFAFF,
         0xFB00, 0xFEFF, 0xFF00, 0xFFEF, 0xFFF0, 0xFFFD, 0x1F600, 0x20000, 0xE9, 0x2731, 0xD800]
CHARS = st.sampled_from([chr(c) for c in EDGES] + list("ab \n"))


@settings(max_examples=1000, deadline=None)
@given(st.lists(CHARS, max_size=20).map("".join))
def test_the_cjk_count_equals_the_regex_count_on_text_around_every_range_edge(text: str) -> None:
    assert tokens.cjk_count(text) == tokens._cjk().subn("", text)[1]


def test_non_ascii_text_without_cjk_counts_none_and_kana_counts_each_character() -> None:
    assert tokens.cjk_count("café ✱ déjà vu \U0001f600") == 0
    assert tokens.cjk_count("日本語のテキスト, ok") == 8


def _one_by_one(keep: list[int], turn_tokens: list[float], summaries: list[Any], fixed: float,
                config: Config) -> tuple[int, float]:
    """The walk apply_cap made before the bisection: drop the oldest turn while over the cap."""
    knobs = config.rebuild
    marks = [tokens.estimate_tokens(s.utterance.text + SUMMARY_MARK, knobs) for s in summaries]

    def total(start: int) -> float:
        first = keep[start] if start < len(keep) else 0
        carried = [i for i, s in enumerate(summaries)
                   if not s.covered or (first > 0 and s.anchor > 0)]
        return fixed + sum(turn_tokens[i] for i in keep[start:]) + sum(marks[i] for i in carried)

    start, estimate = 0, total(0)
    while start < len(keep) - 1 and estimate > knobs.carry_max_tokens:
        start += 1
        estimate = total(start)
    return start, estimate


SUMMARY = st.builds(
    lambda text, anchor, covered: SimpleNamespace(
        utterance=SimpleNamespace(text=text), anchor=anchor, covered=covered),
    st.text(max_size=40), st.integers(0, 5), st.booleans())


@settings(max_examples=500, deadline=None)
@given(
    st.lists(st.floats(0, 500, allow_nan=False) | st.integers(0, 300).map(float), max_size=60),
    st.lists(SUMMARY, max_size=4),
    st.floats(0, 300, allow_nan=False),
    st.integers(1, 8000),
    st.booleans(),
)
def test_the_cap_keeps_the_turns_the_one_by_one_walk_kept(
    turn_tokens: list[float], summaries: list[Any], fixed: float, cap: int, open_tail: bool
) -> None:
    keep = list(range(len(turn_tokens) - (1 if open_tail and turn_tokens else 0)))
    config = config_from_mapping({"rebuild": {"carry_max_tokens": cap}})
    kept, start, chosen, estimate, blocked = tokens.apply_cap(
        keep, turn_tokens, summaries, fixed, config)
    want_start, want_estimate = _one_by_one(keep, turn_tokens, summaries, fixed, config)
    assert (start, estimate) == (want_start, want_estimate)
    assert kept == keep[want_start:]
    assert (blocked is not None) == (want_estimate > cap)
    first = keep[start] if start < len(keep) else 0
    assert chosen == [s for s in summaries if not s.covered or (first > 0 and s.anchor > 0)]


def test_a_cap_that_drops_most_of_a_long_session_keeps_the_newest_turns_that_fit() -> None:
    turn_tokens = [10.0] * 50_000
    config = config_from_mapping({"rebuild": {"carry_max_tokens": 1_000}})
    kept, start, _, estimate, blocked = tokens.apply_cap(
        list(range(50_000)), turn_tokens, [], 0.0, config)
    assert (start, kept[0], len(kept), estimate, blocked) == (49_900, 49_900, 100, 1_000.0, None)
