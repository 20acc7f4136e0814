"""The dirty ledger over time: each line's noise at its minute, summing to the ``dirty`` ledger."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from runtime.config import Config, RebuildConfig
from runtime.engine.dirty_time import minute_of, timed_ledger
from runtime.engine.report import dirty_report
from tests.fixtures.transcripts import Transcript, image, tool_result
from tests.runtime.codex_rollouts import Rollout

CORPUS = Path("/work/shared/corpus")


def summed(minutes: dict[str, dict[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for bucket in minutes.values():
        for name, nbytes in bucket.items():
            out[name] = out.get(name, 0) + nbytes
    return out


def ledger_of(path: Path) -> dict[str, int]:
    dirty = dirty_report(path, Config())
    out = {k: v for k, v in dirty["categories"].items() if v}
    if dirty["malformed_bytes"]:
        out["malformed"] = dirty["malformed_bytes"]
    return out


def test_minute_of_reads_iso_timestamps_in_utc_and_refuses_the_rest() -> None:
    assert minute_of("2026-04-26T21:55:07.123Z") == "2026-04-26T21:55"
    assert minute_of("2026-04-26T23:55:07+02:00") == "2026-04-26T21:55"
    for junk in (None, 17, "", "yesterday", "2026-04-26 21:55", "2026-13-45T99:99:99Z"):
        assert minute_of(junk) is None


def test_each_lines_noise_lands_in_its_own_minute(tmp_path: Path) -> None:
    t = Transcript()
    t.user("look", timestamp="2026-04-26T10:00:01.000Z")
    t.user([tool_result("a" * 5000)], timestamp="2026-04-26T10:00:30.000Z")
    t.user([tool_result("b" * 7000)], timestamp="2026-04-26T12:30:00.000Z")
    t.raw_line(b"{not json")  # malformed: no time of its own, it takes the last one seen
    t.user([{"type": "text", "text": "see"}, image(9000)], timestamp="2026-04-27T08:00:00Z")
    path = t.write(tmp_path / "s.jsonl")
    minutes = timed_ledger(path, RebuildConfig(), codex=False).finish()
    assert list(minutes) == ["2026-04-26T10:00", "2026-04-26T12:30", "2026-04-27T08:00"]
    assert minutes["2026-04-26T10:00"].keys() == {"tool_result"}  # the spoken line: no noise
    assert minutes["2026-04-26T10:00"]["tool_result"] > 5000
    assert minutes["2026-04-26T12:30"]["tool_result"] > 7000
    assert minutes["2026-04-26T12:30"]["malformed"] == len(b"{not json\n")
    assert 9000 < minutes["2026-04-27T08:00"]["image"] < 9200
    assert summed(minutes) == ledger_of(path)


def test_noise_before_the_first_dated_line_joins_the_first_minute(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    undated = {"type": "file-history-snapshot", "snapshot": {"files": "x" * 300}}
    t = Transcript()
    t.raw(undated)
    t.user("hello", timestamp="2026-04-26T10:00:01.000Z")
    t.system("turn_duration", timestamp="2026-04-26T10:07:00.000Z")
    t.write(path)
    minutes = timed_ledger(path, RebuildConfig(), codex=False).finish()
    assert minutes["2026-04-26T10:00"]["other"] == len(orjson.dumps(undated)) + 1
    assert summed(minutes) == ledger_of(path)


def test_a_codex_rollout_is_booked_by_the_codex_classifier(tmp_path: Path) -> None:
    rollout = Rollout()
    rollout.exchange("fix the build", "fixed")
    rollout.tool_round()
    rollout.exchange("and the tests", "green now")
    path = rollout.write(tmp_path)
    timed = timed_ledger(path, RebuildConfig(), codex=True)
    minutes = timed.finish()
    assert summed(minutes) == ledger_of(path)
    assert "harness_message" in timed.ledger.noise  # Codex's own categories, not Claude's
    assert len(minutes) >= 1 and all(m.startswith("2026-12-03T10:") for m in minutes)


def test_every_corpus_file_sums_to_its_dirty_ledger() -> None:
    files = sorted(CORPUS.rglob("*.jsonl")) if CORPUS.is_dir() else []
    if not files:
        pytest.skip(f"no corpus under {CORPUS}")
    from runtime.agents.detect import detect

    for path in files:
        timed = timed_ledger(path, RebuildConfig(), codex=detect(path) == "codex")
        assert summed(timed.finish()) == ledger_of(path), path.name
