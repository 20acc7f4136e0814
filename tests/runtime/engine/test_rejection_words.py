"""Words a human gave when rejecting a tool call ("No" + Tab to amend in Claude Code 2.1.328's
permission dialog): Claude Code writes them into the call's error result after "To tell you
how to proceed, the user said:" and sends them to the model (``tests/e2e/test_rejection_resume.py``
with the real CLI). They are the human's typed words: carried as typed speech, verbatim, by
the fast path and the full parse alike, and missing them blocks a rebuild (the audit)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runtime.engine import candidate
from runtime.engine.classify import Classifier
from runtime.engine.verify import verify_candidate
from tests.fixtures.transcripts import Transcript, text, tool_result, tool_use
from tests.runtime.engine.test_prefilter import _assert_same
from tests.runtime.helpers import build, config, kinds, texts

REJECTED = ("The user doesn't want to proceed with this tool use. The tool use was rejected "
            "(eg. if it was a file edit, the new_string was NOT written to the file). To tell "
            "you how to proceed, the user said:\n")


def session(content: Any, is_error: Any = True) -> Transcript:
    t = Transcript()
    t.user("please write the file")
    t.assistant(tool_use("Write", {"file_path": "/x/out.txt", "content": "hi"}, tid="toolu_w"))
    block = tool_result(content, tid="toolu_w")
    if is_error is not None:
        block["is_error"] = is_error
    t.user([block], toolUseResult="Error: rejected")
    t.assistant("understood, notes.md then")
    return t


def test_the_words_of_a_rejection_are_carried_as_typed_speech(tmp_path: Path) -> None:
    words = "no — write it to notes.md instead,\n  and keep the header ✓"
    built = build(tmp_path, session(REJECTED + words))
    assert texts(built) == ["please write the file", words, "understood, notes.md then"]
    assert kinds(built) == ["typed", "typed", "assistant_text"]
    assert built.blocked_reason is None
    verify_candidate(candidate.write(built, tmp_path / "out"), built)
    again = candidate.build(candidate.write(built, tmp_path / "gen1"), config())
    assert texts(again) == texts(built)  # a rebuilt session carries them the same way


def test_a_result_given_as_blocks_is_read_as_claude_code_joins_them(tmp_path: Path) -> None:
    built = build(tmp_path, session([text(REJECTED + "use notes.md")]))
    assert texts(built)[1] == "use notes.md"


def test_results_without_a_humans_words_are_not_speech(tmp_path: Path) -> None:
    cases = {
        "no words": REJECTED,
        "blank words": REJECTED + "  \n",
        "not an error": REJECTED + "words",  # the mark in a result that is no rejection
        "a command's output": "grep: The user doesn't want ... the user said:\nwords",
    }
    for name, content in cases.items():
        folder = tmp_path / name.replace(" ", "-")
        folder.mkdir()
        built = build(folder, session(content, is_error=name != "not an error"))
        assert texts(built) == ["please write the file", "understood, notes.md then"], name
        assert built.blocked_reason is None, name


def test_missing_them_blocks_the_rebuild(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(Classifier, "_feedback", staticmethod(lambda content, event: []))
    built = build(tmp_path, session(REJECTED + "use notes.md"))
    assert built.blocked_reason is not None and "tool rejection words at line 3" in \
        built.blocked_reason


def test_the_fast_path_books_them_as_the_full_parse_does(tmp_path: Path) -> None:
    t = session(REJECTED + "use notes.md")
    t.tool_round(result="plain output")
    escaped = tmp_path / "escaped.jsonl"
    session(REJECTED + "caf\u00e9 \u001b[1mbold\u001b[0m").write(escaped)
    # the mark written with \u-escapes is still found (the fast path hands it on)
    raw = escaped.read_bytes().replace(b"To tell you", b"\\u0054o tell you")
    escaped.write_bytes(raw)
    for path in (t.write(tmp_path / "plain.jsonl"), escaped):
        _assert_same(path)
    built = candidate.build(escaped, config())
    assert texts(built)[1] == "caf\u00e9 \u001b[1mbold\u001b[0m"


def test_the_older_wording_of_a_rejection_reason_is_read_too(tmp_path: Path) -> None:
    """Claude Code 2.0.37 wrote the reason after "The user provided the following reason for
    the rejection:" (corpus ``iansherr…cb2e607c``, a rejected plan)."""
    older = ("The user doesn't want to proceed with this tool use. The tool use was rejected "
             "(eg. if it was a file edit, the new_string was NOT written to the file). The user "
             "provided the following reason for the rejection:  keep the file name")
    built = build(tmp_path, session(older))
    assert texts(built)[1] == "keep the file name" and built.blocked_reason is None
