"""Shared helpers of the engine tests: build a hand-made transcript with some knobs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runtime.config import Config, config_from_mapping
from runtime.engine import candidate
from runtime.engine.candidate import Build
from tests.fixtures.transcripts import Transcript


def config(**rebuild: Any) -> Config:
    return config_from_mapping({"rebuild": rebuild} if rebuild else {})


def build(tmp_path: Path, transcript: Transcript, **rebuild: Any) -> Build:
    path = transcript.write(tmp_path / "source.jsonl")
    return candidate.build(path, config(**rebuild))


def texts(built: Build) -> list[str]:
    """The carried utterance texts in order (without stamp blocks; a voice line's content)."""
    return [item["content"] if item["type"] == "system" else item["message"]["content"][-1]["text"]
            for item in built.items]


def kinds(built: Build) -> list[str]:
    return [entry.kind for entry in built.manifest]


def conversation(turns: int = 3) -> Transcript:
    """``turns`` plain turns: a question, a tool round, an answer."""
    t = Transcript()
    for n in range(turns):
        t.user(f"question {n}")
        t.tool_round()
        t.assistant(f"answer {n}")
    return t
