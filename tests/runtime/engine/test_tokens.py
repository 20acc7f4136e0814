"""The CJK count of the token estimate: its byte gate never changes the regex's count."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.engine import tokens

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
