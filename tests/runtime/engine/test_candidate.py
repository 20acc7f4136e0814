"""runtime.engine.candidate: the new session's layout, fidelity, caps, poison, snapshot,
compaction."""

from __future__ import annotations

import hashlib
import stat
import uuid
from pathlib import Path

import orjson
import pytest

from runtime.engine import candidate
from runtime.engine.tokens import estimate_tokens
from runtime.errors import BlockedError, NothingToCarryError
from tests.fixtures.transcripts import Transcript
from tests.runtime.helpers import build, config, conversation, kinds, texts

SNAPSHOT = (
    "<system-reminder>\nAs you answer the user's questions, you can use the following context:\n"
    "# claudeMd\nCodebase and user instructions are shown below.\nContents of /srv/app/CLAUDE.md:"
    "\nBe brief.\n</system-reminder>\n"
)


def test_only_user_and_assistant_items_with_one_new_session_id(tmp_path: Path) -> None:
    t = conversation()
    t.system("turn_duration")
    t.raw({"type": "summary", "summary": "title", "leafUuid": "x"})
    built = build(tmp_path, t)
    assert {item["type"] for item in built.items} == {"user", "assistant"}
    assert {item["sessionId"] for item in built.items} == {built.new_session_id}
    assert built.new_session_id != t.session
    assert uuid.UUID(built.new_session_id).version == 4


def test_text_is_carried_byte_for_byte(tmp_path: Path) -> None:
    odd = "  spaces\u3000全角  \ttabs\r\nCRLF \u200b zero-width, emoji 🧵, trailing  \n\n"
    t = Transcript()
    t.user(odd)
    t.assistant(odd + "(echo)")
    built = build(tmp_path, t)
    assert texts(built) == [odd, odd + "(echo)"]
    entry = built.manifest[0]
    assert entry.source_sha256 == entry.candidate_sha256 == hashlib.sha256(odd.encode()).hexdigest()


def test_carry_cap_with_drop_oldest_drops_whole_oldest_turns_and_counts_them(
    tmp_path: Path,
) -> None:
    built = build(tmp_path, conversation(5), carry_max_tokens=25, stamp_turns=False)
    stats = built.stats()
    assert stats["turns"]["dropped_oldest_turns"] >= 1
    assert texts(built)[-2:] == ["question 4", "answer 4"]
    assert stats["tokens"]["estimate"] <= 25
    kept = set(built.selected)
    assert kept == set(range(stats["turns"]["dropped_oldest_turns"], 5))
    assert built.blocked_reason is None


def test_carry_cap_with_block_drops_nothing_and_blocks(tmp_path: Path) -> None:
    built = build(tmp_path, conversation(5), carry_max_tokens=25, carry_overflow="block")
    assert built.stats()["turns"]["dropped_oldest_turns"] == 0
    assert len(built.selected) == 5
    assert "exceed carry_max_tokens 25" in (built.blocked_reason or "")


def test_a_cap_below_the_newest_turn_blocks_instead_of_truncating(tmp_path: Path) -> None:
    built = build(tmp_path, conversation(2), carry_max_tokens=2)
    assert "after dropping every turn but the newest" in (built.blocked_reason or "")
    assert texts(built)[-1] == "answer 1"


def test_token_estimate_counts_cjk_times_factor_and_other_over_divisor() -> None:
    knobs = config().rebuild
    assert estimate_tokens("日本語ab", knobs) == pytest.approx(3 * 1.1 + 2 / 1.5)
    custom = config(token_cjk_factor=2.0, token_other_divisor=4.0).rebuild
    assert estimate_tokens("中文abcd", custom) == pytest.approx(2 * 2.0 + 4 / 4.0)


def test_fixed_overhead_is_reported_separately(tmp_path: Path) -> None:
    tokens = build(tmp_path, conversation(1), fixed_overhead_tokens=37000).stats()["tokens"]
    assert tokens["fixed_overhead_tokens"] == 37000
    assert tokens["estimate_with_overhead"] == tokens["estimate"] + 37000


def test_two_poison_hits_in_the_last_turns_block_the_rebuild(tmp_path: Path) -> None:
    t = conversation(2)
    t.user("that reply was a policy violation")
    t.assistant("I hit the Acceptable Use Policy there")
    built = build(tmp_path, t)
    assert built.stats()["poison"]["hits"] == 2
    assert "poison check" in (built.blocked_reason or "")


def test_poison_patterns_respect_word_boundaries(tmp_path: Path) -> None:
    t = Transcript()
    t.user("the AUPs and CAUP-X and refusal looping are fine words")
    t.assistant("policy violations galore")
    built = build(tmp_path, t)
    assert built.stats()["poison"]["hits"] == 0
    assert built.blocked_reason is None


