"""runtime.engine.tags: each linear scan is exactly its regex, and hostile texts end.

The regexes (speech.injected_pattern, speech._COMMAND_*, speech._SYSTEM_REMINDER,
audit._PAIR, audit._LONE) are the definitions; texts are drawn from the pieces that decide
a match (``<``, ``>``, ``/``, tag names and their prefixes, name characters, ASCII and
Unicode whitespace, line breaks).
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.config import RebuildConfig
from runtime.engine import audit, speech, tags
from runtime.engine.speech import SpeechRules, injected_names, injected_pattern

DEFAULT_TAGS = RebuildConfig().injected_tags
NAMES = ("system-reminder", "system", "command-name", "command-message", "command-args",
         "a", "ab", "a.b", "file", "channel")
PIECES = st.sampled_from([
    "<", ">", "</", "/", "/>", " ", "\t", "\n", "\r", "\r\n", "\u00a0", "\u2003", "\x1c", "x",
    "é", "_", ":", ".", "-", "1", "=", '"', "word ", *NAMES,
    "<system-reminder>", "</system-reminder>", "<command-name>", "</command-name>",
    "<command-args>", "</command-args>", "<command-message>", "</command-message>",
])
TEXTS = st.lists(PIECES, max_size=40).map("".join)
# few pieces, so that pairs repeat and interleave (a remembered closing tag is asked again)
FEW = st.lists(st.sampled_from([
    "<command-name>", "</command-name>", "<command-args>", "</command-args>",
    "<system-reminder>", "</system-reminder>", "<a>", "</a>", "<a b>", "</a >", "x", " ", "\n",
]), max_size=30).map("".join)
TAG_SETS = st.sampled_from([DEFAULT_TAGS, ("a", "ab", "a.b"), ("system", "system-reminder"),
                            ("file",), ()])


@settings(max_examples=600, deadline=None)
@given(st.one_of(TEXTS, FEW), TAG_SETS)
def test_injected_subn_is_the_injected_pattern(text: str, names: tuple[str, ...]) -> None:
    assert tags.injected_subn(text, injected_names(names)) == \
        injected_pattern(names).subn("", text)


@settings(max_examples=600, deadline=None)
@given(st.one_of(TEXTS, FEW), st.sampled_from(["", "\0", " "]))
def test_pairs_and_lone_tags_are_the_audit_regexes(text: str, sep: str) -> None:
    assert audit._drop_pairs(text, sep) == audit._PAIR.sub(sep, text)
    assert tags.lone_sub(text, sep) == audit._LONE.sub(sep, text)


@settings(max_examples=400, deadline=None)
@given(TEXTS)
def test_an_opening_tag_is_the_pair_regexes_opening(text: str) -> None:
    opening = re.compile(r"<([A-Za-z][\w:.-]*)(?:\s[^>]*)?>")
    marks = tags.Marks(text)
    for at in range(len(text)):
        found = opening.match(text, at)
        assert tags.open_tag(text, at, marks) == (
            (found.group(1), found.end()) if found else None)


@settings(max_examples=600, deadline=None)
@given(st.one_of(TEXTS, FEW))
def test_command_and_reminder_blocks_are_their_regexes(text: str) -> None:
    spans = [m.span() for m in speech._SYSTEM_REMINDER.finditer(text)]
    assert list(tags.blocks(text, "<system-reminder>", "</system-reminder>")) == spans
    name = speech._COMMAND_NAME.search(text)
    inner = tags.first_inner(text, "<command-name>", "</command-name>")
    assert (inner.strip() if inner is not None else None) == (name.group(1) if name else None)
    args = speech._COMMAND_ARGS.search(text)
    assert tags.first_inner(text, "<command-args>", "</command-args>") == (
        args.group(1) if args else None)
    assert tags.exact_pairs_sub(text, speech._COMMAND_TAG_NAMES) == \
        speech._COMMAND_TAGS.sub("", text)


def test_a_removed_block_takes_its_line_break_and_the_words_stay() -> None:
    text = "keep this\n<system-reminder>x</system-reminder>\r\nand this <system-reminder/>\n"
    assert tags.injected_subn(text, injected_names(DEFAULT_TAGS)) == (
        "keep this\nand this ", 2)


# Each took seconds to minutes with the regexes alone (4 000 copies, a fifth of these: 0.6-5.6 s,
# growing with the square); the timeout is a hang guard, not a speed target. What each gives
# is the regexes' answer: checked on 50 copies against the regexes themselves.
RULES = SpeechRules.from_config(RebuildConfig())
HOSTILE = {  # name -> (text of n copies, (kept after strip_injected, blocks removed, plain))
    "lone reminders, never closed": (
        lambda n: "<system-reminder> " * n, lambda n: (" " * n, n, "")),
    "reminders without >": (
        lambda n: "<system-reminder a" * n,
        lambda n: ("<system-reminder a" * n, 0, "<system-reminder a" * n)),
    "tags without >": (lambda n: "<a b" * n, lambda n: ("<a b" * n, 0, "<a b" * n)),
    "openings with a cut closing": (
        lambda n: "<system-reminder>" * n + "</system-remind",
        lambda n: ("</system-remind", n, "</system-remind")),
    "distinct names, never closed": (
        lambda n: "".join(f"<t{i}>" for i in range(n)) + "</",
        lambda n: ("".join(f"<t{i}>" for i in range(n)) + "</", 0, "</")),
    "a slash command, then unclosed tags": (
        lambda n: "<command-name>/x</command-name>" + "<command-message>" * n,
        lambda n: ("", n + 1, "")),
}


def _by_regex(text: str) -> tuple[str, int, str]:
    kept, count = injected_pattern(DEFAULT_TAGS).subn("", text)
    return kept, count, audit._LONE.sub("", audit._PAIR.sub("", text)).strip()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_tag_texts_end_with_the_regexes_answer(name: str) -> None:
    make, expect = HOSTILE[name]
    assert _by_regex(make(50)) == expect(50)
    for n in (50, 20_000):
        text = make(n)
        kept, removed = RULES.strip_injected(text)
        count = tags.injected_subn(text, RULES.injected_names)[1]
        assert (kept, count, audit.plain(text)) == expect(n)
        assert removed == len(text) - len(kept)  # ASCII: bytes are characters
        assert RULES.snapshot_block(text) is None
        assert RULES.slash_line(text) == ("/x" if name.startswith("a slash") else None)
