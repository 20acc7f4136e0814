"""The model's questions to the human (Claude Code's AskUserQuestion tool) and the human's
answers: the questions sit in the tool call's input, the answers in the tool result that
follows (word for word in the line's ``toolUseResult.answers``), and Claude Code sends both
to the model (``tests/e2e/test_question_resume.py`` with the real CLI). A rebuild carries each
question as assistant speech and each answer as typed speech, verbatim; the audit counts
both, so missing them blocks the rebuild. (Corpus ``iansherr…a7da6a22``, Claude Code 2.0.55,
holds three such exchanges.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runtime.engine import candidate
from runtime.engine.classify import Classifier
from runtime.engine.verify import verify_candidate
from tests.conftest import corpus_dir
from tests.fixtures.transcripts import Transcript, text, tool_result, tool_use
from tests.runtime.engine.test_prefilter import _assert_same
from tests.runtime.helpers import build, config, kinds, texts

ASKED = {"questions": [
    {"question": "Which color should the button be?", "header": "Color",
     "options": [{"label": "Red", "description": "warm"}], "multiSelect": False},
    {"question": "Which size?", "header": "Size", "options": []},
]}
ANSWERS = {"Which color should the button be?": "green — like the logo",
           "Which size?": "Red"}  # a typed answer and a chosen option


def exchange(opening: str = "The user answered: ", as_blocks: bool = False,
             result: Any = None) -> Transcript:
    said = ", ".join(f'"{q}"="{a}"' for q, a in ANSWERS.items())
    content: Any = f"{opening}{said}. Read the answers carefully."
    t = Transcript()
    t.user("TYPED-1 ask me")
    t.assistant(tool_use("AskUserQuestion", ASKED, tid="toolu_q"))
    t.user([tool_result([text(content)] if as_blocks else content, tid="toolu_q")],
           toolUseResult={**ASKED, "answers": ANSWERS} if result is None else result)
    t.assistant("noted")
    return t


def test_questions_and_answers_are_carried_verbatim(tmp_path: Path) -> None:
    built = build(tmp_path, exchange())
    assert texts(built) == ["TYPED-1 ask me", "Which color should the button be?",
                            "Which size?", "green — like the logo", "Red", "noted"]
    assert kinds(built) == ["typed", "speech_tool", "speech_tool", "typed", "typed",
                            "assistant_text"]
    assert built.blocked_reason is None
    verify_candidate(candidate.write(built, tmp_path / "out"), built)
    again = candidate.build(candidate.write(built, tmp_path / "gen1"), config())
    assert texts(again) == texts(built)


def test_older_wording_and_a_result_given_as_blocks(tmp_path: Path) -> None:
    for name, t in {"2.0": exchange("User has answered your questions: "),
                    "blocks": exchange(as_blocks=True)}.items():
        (tmp_path / name).mkdir()
        assert texts(build(tmp_path / name, t))[3:5] == list(ANSWERS.values()), name


def test_an_answer_line_without_its_answers_blocks_the_rebuild(tmp_path: Path) -> None:
    """The result says answered but the line lost the answers (a damaged file): the words
    are only in the result's own wording, which is not carried — a human must look."""
    built = build(tmp_path, exchange(result={"questions": ASKED["questions"]}))
    assert built.blocked_reason is not None
    assert "answers to the model's questions at line 3" in built.blocked_reason


def test_missing_them_blocks_the_rebuild(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(Classifier, "_feedback", staticmethod(lambda content, event: []))
    built = build(tmp_path, exchange())
    assert built.blocked_reason is not None and "at line 3" in built.blocked_reason


def test_the_fast_path_books_them_as_the_full_parse_does(tmp_path: Path) -> None:
    for name, t in {"plain": exchange(), "blocks": exchange(as_blocks=True),
                    "2.0": exchange("User has answered your questions: ")}.items():
        t.tool_round(result="plain output")
        _assert_same(t.write(tmp_path / f"{name}.jsonl"))


def test_the_corpus_exchanges_are_carried() -> None:
    folder = corpus_dir()
    if folder is None:
        import pytest

        pytest.skip("corpus folder missing (../shared/corpus)")
    (path,) = folder.glob("iansherr__claude-code-log__a7da6a22*.jsonl")
    built = candidate.build(path, config())
    said = texts(built)
    assert "How should corrupted archives be reported in the manifest?" in said
    assert "Option C: Extra field" in said and "Also .tgz" in said
    assert built.blocked_reason is None


def test_a_plan_shown_for_approval_is_carried_and_a_rejection_reason_too(tmp_path: Path) -> None:
    """ExitPlanMode's ``plan`` (2.0.x) is the model's words to the human, who approves or
    rejects it — with a reason, carried as typed (corpus ``iansherr…cb2e607c``)."""
    plan = "## Plan\n\n1. rename the script\n2. add the entry point"
    t = Transcript()
    t.user("make it installable")
    t.assistant(tool_use("ExitPlanMode", {"plan": plan}, tid="toolu_p"))
    rejected = tool_result("The user doesn't want to proceed with this tool use. The user "
                           "provided the following reason for the rejection:  keep the name",
                           tid="toolu_p")
    rejected["is_error"] = True
    t.user([rejected])
    t.assistant(tool_use("ExitPlanMode", {}, tid="toolu_e"))  # a plan kept elsewhere: nothing
    t.user([tool_result("User has approved your plan.", tid="toolu_e")])
    built = build(tmp_path, t)
    assert texts(built) == ["make it installable", plan, "keep the name"]
    assert kinds(built) == ["typed", "speech_tool", "typed"]
    assert built.blocked_reason is None
    _assert_same(t.write(tmp_path / "again.jsonl"))
