"""A conversation the human rewound, with the real CLI: Claude Code 2.1.328 resumes only the
``parentUuid`` chain that ends at the leaf, so the branch a rewind abandoned is never sent to
the model. The source itself, resumed, is the oracle; the fork, resumed, must send the same
words — and never the retracted ones, which a rebuild used to carry as if said."""

from __future__ import annotations

import json
import shutil

import pytest

from runtime.engine.classify import RECENT_UUIDS
from tests.conftest import corpus_dir
from tests.e2e.fake_api import FakeApi
from tests.e2e.harness import Machine
from tests.fixtures.transcripts import Transcript

pytestmark = [pytest.mark.real_claude]


def _opening() -> tuple[Transcript, str | None]:
    """The kept first exchange; the id of its answer (where the rewinds below go back to)."""
    t = Transcript()
    t.user("KEEP-TYPED-1 hello")
    t.assistant("KEEP-ASSIST-1 hi")
    return t, t.parent


def _resumed_alike(machine: Machine, fake_api: FakeApi, t: Transcript, rewound: int) -> None:
    """The source resumed (the oracle) and its fork resumed send the KEEP- words and no GONE-
    word; ``rewound`` prompts and as many answers are muted."""
    machine.project_dir.mkdir(parents=True)
    source = t.write(machine.project_dir / f"{t.session}.jsonl")
    kept = ["KEEP-TYPED-1", "KEEP-ASSIST-1", "KEEP-TYPED-2", "KEEP-ASSIST-2"]
    before, result, after = machine.resume_both(fake_api, source, t.session)
    for seen in (before, after):
        assert all(k in seen for k in kept) and "GONE-" not in seen, seen[-2000:]
    assert result["stats"]["read"]["rewound_speech"] == {"typed": rewound,
                                                         "assistant_text": rewound}


def test_a_rewound_branch_is_not_sent_after_the_rebuild_as_it_is_not_before(
        resume_machine: Machine, fake_api: FakeApi) -> None:
    t, first = _opening()
    t.user("GONE-TYPED-1 delete the production db")
    t.tool_round()
    t.assistant("GONE-ASSIST-1 deleting")
    second = t.parent
    t.user("GONE-TYPED-2 and the backups")
    t.assistant("GONE-ASSIST-2 the backups too")
    t.parent = second  # a rewind inside the branch ...
    t.user("GONE-TYPED-3 no, keep the backups")
    t.assistant("GONE-ASSIST-3 keeping them")
    t.parent = first  # ... then back before all of it
    t.user("KEEP-TYPED-2 list the tables instead")
    t.assistant("KEEP-ASSIST-2 here are the tables")
    _resumed_alike(resume_machine, fake_api, t, rewound=3)


def test_a_rewind_far_back_and_a_prompt_written_twice_resume_as_the_source_does(
        resume_machine: Machine, fake_api: FakeApi) -> None:
    """Beyond the engine's recent-id window: a rewind to before a long working turn is still
    not carried, and a prompt line written twice (a damaged file) mutes nothing — its answer
    is on the chain Claude Code resumes."""
    t, first = _opening()
    t.user("GONE-TYPED-1 rebuild everything")
    for _ in range(RECENT_UUIDS // 2 + 50):
        t.tool_round()
    t.assistant("GONE-ASSIST-1 rebuilt")
    t.parent = first  # back before the whole long turn
    again = len(t.lines)
    t.user("KEEP-TYPED-2 leave it as it was")
    t.assistant("KEEP-ASSIST-2 left as it was")
    t.tool_round()
    t.lines.append(t.lines[again])  # the prompt line written a second time
    _resumed_alike(resume_machine, fake_api, t, rewound=1)


def test_a_branch_left_by_a_late_api_error_line_is_carried_though_resume_drops_it(
        resume_machine: Machine, fake_api: FakeApi) -> None:
    """Corpus ``samar-58__scout``: an ``api_error`` system line written late (line 62) hangs on
    line 51, and the next prompt hangs on it, so the plain chain walk skips the two answers
    between (lines 52 and 59). Measured: Claude Code 2.1.328 resumes the source without them.
    The rebuild carries them on purpose — the model said them and the human read them; the
    break is the late error line, not a human taking words back (a rewind, above)."""
    folder = corpus_dir()
    if folder is None:
        pytest.skip("corpus folder missing (../shared/corpus)")
    machine = resume_machine
    machine.project_dir.mkdir(parents=True)
    source = folder / "samar-58__scout__claude-session.jsonl"
    with source.open("rb") as handle:
        session = next(json.loads(line)["sessionId"] for line in handle if b'"sessionId"' in line)
    copy = machine.project_dir / f"{session}.jsonl"
    shutil.copyfile(source, copy)
    skipped = ["Everything looks correct. Let me do a qu", "No type errors in the changed files"]
    kept = ["1)the chat ui is dark theme", "Now I have everything I need"]

    seen = machine.resume_sees(fake_api, session)  # the oracle
    assert all(k in seen for k in kept) and not any(s in seen for s in skipped)

    result = machine.fork(copy)
    assert result["stats"]["read"]["rewound_lines"] == 0
    seen = machine.resume_sees(fake_api, result["new_session_id"])
    assert all(k in seen for k in kept + skipped)
