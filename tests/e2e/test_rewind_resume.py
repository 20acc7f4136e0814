"""A conversation the human rewound, with the real CLI: Claude Code 2.1.328 resumes only the
``parentUuid`` chain that ends at the leaf, so the branch a rewind abandoned is never sent to
the model. The source itself, resumed, is the oracle; the fork, resumed, must send the same
words — and never the retracted ones, which a rebuild used to carry as if said."""

from __future__ import annotations

import pytest

from runtime.engine.classify import RECENT_UUIDS
from tests.e2e.fake_api import FakeApi
from tests.e2e.harness import Machine
from tests.fixtures.transcripts import Transcript

pytestmark = [pytest.mark.real_claude]


def test_a_rewound_branch_is_not_sent_after_the_rebuild_as_it_is_not_before(
        resume_machine: Machine, fake_api: FakeApi) -> None:
    machine = resume_machine
    machine.project_dir.mkdir(parents=True)
    t = Transcript()
    t.user("KEEP-TYPED-1 hello")
    t.assistant("KEEP-ASSIST-1 hi")
    first = t.parent
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
    source = t.write(machine.project_dir / f"{t.session}.jsonl")
    kept = ["KEEP-TYPED-1", "KEEP-ASSIST-1", "KEEP-TYPED-2", "KEEP-ASSIST-2"]

    seen = machine.resume_sees(fake_api, t.session)  # the oracle
    assert all(k in seen for k in kept) and "GONE-" not in seen, seen[-2000:]

    result = machine.fork(source)
    assert result["stats"]["read"]["rewound_speech"] == {"typed": 3, "assistant_text": 3}
    seen = machine.resume_sees(fake_api, result["new_session_id"])
    assert all(k in seen for k in kept) and "GONE-" not in seen, seen[-2000:]


def test_a_rewind_far_back_and_a_prompt_written_twice_resume_as_the_source_does(
        resume_machine: Machine, fake_api: FakeApi) -> None:
    """Beyond the engine's recent-id window: a rewind to before a long working turn is still
    not carried, and a prompt line written twice (a damaged file) mutes nothing — its answer
    is on the chain Claude Code resumes."""
    machine = resume_machine
    machine.project_dir.mkdir(parents=True)
    t = Transcript()
    t.user("KEEP-TYPED-1 hello")
    t.assistant("KEEP-ASSIST-1 hi")
    first = t.parent
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
    source = t.write(machine.project_dir / f"{t.session}.jsonl")
    kept = ["KEEP-TYPED-1", "KEEP-ASSIST-1", "KEEP-TYPED-2", "KEEP-ASSIST-2"]

    seen = machine.resume_sees(fake_api, t.session)  # the oracle
    assert all(k in seen for k in kept) and "GONE-" not in seen, seen[-2000:]

    result = machine.fork(source)
    assert result["stats"]["read"]["rewound_speech"] == {"typed": 1, "assistant_text": 1}
    seen = machine.resume_sees(fake_api, result["new_session_id"])
    assert all(k in seen for k in kept) and "GONE-" not in seen, seen[-2000:]
