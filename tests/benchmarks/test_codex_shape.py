"""The benchmark's Claude-to-Codex translation is a rollout our Codex reader takes whole.

On the two corpus transcripts the Codex benchmark is built from: ``plan --json`` on the
translation finds every typed prompt and assistant text the Claude reader finds in the source,
its noise share (UI copies set aside, see below) is the source's within 3 points, the fast
path and the full parse agree (plan, dirty, fork), and a resumed copy opens no second thread.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import orjson
import pytest

from runtime.config import Config
from runtime.engine.report import plan_report
from tests.benchmarks.codex_shape import SAMPLE, translate
from tests.conftest import corpus_dir
from tests.runtime.engine import test_codex_prefilter as prefilter_tests

CORPUS = corpus_dir() or Path("/nonexistent")
SOURCES = ["samar-58__scout__claude-session.jsonl",  # tool-heavy: images, tool results
           "bastion-defend__bastion__claude-session.jsonl"]  # speech-heavy
SPEECH = ("typed", "assistant_text")


def _translated(source: Path, folder: Path) -> tuple[Path, list[bytes]]:
    sample = CORPUS / "codex-0.169" / SAMPLE
    if not source.is_file() or not sample.is_file():
        pytest.skip(f"corpus file not found: {source} or {sample}")
    thread = str(uuid.uuid4())
    head, body = translate(source, sample, thread)
    path = folder / f"rollout-2026-12-03T10-00-00-{thread}.jsonl"
    path.write_bytes(b"\n".join(head) + b"\n")
    return path, body


@pytest.mark.corpus
@pytest.mark.parametrize("name", SOURCES)
def test_translation_carries_every_utterance_and_the_noise_share(name: str,
                                                                  tmp_path: Path) -> None:
    source = CORPUS / name
    path, _ = _translated(source, tmp_path)
    claude = plan_report(source, Config(), agent="claude")
    codex = plan_report(path, Config(), agent="codex")
    assert {k: codex["speech"]["source"][k] for k in SPEECH} == {
        k: claude["speech"]["source"][k] for k in SPEECH}
    assert codex["speech"]["source"]["typed"] > 0
    # Codex writes each prompt and reply twice (the item and its UI copy; the copy is noise to
    # the reader), which a Claude transcript does not: the share is compared without them
    dirty = codex["dirty"]
    noise = dirty["noise_bytes"] - dirty["categories"]["ui_copy"]
    share = noise / (noise + dirty["conversation_bytes"])
    assert abs(share - claude["dirty"]["noise_ratio"]) < 0.03


@pytest.mark.corpus
@pytest.mark.parametrize("name", SOURCES)
def test_translation_reads_the_same_on_the_fast_path_and_the_full_parse(name: str,
                                                                        tmp_path: Path) -> None:
    path, body = _translated(CORPUS / name, tmp_path)
    prefilter_tests._assert_same(path)
    with open(path, "ab") as out:  # a resumed copy, as the benchmark repeats it
        out.write(b"\n".join(body) + b"\n")
    prefilter_tests._assert_same(path)


@pytest.mark.corpus
def test_a_resumed_copy_continues_the_ordinals_and_opens_no_new_thread(tmp_path: Path) -> None:
    path, body = _translated(CORPUS / SOURCES[1], tmp_path)
    head = path.read_bytes().splitlines()
    lines = [orjson.loads(line) for line in head + body]
    assert [line["ordinal"] for line in lines] == list(range(len(lines)))
    assert [line["type"] for line in lines].count("session_meta") == 1
    assert [line["type"] for line in lines].count("world_state") == 1
