"""Generations in the real CLI 2.1.328: the carry mark is loaded, and the model sees the same text.

A hand-made session holding every speech kind (typed, channel with ``origin``, queued, slash,
assistant text, a channel reply) is forked, the fork forked, and that fork forked again. The
first and the third generation are each resumed with ``claude -p --resume`` against the fake
model: both must be accepted, and the conversation the model sees — every carried text block,
time stamps included, in order — must be the same, each utterance exactly once. No carry mark
or ``origin`` may reach the request; and a copy of the fork without marks and origins makes the
model see exactly the same blocks as the fork itself.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.fake_api import FakeApi, Recorded
from tests.e2e.harness import NO_CONVERSATION, Machine
from tests.e2e.oracle import read_jsonl, texts_of
from tests.fixtures.transcripts import Transcript, slash_text, tool_use

pytestmark = pytest.mark.real_claude

TL_REBUILD = Path(sys.executable).with_name("tl-rebuild")
SPOKEN = ("typed T1-a81f", '<channel source="companion" chat_id="42">\nchannel C1-77e0\n</channel>',
          "reply R1-5d2c", "queued Q1-90b3",
          "answer A1-c4e1", "answer A2-1f0d", "answer A3-e6b2")


def _source(machine: Machine) -> Transcript:
    t = Transcript()
    t.common["cwd"] = str(machine.workdir)
    t.user("typed T1-a81f")
    t.assistant("answer A1-c4e1")
    t.channel("channel C1-77e0")
    t.assistant(tool_use("mcp__companion__reply", {"chat_id": "42", "text": "reply R1-5d2c"}))
    t.tool_round()
    t.queued("queued Q1-90b3")
    t.assistant("answer A2-1f0d")
    t.user(slash_text("/review", "the plan S1-3b7a"))
    t.assistant("answer A3-e6b2")
    return t


def _fork(machine: Machine, transcript: Path) -> Path:
    env = {k: v for k, v in machine.env.items() if k != "THREADLINE_CONFIG"}
    done = subprocess.run([str(TL_REBUILD), "fork", "--transcript", str(transcript), "--json"],
                          env=env, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    return Path(json.loads(done.stdout)["candidate_path"])


def _carried_texts(candidate: Path) -> set[str]:
    return {t for event in read_jsonl(candidate) for t in texts_of(event["message"]["content"])}


def _seen(request: Recorded, carried: set[str]) -> list[tuple[str, str]]:
    """``(role, text)`` of every carried block the model saw, in request order."""
    seen = []
    for message in request.body.get("messages") or []:
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for block in blocks:
            if block.get("type") == "text" and block.get("text") in carried:
                seen.append((message["role"], block["text"]))
    return seen


def _resume(machine: Machine, fake_api: FakeApi, candidate: Path,
            nonce: str | None = None) -> Recorded:
    nonce = nonce or f"next-{uuid.uuid4().hex[:8]}"
    start = fake_api.last_index
    done = machine.run_claude(["-p", "--resume", candidate.stem, nonce], timeout=120)
    assert NO_CONVERSATION not in done.stdout + done.stderr, done.stdout + done.stderr
    assert done.returncode == 0, done.stderr
    first = fake_api.wait_for_text(nonce, after=start, timeout=30)
    assert first.session_id == candidate.stem
    return first


def _unmarked_copy(candidate: Path) -> Path:
    """``candidate`` as a session of its own without the carry marks and origins."""
    session = str(uuid.uuid4())
    lines = []
    for event in read_jsonl(candidate):
        event.pop("threadline", None)
        event.pop("origin", None)
        event["sessionId"] = session
        lines.append(json.dumps(event))
    copy = candidate.with_name(f"{session}.jsonl")
    copy.write_text("\n".join(lines) + "\n")
    return copy


def _all_blocks(request: Recorded, nonce: str) -> list[tuple[str, str]]:
    """``(role, text)`` of every text block of the request but the new prompt's."""
    out = []
    for message in request.body.get("messages") or []:
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        out += [(message["role"], b["text"]) for b in blocks
                if b.get("type") == "text" and nonce not in b["text"]]
    return out


def _foreign_keys(body: dict[str, Any]) -> list[str]:
    """Keys of message content blocks other than what the Messages API defines for text."""
    found = []
    for message in body.get("messages") or []:
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            found += [k for k in block if k not in ("type", "text", "cache_control")]
    return found


def test_third_generation_resumes_and_the_model_sees_what_it_saw_in_the_first(
        resume_machine: Machine, fake_api: FakeApi) -> None:
    if not TL_REBUILD.exists():
        pytest.fail(f"tl-rebuild console script not found next to {sys.executable}")
    machine = resume_machine
    machine.project_dir.mkdir(parents=True)
    source = _source(machine).write(machine.project_dir / f"{uuid.uuid4()}.jsonl")
    first = _fork(machine, source)
    second = _fork(machine, first)
    third = _fork(machine, second)  # all forks before any resume appends to a generation
    carried = _carried_texts(first)
    assert _carried_texts(third) == carried
    channel_item = next(e for e in read_jsonl(third) if "channel C1-77e0" in json.dumps(e))
    assert channel_item["origin"] == {"kind": "channel", "server": "companion"}

    seen_first = _seen(_resume(machine, fake_api, first), carried)
    request_third = _resume(machine, fake_api, third)
    seen_third = _seen(request_third, carried)

    assert seen_third == seen_first
    counts = Counter(text for _, text in seen_third)
    assert all(counts[text] == 1 for text in SPOKEN), counts
    assert counts["/review the plan S1-3b7a"] == 1
    assert counts["[2026-04-26 21:55 UTC]"] == 4  # one stamp per turn, never stacked
    assert _foreign_keys(request_third.body) == []
    assert "threadline" not in json.dumps(request_third.body["messages"])


def test_the_mark_and_origin_change_nothing_the_model_sees(
        resume_machine: Machine, fake_api: FakeApi) -> None:
    machine = resume_machine
    machine.project_dir.mkdir(parents=True)
    source = _source(machine).write(machine.project_dir / f"{uuid.uuid4()}.jsonl")
    marked = _fork(machine, source)
    plain = _unmarked_copy(marked)

    with_mark = _resume(machine, fake_api, marked, "next-same-words")
    without = _resume(machine, fake_api, plain, "next-same-words")

    assert _all_blocks(with_mark, "next-same-words") == _all_blocks(without, "next-same-words")
    assert len(_all_blocks(with_mark, "next-same-words")) >= len(SPOKEN)
