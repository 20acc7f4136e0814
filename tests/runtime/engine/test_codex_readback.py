"""A big Codex fork lets old turns' texts go and reads them back from the source (the rollout
or an inlined parent) when writing.

The rollout, its manifest and the build's stats must be the same bytes as when every text is
held, on both reading paths; a source changed under the build makes the fork fail.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.cli import main
from runtime.config import Config
from runtime.engine import candidate as claude
from runtime.engine.codex import candidate, rollout
from runtime.engine.codex.verify import verify_rollout
from runtime.engine.items import manifest_jsonl
from runtime.errors import ThreadlineError, TranscriptError, VerificationError
from tests.conftest import corpus_dir
from tests.runtime.codex_rollouts import Rollout

SESSION = "99999999-8888-4777-8666-555555555555"
HOLD_ALL = 1 << 60
FOLDER = (corpus_dir() or Path("/nonexistent")) / "codex-0.169"


@pytest.fixture(params=[True, False], ids=["fast", "full"])
def path_taken(request: pytest.FixtureRequest) -> Iterator[None]:
    """Each test on the prefilter's fast path and on the full parse."""
    saved = rollout.FAST
    rollout.FAST = request.param
    try:
        yield
    finally:
        rollout.FAST = saved


def fork(source: Path, into: Path, hold: int, monkeypatch: pytest.MonkeyPatch,
         **rebuild: object) -> tuple[bytes, bytes, candidate.CodexBuild]:
    monkeypatch.setattr(claude, "HOLD_CHARS", hold)
    config = Config()
    config = config.replace(rebuild=config.rebuild.replace(**rebuild))
    built = candidate.build(source, config, new_session_id=SESSION)
    path = candidate.write(built, into)
    verify_rollout(path, built)
    return path.read_bytes(), manifest_jsonl(built.manifest), built


def family(tmp_path: Path, turns: int = 6) -> Path:
    """A fork of a parent thread: the parent's turns are inlined before its own."""
    parent = Rollout()
    for n in range(turns):
        parent.exchange(f"parent prompt {n} ✱ " * 5, f"parent reply {n} — " * 5)
    cut = parent.ordinal
    parent.write(tmp_path / "sessions" / "2026" / "12" / "02")
    child = Rollout(first_ordinal=cut, history_base={
        "thread_id": parent.id, "end_ordinal_exclusive": cut, "end_byte_offset": 1})
    for n in range(turns):
        child.start("exec")
        # two spoken parts on one line: the read-back needs each one's place
        child.message("user", [{"type": "input_text", "text": f"first part {n}"},
                               {"type": "input_text", "text": f"second part {n} ✱"}],
                      {"turn_id": f"turn-{child.turn}",
                       "content_item_kinds": ["user.text", "user.text"]})
        child.tool_round()
        child.assistant(f"child reply {n}\n" * 3)
        child.end("done")
    child.exchange("queued words", "queued reply", trigger="queue")
    return child.write(tmp_path / "sessions" / "2026" / "12" / "03")


def test_a_read_back_fork_writes_the_bytes_a_holding_fork_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path_taken: None
) -> None:
    source = family(tmp_path)
    held = fork(source, tmp_path / "held", HOLD_ALL, monkeypatch, poison_window_turns=2)
    back = fork(source, tmp_path / "back", 0, monkeypatch, poison_window_turns=2)
    assert held[2].turns[0].items[0].text == "parent prompt 0 ✱ " * 5
    assert back[2].turns[0].items[0].text == ""  # the parent's text really was let go
    assert [u.text for u in back[2].turns[7].items][:2] == ["", ""]  # both parts of a line
    assert back[:2] == held[:2]
    assert back[2].stats() == held[2].stats()
    assert back[2].items[1] == held[2].items[1]  # one line asked for alone is read back too


def test_a_legacy_rollout_reads_its_texts_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path_taken: None
) -> None:
    legacy = Rollout(legacy=True)
    for n in range(5):
        legacy.exchange(f"legacy prompt {n}", f"legacy reply {n}")
    source = legacy.write(tmp_path)
    held = fork(source, tmp_path / "held", HOLD_ALL, monkeypatch, poison_window_turns=1)
    back = fork(source, tmp_path / "back", 0, monkeypatch, poison_window_turns=1)
    assert back[2].turns[0].items[0].text == ""
    assert back[:2] == held[:2]


def test_a_source_changed_between_read_and_write_fails_verification(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = family(tmp_path)
    monkeypatch.setattr(claude, "HOLD_CHARS", 0)
    config = Config()
    config = config.replace(rebuild=config.rebuild.replace(poison_window_turns=1))
    built = candidate.build(source, config, new_session_id=SESSION)
    parent = Path(built.parents[0])
    # the same length: every line stays where it was noted, only a let-go text differs
    parent.write_bytes(parent.read_bytes().replace(b"parent prompt 0", b"parent PROMPT 0"))
    path = candidate.write(built, tmp_path / "out")
    with pytest.raises(VerificationError, match="text_digest"):
        verify_rollout(path, built)


def test_a_source_whose_lines_moved_is_an_error_naming_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = family(tmp_path)
    monkeypatch.setattr(claude, "HOLD_CHARS", 0)
    built = candidate.build(source, Config(), new_session_id=SESSION)
    parent = Path(built.parents[0])
    parent.write_bytes(b"\n" * parent.stat().st_size)
    with pytest.raises(TranscriptError, match="no longer holds its speech") as caught:
        candidate.write(built, tmp_path / "out")
    assert str(parent) in str(caught.value)
    assert not list((tmp_path / "out").glob("*.jsonl"))


def test_fork_fails_rather_than_write_a_changed_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    source = family(tmp_path)
    monkeypatch.setattr(claude, "HOLD_CHARS", 0)
    real = candidate.build

    def build_then_change(*args: object, **kwargs: object) -> candidate.CodexBuild:
        built = real(*args, **kwargs)  # type: ignore[arg-type]
        parent = Path(built.parents[0])  # the oldest turn: past the poison window, let go
        parent.write_bytes(parent.read_bytes().replace(b"parent prompt 0", b"parent PROMPT 0"))
        return built

    monkeypatch.setattr(candidate, "build", build_then_change)
    into = tmp_path / "into"
    code = main(["fork", "--transcript", str(source), "--agent", "codex", "--into", str(into)])
    err = capsys.readouterr().err
    assert code == 1 and "text_digest" in err
    assert not list(into.glob("*.jsonl"))


@pytest.mark.corpus
def test_read_back_forks_equal_holding_forks_over_the_codex_corpus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path_taken: None
) -> None:
    if not FOLDER.is_dir():
        pytest.skip(f"Codex corpus not found at {FOLDER}")
    compared = 0
    for path in sorted(FOLDER.glob("*.jsonl")):
        outcomes: list[object] = []
        for hold in (HOLD_ALL, 0):
            try:
                outcomes.append(fork(path, tmp_path / str(hold), hold, monkeypatch,
                                     poison_window_turns=1, poison_threshold=1000000)[:2])
            except ThreadlineError as exc:
                outcomes.append((type(exc).__name__, str(exc)))
        assert outcomes[0] == outcomes[1], path.name
        compared += isinstance(outcomes[0], tuple) and isinstance(outcomes[0][0], bytes)
    assert compared >= 10
