"""Scenario 6: every real transcript with speech, forked, resumes in the real CLI 2.1.328.

For each corpus file: copy it into a temp project folder, ``tl-rebuild fork --into`` that folder,
then ``claude -p --resume <new id> "<nonce>"`` in the matching workdir against the fake model.
The resume must be accepted (no "No conversation found") and the first model request of the
resumed session must carry (a) every text the candidate file holds and (b) every utterance a
simple, independent extraction finds in the source — typed prompts, channel messages, queued
prompts, assistant text. Files without speech must be refused by ``fork`` ("nothing to carry").
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import corpus_dir
from tests.e2e.fake_api import FakeApi, Recorded
from tests.e2e.harness import NO_CONVERSATION, Machine
from tests.e2e.oracle import independent_utterances, normalized, read_jsonl, texts_of

pytestmark = [pytest.mark.real_claude, pytest.mark.corpus]

TL_REBUILD = Path(sys.executable).with_name("tl-rebuild")
# Utterances the plain chain walk leaves out, per corpus file (every other file: none). A guard
# on the oracle itself: a chain it walked wrong would quietly expect less. Measured with the
# real CLI (tests/e2e/test_rewind_resume.py): 03eb5929's rewound branch (Claude Code never
# sends it; the rebuild does not carry it) and samar-58's two answers left off the chain by a
# late api_error line (Claude Code does not send them; the rebuild carries them on purpose).
OFF_CHAIN_SPEECH = {
    "iansherr__claude-code-log__03eb5929-52b3-4b13-ada3-b93ae35806b8.jsonl": 6,
    "samar-58__scout__claude-session.jsonl": 2,
}


def corpus_files() -> list[Path]:
    found = corpus_dir()
    if found is None:
        return []
    return sorted(found.glob("*.jsonl")) + sorted((found / "live-2.1.328").glob("*.jsonl"))


def _params() -> list[Any]:
    files = corpus_files()
    if not files:
        return [pytest.param(None, marks=pytest.mark.skip(
            reason="shared corpus not found beside the checkout (../shared/corpus)"))]
    return [pytest.param(p, id=p.name) for p in files]


def candidate_texts(candidate: Path) -> list[str]:
    """Every non-blank text block the fork wrote (utterances and turn stamps)."""
    texts: list[str] = []
    for event in read_jsonl(candidate):
        assert event["type"] in ("user", "assistant"), event["type"]
        texts.extend(t for t in texts_of(event["message"]["content"]) if t.strip())
    return texts


def fork(machine: Machine, copy: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in machine.env.items() if k != "THREADLINE_CONFIG"}
    return subprocess.run([str(TL_REBUILD), "fork", "--transcript", str(copy), "--into",
                           str(copy.parent), "--json"], env=env, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)


def missing_from(request: Recorded, texts: list[str]) -> list[str]:
    seen = normalized(request.joined())
    return [t for t in texts if normalized(t) not in seen]


@pytest.mark.parametrize("source", _params())
def test_forked_corpus_transcript_resumes_and_first_request_carries_every_utterance(
        source: Path, resume_machine: Machine, fake_api: FakeApi) -> None:
    if not TL_REBUILD.exists():
        pytest.fail(f"tl-rebuild console script not found next to {sys.executable}")
    machine = resume_machine
    machine.project_dir.mkdir(parents=True)
    copy = machine.project_dir / source.name
    shutil.copyfile(source, copy)
    expected = independent_utterances(source)
    whole = independent_utterances(source, whole=True)
    assert len(whole) - len(expected) == OFF_CHAIN_SPEECH.get(source.name, 0)

    forked = fork(machine, copy)

    if not expected:
        assert forked.returncode == 1, forked.stdout
        assert "nothing to carry" in forked.stderr
        return
    assert forked.returncode == 0, forked.stderr
    result = json.loads(forked.stdout)
    new_id, candidate = result["new_session_id"], Path(result["candidate_path"])
    assert candidate.parent == machine.project_dir
    carried = candidate_texts(candidate)
    nonce = f"next-{uuid.uuid4().hex[:8]}"

    done = machine.run_claude(["-p", "--resume", new_id, nonce], timeout=120)

    assert NO_CONVERSATION not in done.stdout + done.stderr, done.stdout + done.stderr
    assert done.returncode == 0, done.stderr
    first = fake_api.wait_for_text(nonce, timeout=30)
    assert first.session_id == new_id
    assert missing_from(first, carried) == []
    assert missing_from(first, expected) == []
    assert copy.read_bytes() == source.read_bytes()
