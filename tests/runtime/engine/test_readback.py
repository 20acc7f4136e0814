"""A big fork lets old turns' texts go and reads them back from the source when writing.

The candidate, its manifest and what ``verify_candidate`` proves must be the same bytes as
when every text is held; a source changed under the build is caught by the text digests.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.engine import candidate
from runtime.engine.items import manifest_jsonl
from runtime.engine.verify import verify_candidate
from runtime.errors import ThreadlineError, VerificationError
from tests.fixtures.transcripts import Transcript, slash_text, tool_use
from tests.runtime.helpers import config

SESSION = "99999999-8888-7777-6666-555555555555"


@pytest.fixture
def read_back() -> Iterator[None]:
    """Every fork reads its let-go texts back, whatever the size of the source."""
    saved = candidate.HOLD_CHARS
    candidate.HOLD_CHARS = 0
    try:
        yield
    finally:
        candidate.HOLD_CHARS = saved


def fork(source: Path, into: Path, **rebuild: object) -> tuple[bytes, bytes, candidate.Build]:
    built = candidate.build(source, config(**rebuild), new_session_id=SESSION)
    into.mkdir(exist_ok=True)
    path = candidate.write(built, into)
    verify_candidate(path, built)
    return path.read_bytes(), manifest_jsonl(built.manifest), built


def varied(turns: int) -> Transcript:
    """Turns of every speech shape a line can make more than one of, or make late."""
    t = Transcript()
    for n in range(turns):
        t.user([{"type": "text", "text": f"first part {n} ✱"}, {"type": "text", "text": "more"}])
        t.assistant(f"answer {n}", "and a second block")
        t.channel(f"from the phone {n}")
        t.assistant(tool_use("mcp__companion__reply", {"chat_id": "1", "text": f"sent {n}"}))
        t.user(slash_text("/compact-notes", f"arg {n}"))
        t.assistant("noted")
        t.queued(f"typed while busy {n}")
        t.assistant("ok")
        t.voice(f"said on a call {n} ✱")
        t.assistant("heard")
    return t


@pytest.mark.parametrize("damaged", [False, True], ids=["clean", "bytes not UTF-8"])
def test_a_read_back_fork_writes_the_bytes_a_holding_fork_writes(
    tmp_path: Path, read_back: None, damaged: bool
) -> None:
    """Damaged: read back by its offset, a line with bytes that are not UTF-8 is read as the
    first reading read it (U+FFFD, as Claude Code does)."""
    raw = varied(8).write(tmp_path / "clean.jsonl").read_bytes()
    if damaged:
        raw = raw.replace(b"first part 0", b"first \xc3 part 0").replace(
            b"said on a call 0", b"said \xff on a call 0")
    source = tmp_path / "source.jsonl"
    source.write_bytes(raw)
    candidate.HOLD_CHARS = 1 << 60
    held = fork(source, tmp_path / "held", poison_window_turns=2)
    candidate.HOLD_CHARS = 0
    back = fork(source, tmp_path / "back", poison_window_turns=2)
    assert back[2].turns[0].items[0].text == ""  # the text really was let go
    assert held[2].turns[0].items[0].text == (
        "first \ufffd part 0 ✱" if damaged else "first part 0 ✱")
    assert back[:2] == held[:2]
    assert back[2].stats() == held[2].stats()
    assert ("said \ufffd on a call 0".encode() in back[0]) is damaged


def test_a_source_changed_after_the_build_fails_verification(
    tmp_path: Path, read_back: None
) -> None:
    source = varied(4).write(tmp_path / "source.jsonl")
    built = candidate.build(source, config(poison_window_turns=1), new_session_id=SESSION)
    source.write_bytes(source.read_bytes().replace(b"first part 0", b"first PART 0"))
    path = candidate.write(built, tmp_path)
    with pytest.raises(VerificationError, match="text_digest"):
        verify_candidate(path, built)


@pytest.mark.corpus
def test_read_back_forks_equal_holding_forks_over_the_corpus(
    corpus: Path, tmp_path: Path, read_back: None
) -> None:
    compared = 0
    for path in sorted(corpus.glob("*.jsonl")):
        outcomes = []
        for threshold in (1 << 60, 0):
            candidate.HOLD_CHARS = threshold
            try:
                outcomes.append(fork(path, tmp_path / str(threshold), poison_window_turns=1,
                                     poison_threshold=1000000)[:2])
            except ThreadlineError as exc:
                outcomes.append((type(exc).__name__, str(exc)))
        assert outcomes[0] == outcomes[1], path.name
        compared += isinstance(outcomes[0][0], bytes)
    assert compared >= 20
