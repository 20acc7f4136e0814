"""A conversation the human rewound (Claude Code's double Esc / ``/rewind``): the new prompt's
``parentUuid`` names an earlier line, and the branch it abandoned stays in the file. Claude
Code's resume walks the parent chain back from the leaf and never sends that branch
(``tests/e2e/test_rewind_resume.py`` with the real CLI), so a rebuild does not carry it either:
the model must not see a retracted prompt as said. Everything else stays carried."""

from __future__ import annotations

from pathlib import Path

from runtime.engine import candidate
from runtime.engine.classify import RECENT_UUIDS
from runtime.engine.report import plan_report
from runtime.engine.verify import verify_candidate
from tests.conftest import corpus_dir
from tests.fixtures.transcripts import Transcript
from tests.runtime.helpers import build, config, texts


def rewound_chat() -> Transcript:
    t = Transcript()
    t.user("TYPED-1 hello")
    t.assistant("ASSIST-1 hi")
    back_to = t.parent
    t.user("TYPED-2 delete the production db")  # retracted: the human rewinds past it
    t.tool_round()
    t.assistant("ASSIST-2 deleting")
    t.system("stop_hook_summary")
    t.parent = back_to
    t.user("TYPED-3 list the tables instead")
    t.assistant("ASSIST-3 here are the tables")
    return t


def test_a_branch_the_human_rewound_past_is_not_carried(tmp_path: Path) -> None:
    built = build(tmp_path, rewound_chat())
    assert texts(built) == ["TYPED-1 hello", "ASSIST-1 hi", "TYPED-3 list the tables instead",
                            "ASSIST-3 here are the tables"]
    assert built.blocked_reason is None  # the audit does not count the muted lines either
    assert built.read.rewound == {"typed": 1, "assistant_text": 1}
    assert built.read.rewound_lines == 5
    assert built.read.speech["typed"] == 2  # the reader's counts hold what is carried
    written = candidate.write(built, tmp_path / "out")
    verify_candidate(written, built)


def test_plan_reports_the_rewound_speech(tmp_path: Path) -> None:
    report = plan_report(rewound_chat().write(tmp_path / "s.jsonl"), config())
    assert report["rewound"] == {"lines": 5, "speech": {"typed": 1, "assistant_text": 1}}
    assert report["speech"]["source"]["typed"] == 2  # what the resumed session holds


def test_nested_rewinds_and_two_rewinds_to_one_line(tmp_path: Path) -> None:
    t = Transcript()
    t.user("KEEP-1")
    t.assistant("KEEP-2")
    first = t.parent
    t.user("GONE-1")
    t.assistant("GONE-2")
    second = t.parent
    t.user("GONE-3")
    t.assistant("GONE-4")
    t.parent = second  # rewound to GONE-2 ...
    t.user("GONE-5")
    t.assistant("GONE-6")
    t.parent = first  # ... then all the way back to KEEP-2
    t.user("KEEP-3")
    t.assistant("KEEP-4")
    t.parent = first  # and once more to the same line
    t.user("KEEP-5")
    t.assistant("KEEP-6")
    built = build(tmp_path, t)
    assert texts(built) == ["KEEP-1", "KEEP-2", "KEEP-5", "KEEP-6"]
    assert built.read.rewound == {"typed": 4, "assistant_text": 4}


