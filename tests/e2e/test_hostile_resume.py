"""Issue 11 §4a with the real CLI: a transcript line holding a lone UTF-16 surrogate escape
(what JavaScript writes for a split emoji) is forked with its words, and the candidate is a
file that claude 2.1.328 resumes and sends to the model."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from tests.e2e.fake_api import FakeApi
from tests.e2e.harness import NO_CONVERSATION, Machine
from tests.e2e.oracle import normalized
from tests.fixtures.transcripts import Transcript

pytestmark = [pytest.mark.real_claude]


def test_a_lone_surrogate_line_is_forked_with_its_words_and_resumes_in_the_real_cli(
        resume_machine: Machine, fake_api: FakeApi) -> None:
    machine = resume_machine
    machine.project_dir.mkdir(parents=True)
    t = Transcript()
    t.user("PLACEHOLDER")
    t.assistant("noted the database")
    raw = b"\n".join(t.lines).replace(b"PLACEHOLDER", b"we chose postgres \\ud83d") + b"\n"
    source = machine.project_dir / f"{t.session}.jsonl"
    source.write_bytes(raw)

    result = machine.fork(source)

    assert "we chose postgres" in Path(result["candidate_path"]).read_text("utf-8")
    nonce = f"next-{uuid.uuid4().hex[:8]}"
    done = machine.run_claude(["-p", "--resume", result["new_session_id"], nonce], timeout=120)
    assert NO_CONVERSATION not in done.stdout + done.stderr, done.stdout + done.stderr
    assert done.returncode == 0, done.stderr
    first = fake_api.wait_for_text(nonce, timeout=30)
    assert first.session_id == result["new_session_id"]
    seen = normalized(first.joined())
    assert normalized("we chose postgres") in seen and normalized("noted the database") in seen
