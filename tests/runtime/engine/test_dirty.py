"""runtime.engine.dirty and the reader's byte attribution: the ledger of runtime noise (SPEC
§3.9)."""

from __future__ import annotations

from pathlib import Path

from runtime.engine.report import dirty_report
from tests.fixtures.transcripts import Transcript, image, text, thinking, tool_use
from tests.runtime.helpers import build, config


def noisy() -> Transcript:
    t = Transcript()
    t.user("<system-reminder>" + "r" * 500 + "</system-reminder>\nplease look")
    t.assistant(thinking("t" * 2000))
    t.tool_round(result="x" * 5000)
    t.meta("skill body " * 300)
    t.user("sub", isSidechain=True)
    t.system("turn_duration")
    t.event("attachment", {"attachment": {"type": "skill_listing", "content": "s" * 700}})
    t.raw({"type": "file-history-snapshot", "snapshot": {"files": "f" * 400}})
    t.channel("hi from the phone")
    t.assistant(tool_use("mcp__companion__reply", {"text": "hello back"}))
    t.assistant("plain answer")
    return t


def test_every_byte_of_the_file_is_attributed_once(tmp_path: Path) -> None:
    t = noisy()
    t.raw_line(b"{broken")
    built = build(tmp_path, t)
    dirty = built.ledger.report(10**9, True)
    size = (tmp_path / "source.jsonl").stat().st_size
    assert dirty["noise_bytes"] + dirty["conversation_bytes"] == size


def test_noise_lands_in_its_category(tmp_path: Path) -> None:
    categories = build(tmp_path, noisy()).ledger.report(10**9, True)["categories"]
    assert categories["tool_result"] > 5000  # the result and its toolUseResult copy
    assert categories["thinking"] > 2000
    assert categories["tool_use"] > 0
    assert categories["injected_block"] >= 500
    assert categories["meta_injection"] > 3000
    assert categories["sidechain"] > 0
    assert categories["system"] > 0
    assert categories["attachment"] > 700
    assert categories["other"] > 400
    assert categories["image"] == 0


def test_other_is_broken_down_by_event_type(tmp_path: Path) -> None:
    report = build(tmp_path, noisy()).ledger.report(10**9, True)
    assert report["other_by_type"]["file-history-snapshot"] > 400
    assert report["other_by_type"]["queue-operation"] > 0


def test_channel_messages_and_replies_are_conversation_not_noise(tmp_path: Path) -> None:
    t = Transcript()
    t.channel("c" * 3000)
    t.assistant(tool_use("mcp__companion__reply", {"text": "r" * 3000}))
    report = build(tmp_path, t).ledger.report(10**9, True)
    assert report["conversation_bytes"] > 6000
    assert report["categories"]["tool_use"] == 0


def test_a_mixed_assistant_line_is_split_by_block(tmp_path: Path) -> None:
    t = Transcript()
    t.user("q")
    t.assistant(text("short answer"), thinking("z" * 4000))
    report = build(tmp_path, t).ledger.report(10**9, True)
    assert 4000 <= report["categories"]["thinking"] < 4200


def test_budget_crossing_sets_should_rebuild_with_the_reason(tmp_path: Path) -> None:
    small = build(tmp_path, noisy()).ledger.report(10**9, True)
    assert small["should_rebuild"] is False and small["reasons"] == []
    over = build(tmp_path, noisy()).ledger.report(1000, True)
    assert over["should_rebuild"] is True
    assert over["reasons"][0].startswith("noise_bytes ")


def test_a_viewed_image_advises_a_rebuild_unless_disabled(tmp_path: Path) -> None:
    t = Transcript()
    t.user([text("see this"), image(3000)])
    t.tool_round(result=[image(2000)])
    built = build(tmp_path, t)
    report = built.ledger.report(10**9, True)
    assert report["image_seen"] is True
    assert report["categories"]["image"] >= 5000
    assert report["reasons"] == ["the model viewed an original image"]
    assert built.ledger.report(10**9, False)["should_rebuild"] is False


def test_noise_ratio_is_noise_over_everything(tmp_path: Path) -> None:
    report = build(tmp_path, noisy()).ledger.report(10**9, True)
    total = report["noise_bytes"] + report["conversation_bytes"]
    assert report["noise_ratio"] == round(report["noise_bytes"] / total, 4)
    assert 0.5 < report["noise_ratio"] < 1


def test_dirty_report_reads_with_the_config_budget(tmp_path: Path) -> None:
    path = noisy().write(tmp_path / "s.jsonl")
    report = dirty_report(path, config(dirty_budget_bytes=100))
    assert report["transcript"] == str(path)
    assert report["dirty_budget_bytes"] == 100
    assert report["should_rebuild"] is True
    assert report["bytes"] == path.stat().st_size


def test_conversation_bytes_never_enter_the_budget(tmp_path: Path) -> None:
    t = Transcript()
    t.user("a long human message " * 200)
    t.assistant("a long answer " * 300)
    report = build(tmp_path, t).ledger.report(2000, True)
    assert report["conversation_bytes"] > 2000 > report["noise_bytes"]
    assert report["should_rebuild"] is False