def test_a_rewind_far_back_is_found_by_the_prompt_it_replaced(tmp_path: Path) -> None:
    """The parent lies beyond the recent-id window (a long working turn): it is the parent
    of an earlier prompt — the one the rewind replaced — so the branch is still not carried."""
    t = Transcript()
    t.user("KEEP-1")
    t.assistant("KEEP-2")
    back_to = t.parent
    t.user("GONE-1 rebuild everything")
    for _ in range(RECENT_UUIDS // 2 + 50):  # > RECENT_UUIDS lines of work
        t.tool_round()
    t.assistant("GONE-2 rebuilt")
    t.parent = back_to
    t.user("KEEP-3 leave it as it was")
    t.assistant("KEEP-4 left as it was")
    built = build(tmp_path, t)
    assert texts(built) == ["KEEP-1", "KEEP-2", "KEEP-3 leave it as it was",
                            "KEEP-4 left as it was"]
    assert built.read.rewound == {"typed": 1, "assistant_text": 1}
    assert built.read.rewound_lines == 2 * (RECENT_UUIDS // 2 + 50) + 2
    assert built.blocked_reason is None
    verify_candidate(candidate.write(built, tmp_path / "out"), built)


def test_a_prompt_written_twice_is_no_rewind(tmp_path: Path) -> None:
    """A damaged file holds a prompt line twice (same uuid, same parent): Claude Code keeps
    one message per uuid, and the answer hung on it stays on the chain — nothing is muted,
    near or beyond the recent-id window."""
    for rounds in (1, RECENT_UUIDS // 2 + 50):
        t = Transcript()
        t.user("ONE")
        t.assistant("TWO")
        again = len(t.lines)
        t.user("THREE")
        t.assistant("FOUR")
        for _ in range(rounds):
            t.tool_round()
        t.lines.append(t.lines[again])
        (tmp_path / str(rounds)).mkdir()
        built = build(tmp_path / str(rounds), t)
        assert built.read.rewinds == [] and built.read.rewound == {}
        assert texts(built)[:4] == ["ONE", "TWO", "THREE", "FOUR"]


def test_lines_that_are_not_a_rewind_stay_carried(tmp_path: Path) -> None:
    """Parallel tool results name an earlier call as parent, a prompt after sidechain lines
    names the line before them, a parent that is not in the file is no rewind to act on, nor
    is a prompt whose parent skips only the model's lines (no human prompt abandoned)."""
    t = Transcript()
    t.user("ONE")
    call = t.parent
    t.assistant("TWO")
    t.tool_round()
    t.tool_round()
    t.parent = call  # a tool result hung on an earlier line (parallel calls)
    t.user([{"type": "tool_result", "tool_use_id": "x", "content": "r"}])
    t.assistant("THREE")
    main = t.parent
    t.assistant("side work", isSidechain=True)
    t.parent = main
    t.user("FOUR")
    t.assistant("FIVE")
    t.parent = "not-in-this-file"
    t.user("SIX")
    t.assistant("SEVEN")
    asked = t.parent
    t.assistant("EIGHT")
    t.parent = asked  # skips only the model's lines: a rewind always abandons a human prompt
    t.user("NINE")
    built = build(tmp_path, t)
    assert texts(built) == ["ONE", "TWO", "THREE", "FOUR", "FIVE", "SIX", "SEVEN", "EIGHT",
                            "NINE"]
    assert built.read.rewound == {} and built.read.rewinds == []


def test_a_rebuilt_rewound_session_is_linear_and_rebuilds_to_the_same_speech(
    tmp_path: Path,
) -> None:
    first = build(tmp_path, rewound_chat())
    written = candidate.write(first, tmp_path / "gen1")
    second = candidate.build(written, config())
    assert texts(second) == texts(first) and second.read.rewinds == []


def test_the_corpus_transcript_with_a_rewind_drops_its_abandoned_branch() -> None:
    """``iansherr…03eb5929``: the human liked an idea, rewound, and said they did not; the
    three prompts and answers of the first branch are not carried."""
    folder = corpus_dir()
    if folder is None:
        import pytest

        pytest.skip("corpus folder missing (../shared/corpus)")
    (path,) = folder.glob("iansherr__claude-code-log__03eb5929*.jsonl")
    built = candidate.build(path, config())
    said = " ".join(texts(built))
    assert "I actually don't like much this idea" in said
    assert "I very much like this idea" not in said
    assert built.read.rewound["typed"] == 3 and built.blocked_reason is None