def test_poison_hits_outside_the_window_do_not_count(tmp_path: Path) -> None:
    t = Transcript()
    t.user("AUP AUP AUP")
    t.assistant("old trouble")
    for n in range(3):
        t.user(f"q{n}")
        t.assistant(f"a{n}")
    built = build(tmp_path, t, poison_window_turns=3)
    assert built.stats()["poison"]["hits"] == 0
    assert build(tmp_path, t, poison_window_turns=4).blocked_reason


def test_cjk_poison_pattern_counts(tmp_path: Path) -> None:
    t = Transcript()
    t.user("这是上下文中毒吗？还是拒绝循环？")
    built = build(tmp_path, t)
    assert built.stats()["poison"]["hits"] == 2


def test_startup_snapshot_is_carried_frozen_first_with_its_digest_and_not_twice(
    tmp_path: Path,
) -> None:
    t = Transcript()
    t.user(SNAPSHOT + "hello")
    t.assistant("hi")
    built = build(tmp_path, t)
    block = SNAPSHOT.rstrip("\n")
    assert texts(built) == [block, "hello", "hi"]
    assert kinds(built)[0] == "startup_snapshot"
    assert built.items[0]["message"]["content"] == [{"type": "text", "text": block}]
    snapshot = built.stats()["startup_snapshot"]
    assert snapshot["present"] is True
    assert snapshot["sha256"] == hashlib.sha256(block.encode()).hexdigest()
    assert sum(text.count("# claudeMd") for text in texts(built)) == 1
    assert built.startup_snapshot == block


def test_without_a_startup_injection_the_plan_says_there_is_no_snapshot(tmp_path: Path) -> None:
    built = build(tmp_path, conversation(1))
    snapshot = built.stats()["startup_snapshot"]
    assert built.startup_snapshot is None
    assert snapshot["present"] is False
    assert "attachment" in snapshot["note"]


def test_a_compaction_summary_is_not_carried_when_its_turns_are_present(tmp_path: Path) -> None:
    t = conversation(2)
    t.compact("This session is being continued from a previous conversation...")
    t.user("after compact")
    t.assistant("ok")
    built = build(tmp_path, t)
    assert "compact_summary" not in kinds(built)
    assert built.stats()["compaction"] == {"summaries": 1, "carried": 0}


def test_a_compaction_summary_is_carried_marked_when_its_turns_are_missing(tmp_path: Path) -> None:
    t = Transcript()
    t.compact("Summary of turns this file does not hold", logical_parent="gone-uuid")
    t.user("after compact")
    t.assistant("ok")
    built = build(tmp_path, t)
    assert kinds(built)[0] == "compact_summary"
    content = built.items[0]["message"]["content"]
    assert content[0]["text"] == candidate.SUMMARY_MARK
    assert content[1]["text"] == "Summary of turns this file does not hold"


def test_a_compaction_summary_is_carried_when_the_cap_dropped_its_turns(tmp_path: Path) -> None:
    t = Transcript()
    for n in range(4):
        t.user(f"question {n} " + "x" * 300)
        t.assistant(f"answer {n}")
    t.compact("Summary of the first four turns")
    t.user("after compact")
    t.assistant("ok")
    built = build(tmp_path, t, carry_max_tokens=500, stamp_turns=False)
    assert built.blocked_reason is None
    assert built.stats()["turns"]["dropped_oldest_turns"] in (2, 3)
    assert kinds(built).count("compact_summary") == 1
    assert kinds(built).index("compact_summary") == len(kinds(built)) - 3  # where it sat
    assert built.stats()["tokens"]["estimate"] <= 500


def test_write_puts_the_candidate_next_to_nothing_else_atomically_with_mode_0600(
    tmp_path: Path,
) -> None:
    built = build(tmp_path, conversation(2))
    out = tmp_path / "out"
    out.mkdir()
    path = candidate.write(built, out)
    assert path == out / f"{built.new_session_id}.jsonl"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    lines = path.read_bytes().splitlines()
    assert [orjson.loads(line) for line in lines] == list(built.items)
    assert sorted(p.name for p in out.iterdir()) == [path.name]


def test_write_refuses_a_blocked_or_empty_build(tmp_path: Path) -> None:
    blocked = build(tmp_path, conversation(3), carry_max_tokens=5, carry_overflow="block")
    with pytest.raises(BlockedError, match="is blocked"):
        candidate.write(blocked, tmp_path)
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    with pytest.raises(NothingToCarryError, match="the transcript is empty"):
        candidate.write(candidate.build(empty, config()), tmp_path)


def test_a_plan_only_build_decides_the_same_but_cannot_be_written(tmp_path: Path) -> None:
    path = conversation(3).write(tmp_path / "s.jsonl")
    full = candidate.build(path, config())
    plan = candidate.build(path, config(), lay_out=False)
    assert plan.items == () and plan.item_count == len(full.items) == full.item_count
    same = {k: v for k, v in full.stats().items() if k != "new_session_id"}
    assert {k: v for k, v in plan.stats().items() if k != "new_session_id"} == same
    with pytest.raises(ValueError, match="lay_out=False"):
        candidate.write(plan, tmp_path)
