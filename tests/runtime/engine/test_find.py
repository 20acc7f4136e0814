"""runtime.engine.find and the reader's checks built on it: each answers exactly as the plain
search it replaces (``in``, the injected pattern's ``subn``), on texts with few ``<`` (the
tried-one-by-one branch) and with more than ``TRIES`` of them (the plain-search fallback)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.config import RebuildConfig
from runtime.engine import candidate, find, speech
from runtime.engine.find import contains
from runtime.engine.speech import SpeechRules
from tests.fixtures.transcripts import Transcript, slash_text
from tests.runtime.helpers import build, config, kinds, texts

RULES = SpeechRules.from_config(RebuildConfig())
SESSION = "99999999-8888-7777-6666-555555555555"
NEEDLES = ("<command-name>", "<local-command-std", "<channel source=", "<", "a<b")
# pieces a paste is made of: prose (UCS-2 too), stray "<", the tags the reader looks for,
# injected blocks and lone tags, open tags never closed
PIECES = st.sampled_from((
    "plain words ", "─── → · … ", "日本語", "\n", "<", "<<", "a < b", "<file>", "</file>",
    "<command-name>", "<command-name>/model</command-name>", "<local-command-stdout>",
    "<channel source=\"x\">", "<system-reminder>r</system-reminder>\n", "<system-reminder>",
    "</system-reminder >", "<ide_selection a=1>s</ide_selection>", "<heartbeat/>",
    "<user-prompt-submit-hook>", "\u253c", "<sys", "tem-reminder>",
))


def _text(pieces: list[str]) -> str:
    return "".join(pieces)


@settings(max_examples=400, deadline=None)
@given(st.lists(PIECES, max_size=60), st.sampled_from(NEEDLES),
       st.one_of(st.none(), st.integers(-5, 400)))
def test_contains_is_the_plain_substring_test(pieces: list[str], needle: str,
                                             end: int | None) -> None:
    text = _text(pieces)
    assert contains(text, needle, end) == (needle in text[:end])


def test_contains_past_the_tries_falls_back_to_the_plain_search() -> None:
    crowded = "x < y " * (find.TRIES + 5)
    assert contains(crowded + "<command-name>/a</command-name>", "<command-name>")
    assert not contains(crowded + "<command-nam", "<command-name>")
    assert contains("<command-name>" + crowded, "<command-name>")  # found on the first try
    # the bound: a needle crossing ``end`` is not in text[:end]
    assert not contains(crowded + "<channel source=", "<channel source=", len(crowded) + 5)


@settings(max_examples=400, deadline=None)
@given(st.lists(PIECES, max_size=60))
def test_strip_injected_is_the_patterns_own_subn(pieces: list[str]) -> None:
    text = _text(pieces)
    assert RULES.strip_injected(text) == RULES._strip_all(text)


def test_strip_injected_past_the_tries_gives_the_same_as_its_subn() -> None:
    crowded = "if a < b and c < d:\n" * (find.TRIES + 3)
    text = "<system-reminder>r</system-reminder>\n" + crowded + "<heartbeat/> done"
    kept, removed = RULES.strip_injected(text)
    assert (kept, removed) == RULES._strip_all(text)
    assert kept == crowded + " done"
    assert removed == len("<system-reminder>r</system-reminder>\n<heartbeat/>")


def test_a_slash_command_behind_many_stray_brackets_is_still_recognised(tmp_path: Path) -> None:
    crowded = "x < y → z\n" * (find.TRIES + 4)
    t = Transcript()
    # a slash command is its tags alone (words beside them are typed text): the brackets
    # sit in an injected block before them, as older versions prepended reminders
    t.user(f"<system-reminder>{crowded}</system-reminder>\n" + slash_text("/review", "now"))
    t.assistant("reviewing")
    t.user(crowded + "<local-command-stdout>local</local-command-stdout> and words")
    t.assistant("ok")
    built = build(tmp_path, t)
    assert kinds(built) == ["slash", "assistant_text", "typed", "assistant_text"]
    assert texts(built)[0] == "/review now"


def test_tags_spelled_with_json_escapes_are_found_in_the_decoded_text(tmp_path: Path) -> None:
    """The checks read the parsed text, never the line's bytes: ``\\u003c`` is a ``<``."""
    t = Transcript()
    t.user(slash_text("/review", "now"))
    t.assistant("reviewing")
    t.user("<system-reminder>r</system-reminder>\nwords")
    t.assistant("ok")
    path = t.write(tmp_path / "source.jsonl")
    path.write_bytes(path.read_bytes().replace(b"<", b"\\u003c"))
    assert b"<" not in path.read_bytes()
    built = candidate.build(path, config(), new_session_id=SESSION)
    assert [u.kind for turn in built.turns for u in turn.items] == [
        "slash", "assistant_text", "typed", "assistant_text"]
    assert [u.text for turn in built.turns for u in turn.items] == [
        "/review now", "reviewing", "words", "ok"]


def _paste(pieces: list[str], paste_id: str = "f1bc") -> str:
    """A paste as Claude Code 2.1.328 wraps it in a prompt."""
    return f'<pasted_content id="{paste_id}">\n{_text(pieces)}\n</pasted_content id="{paste_id}">'


@settings(max_examples=300, deadline=None)
@given(st.lists(PIECES, max_size=20), st.lists(PIECES, max_size=30),
       st.lists(PIECES, max_size=20), st.lists(PIECES, max_size=10))
def test_nothing_inside_a_paste_is_stripped(before: list[str], pasted: list[str],
                                            after: list[str], second: list[str]) -> None:
    """Outside the pastes the text is stripped as by the pattern's ``subn``; every paste,
    its wrapper tags included, stays as the human pasted it."""
    one, two = _paste(pasted), _paste(second, "09ab")
    text = _text(before) + one + _text(after) + two
    kept = [RULES._strip_all(_text(before)), RULES._strip_all(_text(after))]
    assert RULES.strip_injected(text) == (
        kept[0][0] + one + kept[1][0] + two, kept[0][1] + kept[1][1])


def test_a_paste_is_found_by_its_own_id_and_an_unclosed_one_protects_nothing() -> None:
    reminder = "<system-reminder>r</system-reminder>\n"
    # a closer of another id inside the paste does not end it
    inner = 'a\n</pasted_content id="0000">\n' + reminder + "b"
    text = reminder + _paste([inner]) + " " + reminder
    assert RULES.strip_injected(text)[0] == _paste([inner]) + " "
    unclosed = '<pasted_content id="f1bc">\n' + reminder + "words"
    assert RULES.strip_injected(unclosed) == RULES._strip_all(unclosed)
    assert speech.pastes('<pasted_content id="x y">' + reminder) == []  # not an id


def test_a_pasted_transcript_in_a_typed_prompt_is_carried_whole(tmp_path: Path) -> None:
    pasted = ["log 1\n", "<system-reminder>PASTED</system-reminder>\n",
              "<command-name>/model</command-name>\n", "<local-command-stdout>out",
              "</local-command-stdout>"]
    t = Transcript()
    t.user("<system-reminder>injected by the CLI</system-reminder>\nlook: " + _paste(pasted))
    t.assistant("seen")
    built = build(tmp_path, t)
    assert texts(built) == ["look: " + _paste(pasted), "seen"]
    assert kinds(built) == ["typed", "assistant_text"]
