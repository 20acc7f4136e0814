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
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import corpus_dir
from tests.e2e.fake_api import FakeApi, Recorded
from tests.e2e.harness import NO_CONVERSATION, Machine, prepare_machine, read_jsonl

pytestmark = [pytest.mark.real_claude, pytest.mark.corpus]

TL_REBUILD = Path(sys.executable).with_name("tl-rebuild")
INJECTED = ("system-reminder", "local-command-caveat", "local-command-stdout",
            "local-command-stderr", "command-name", "command-message", "command-args",
            "memory-retrieval", "heartbeat", "scheduled-task", "task-notification",
            "ide_selection", "ide_opened_file", "user-prompt-submit-hook")
_TAGS = "|".join(INJECTED)
_PAIRED = re.compile(rf"<({_TAGS})\b[^>]*>.*?</\1>", re.S)
_LONE = re.compile(rf"</?({_TAGS})\b[^>]*>")
# Not speech even when not wrapped in a complete injected block (some corpus lines are cut).
NOT_SPEECH = ("[Request interrupted", "<bash-input>", "<bash-stdout>", "<bash-stderr>",
              "<local-command-", "<command-name>", "<task-notification>")


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


def normalized(text: str) -> str:
    return " ".join(text.split())


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    return [b["text"] for b in content or [] if isinstance(b, dict)
            and b.get("type") == "text" and isinstance(b.get("text"), str)]


def _has_tool_result(content: Any) -> bool:
    return isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content)


def independent_utterances(source: Path) -> list[str]:
    """Speech of ``source`` by a deliberately simple reading of SPEC §3.2 (not the engine's)."""
    found: list[str] = []
    for event in read_jsonl(source):
        if event.get("isSidechain"):
            continue
        message = event.get("message") if isinstance(event.get("message"), dict) else {}
        kind = event.get("type")
        if kind == "attachment":
            attachment = event.get("attachment") or {}
            if (attachment.get("type") == "queued_command"
                    and attachment.get("commandMode", "prompt") == "prompt"
                    and isinstance(attachment.get("prompt"), str)):
                found.append(attachment["prompt"])
        elif kind == "user" and not event.get("isCompactSummary"):
            content = message.get("content")
            if _has_tool_result(content):
                continue
            text = "\n".join(_texts(content))
            channel = (event.get("origin") or {}).get("kind") == "channel" or \
                text.lstrip().startswith("<channel source=")
            if event.get("isMeta") and not channel:
                continue
            if any(marker in text for marker in NOT_SPEECH):
                continue
            human = _LONE.sub("", _PAIRED.sub("", text)).strip()
            if human:
                found.append(human)
        elif kind == "assistant" and not event.get("isApiErrorMessage") \
                and message.get("model") != "<synthetic>":
            found.extend(t for t in _texts(message.get("content")) if t.strip())
    return found


def candidate_texts(candidate: Path) -> list[str]:
    """Every non-blank text block the fork wrote (utterances and turn stamps)."""
    texts: list[str] = []
    for event in read_jsonl(candidate):
        assert event["type"] in ("user", "assistant"), event["type"]
        texts.extend(t for t in _texts(event["message"]["content"]) if t.strip())
    return texts


def fork(machine: Machine, copy: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in machine.env.items() if k != "THREADLINE_CONFIG"}
    return subprocess.run([str(TL_REBUILD), "fork", "--transcript", str(copy), "--into",
                           str(copy.parent), "--json"], env=env, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)


def missing_from(request: Recorded, texts: list[str]) -> list[str]:
    seen = normalized(request.joined())
    return [t for t in texts if normalized(t) not in seen]


@pytest.fixture
def resume_machine(tmp_path: Path, claude_bin: Path, fake_api: FakeApi) -> Machine:
    """A machine without channel or hook: print-mode resumes only."""
    return prepare_machine(tmp_path / "machine", claude_bin, fake_api.url, channel=False,
                           recording_hook=False)


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
