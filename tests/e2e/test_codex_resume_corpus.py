"""The real ``codex resume`` loads every rebuilt corpus rollout and sends exactly its speech.

For each rollout of ``../shared/corpus/codex-0.169/`` with speech: ``tl-rebuild fork`` writes the
rebuilt rollout into a temp CODEX_HOME, then Codex 0.169.0 resumes it against a loopback fake
Responses API. The first turn request's ``input`` must hold every carried utterance verbatim,
in order, as user/assistant messages, and no reasoning, function call or output.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.conftest import REPO, corpus_dir
from tests.e2e.codex_cli import CodexHome, codex_bin  # noqa: F401 - pytest fixture
from tests.e2e.codex_fake_api import CodexFakeApi, reply_text

pytestmark = pytest.mark.corpus

FOLDER = (corpus_dir() or Path("/nonexistent")) / "codex-0.169"
FILES = sorted(p.name for p in FOLDER.glob("*.jsonl")) if FOLDER.is_dir() else []
NOT_CONVERSATION = ("reasoning", "function_call", "function_call_output", "custom_tool_call",
                    "custom_tool_call_output", "local_shell_call", "web_search_call",
                    "compaction")


def fork(source: Path, into: Path) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "runtime.cli", "fork", "--transcript", str(source), "--into",
         str(into), "--json"], capture_output=True, text=True, cwd=REPO, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def texts(item: dict[str, Any]) -> list[str]:
    return [part.get("text", "") for part in item.get("content") or []]


def resume_rebuilt(source: Path, tmp_path: Path, binary: Path) -> tuple[list[Any], list[Any]]:
    """Fork ``source``, resume the rebuilt id with "ping"; (carried messages, first input)."""
    with CodexFakeApi() as api:
        home = CodexHome.create(tmp_path / "codex-home", binary, api.url)
        forked = fork(source, home.root / "sessions" / "2026" / "12" / "04")
        rebuilt = Path(forked["candidate_path"]).read_bytes().splitlines()[1:]  # resume appends
        done = home.resume(forked["new_session_id"], "ping")
        assert done.returncode == 0, done.stderr[-2000:]
        assert reply_text(0) in done.stdout
    assert api.errors == []
    turns = api.turns()
    assert turns, "codex sent no turn request"
    assert turns[0].headers.get("session-id") == forked["new_session_id"]
    carried = [orjson.loads(line)["payload"] for line in rebuilt]
    return carried, turns[0].body["input"]


@pytest.mark.parametrize("name", FILES or ["(corpus missing)"])
def test_codex_resume_sends_every_carried_utterance_and_no_tool_noise(
    name: str, tmp_path: Path, codex_bin: Path  # noqa: F811
) -> None:
    if not FILES:
        pytest.skip(f"Codex corpus not found at {FOLDER}")
    carried, sent = resume_rebuilt(FOLDER / name, tmp_path, codex_bin)
    assert carried, f"{name} has no speech"
    assert not [item for item in sent if item.get("type") in NOT_CONVERSATION]
    conversation = [(item.get("role"), texts(item)) for item in sent
                    if item.get("type") == "message" and item.get("role") in ("user", "assistant")]
    wanted = [(item["role"], texts(item)) for item in carried]
    found = iter(conversation)
    for want in wanted:  # in order, each verbatim (harness messages may sit in between)
        assert any(got == want for got in found), f"{want!r} not sent in order"
    assert conversation[-1] == ("user", ["ping"])
    spoken = {text for _, parts in wanted for text in parts}
    extra = [parts for role, parts in conversation[:-1]
             if not set(parts) <= spoken and not parts[0].lstrip().startswith("<")]
    assert extra == [], "the request holds conversation the rebuild did not carry"


def test_a_compacted_source_is_model_visible_again_after_the_rebuild(
    tmp_path: Path, codex_bin: Path  # noqa: F811
) -> None:
    source = FOLDER / "04-auto-compaction.jsonl"
    if not source.is_file():
        pytest.skip(f"Codex corpus sample not found: {source}")
    before_compaction = []
    for line in source.read_bytes().splitlines():
        event = orjson.loads(line)
        if event["type"] == "compacted":
            break
        payload = event.get("payload", {})
        if payload.get("type") == "message" and payload.get("role") == "assistant" and not (
            event.get("metadata", {}).get("compaction_output")
        ):
            before_compaction += texts(payload)
    assert len(before_compaction) == 2
    _, sent = resume_rebuilt(source, tmp_path, codex_bin)
    sent_texts = [text for item in sent for text in texts(item)]
    for text in before_compaction:
        assert text in sent_texts  # Codex itself no longer sends these after `compacted`
    assert not any("SUMMARY-OF-CONVERSATION" in text for text in sent_texts)
    assert not any(text.startswith("Another language model") for text in sent_texts)
