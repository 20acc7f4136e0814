"""A Codex rollout line holding bytes that are not UTF-8, with the real CLI: Codex 0.169.0 skips
such a line when it resumes (unlike Claude Code, which reads U+FFFD in their place), so the
Codex reader counts it malformed. The words of a user message on it are not silently lost:
its UI copy is still there, the audit finds no message for it and the rebuild refuses."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tests.conftest import REPO, corpus_dir
from tests.e2e.codex_cli import CodexHome, codex_bin  # noqa: F401 - pytest fixture
from tests.e2e.codex_fake_api import CodexFakeApi

pytestmark = pytest.mark.corpus

SOURCE = (corpus_dir() or Path("/nonexistent")) / "codex-0.169" / (
    "03-multi-turn-exec-resume-then-tui-resume.jsonl")


def test_codex_skips_a_line_with_invalid_bytes_and_the_rebuild_refuses_rather_than_lose_it(
    tmp_path: Path, codex_bin: Path  # noqa: F811
) -> None:
    if not SOURCE.is_file():
        pytest.skip(f"Codex corpus not found at {SOURCE}")
    lines = SOURCE.read_bytes().splitlines()
    thread = orjson.loads(lines[0])["payload"]["id"]
    target = b'"text":"hello there, first prompt"'
    (at,) = [n for n, line in enumerate(lines)
             if target in line and b'"type":"response_item"' in line]
    lines[at] = lines[at].replace(b"hello there", b"hello th\xc3re")
    with CodexFakeApi() as api:
        home = CodexHome.create(tmp_path / "codex-home", codex_bin, api.url)
        folder = home.root / "sessions" / "2026" / "12" / "04"
        folder.mkdir(parents=True)
        source = folder / f"rollout-2026-12-04T10-00-00-{thread}.jsonl"
        source.write_bytes(b"\n".join(lines) + b"\n")
        done = home.resume(thread, "ping")
        assert done.returncode == 0, done.stderr[-2000:]
    sent = [part.get("text", "") for item in api.turns()[0].body["input"]
            if item.get("type") == "message" and item.get("role") == "user"
            for part in item.get("content") or []]
    # the oracle: Codex left the line out; the other prompts of the rollout were sent
    assert "second prompt after resume" in sent
    assert not [text for text in sent if "hello th" in text], sent

    fork = subprocess.run(
        [sys.executable, "-m", "runtime.cli", "fork", "--transcript", str(source), "--into",
         str(tmp_path / "out"), "--json"], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert fork.returncode != 0, fork.stdout
    assert "unrecognised speech: 1 UI cop" in fork.stderr, fork.stderr
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
