"""The Codex reader on inputs a user's machine or a hostile file can present: parents that are
no file, bases that point nowhere, rollouts cut mid-line or holding half an emoji, files named
like a rollout that do not open like one. Each rollout is made line for line like the recorded
ones (``tests.runtime.codex_rollouts``) and then edited."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from runtime.cli import main
from runtime.config import Config
from runtime.engine import candidate as claude_candidate
from runtime.engine.codex import candidate
from runtime.engine.codex.rollout import scan
from runtime.engine.codex.verify import verify_rollout
from runtime.engine.report import plan_report
from runtime.errors import TranscriptError
from tests.runtime.codex_rollouts import Rollout


def _child(tmp_path: Path) -> tuple[Rollout, Path]:
    """A parent thread (not written) and its fork's rollout, as ``codex exec fork`` writes them."""
    parent = Rollout()
    parent.exchange("parent said", "parent answered")
    child = Rollout(first_ordinal=parent.ordinal, history_base={
        "thread_id": parent.id, "end_ordinal_exclusive": parent.ordinal,
        "end_byte_offset": 1})
    child.exchange("child said", "child answered")
    return parent, child.write(tmp_path / "sessions" / "2026" / "12" / "03")


HALF_EMOJI = b"\\ud83d"  # what a JavaScript writer leaves of a split emoji


def test_a_parent_named_by_a_fifo_is_refused_without_waiting_for_a_writer(
    tmp_path: Path,
) -> None:
    """Opening a FIFO for reading blocks until someone writes: the read must not hang."""
    parent, path = _child(tmp_path)
    fifo = path.parent / f"rollout-2026-12-03T09-00-00-{parent.id}.jsonl"
    os.mkfifo(fifo)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "runtime.cli", "plan", "--transcript", str(path)],
            capture_output=True, text=True, timeout=120,  # a bound on a hang, not a timing
        )
    except subprocess.TimeoutExpired:
        pytest.fail("plan waited on the FIFO named like the parent's rollout")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert str(fifo) in done.stderr and "is not a regular file" in done.stderr


def test_a_folder_named_like_the_parent_does_not_hide_the_parent(tmp_path: Path) -> None:
    parent, path = _child(tmp_path)
    (tmp_path / "sessions" / "2026" / "12" / "01" /
     f"rollout-2026-12-01T09-00-00-{parent.id}.jsonl").mkdir(parents=True)
    parent.write(tmp_path / "sessions" / "2026" / "12" / "02")
    built = candidate.build(path, Config())
    assert [u.text for i in built.selected for u in built.turns[i].items] == [
        "parent said", "parent answered", "child said", "child answered"]


@pytest.mark.parametrize("odd", [{"end_ordinal_exclusive": -1}, {"thread_id": ""}])
def test_a_negative_end_ordinal_or_an_empty_thread_is_refused_not_read_as_no_parent(
    tmp_path: Path, odd: dict[str, object]
) -> None:
    """-1 would read none of the parent (a silently shorter history); "" every file's line 0."""
    parent = Rollout()
    parent.exchange("parent said", "parent answered")
    parent.write(tmp_path / "sessions" / "2026" / "12" / "02")
    child = Rollout(first_ordinal=parent.ordinal, history_base={
        "thread_id": parent.id, "end_ordinal_exclusive": parent.ordinal, "end_byte_offset": 1,
        **odd})
    child.exchange("child said", "child answered")
    path = child.write(tmp_path / "sessions" / "2026" / "12" / "03")
    with pytest.raises(TranscriptError) as caught:
        candidate.build(path, Config())
    message = str(caught.value)
    assert "no non-negative end_ordinal_exclusive" in message and str(path) in message


def test_a_rollout_cut_mid_line_reports_its_partial_tail_and_non_utf8_lines(
    tmp_path: Path,
) -> None:
    rollout = Rollout()
    rollout.exchange("first", "first reply")
    rollout.start("exec")
    rollout.user("second")
    rollout.assistant("second reply")
    broken = rollout.lines[-3].replace(b'"text":"second"', b'"text":"sec\xffond"')
    rollout.lines[-3] = broken  # the UserMessage copy, made invalid UTF-8
    rollout.lines[-1] = rollout.lines[-1][:-40]  # the assistant message, written half
    path = rollout.write(tmp_path)
    path.write_bytes(path.read_bytes().removesuffix(b"\n"))
    report = plan_report(path, Config())
    assert report["malformed"]["partial_tail"] is True
    assert report["malformed"]["lines"] == 2 and report["malformed"]["non_utf8"] == 1
    assert report["malformed"]["sample_line_numbers"] == [
        len(rollout.lines) - 2, len(rollout.lines)]
    path.write_bytes(path.read_bytes() + b"\n")  # a complete but broken last line: no tail
    assert plan_report(path, Config())["malformed"]["partial_tail"] is False


@pytest.mark.parametrize("hold", [None, 0])  # 0: every old text let go and read back
def test_half_an_emoji_in_a_typed_message_is_carried_with_u_fffd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hold: int | None
) -> None:
    """Codex's serde_json never writes a lone surrogate escape; a hand edit or a JavaScript
    tool may. The Claude reader's repair applies: the words around it are carried."""
    rollout = Rollout()
    rollout.exchange("smile HALF please", "smiled")
    for n in range(11):  # past the poison window, so a let-go text is read back
        rollout.exchange(f"more {n}", f"reply {n}")
    raw = b"\n".join(rollout.lines).replace(b"HALF", HALF_EMOJI) + b"\n"
    path = tmp_path / f"rollout-2026-12-03T10-00-00-{rollout.id}.jsonl"
    path.write_bytes(raw)
    if hold is not None:
        monkeypatch.setattr(claude_candidate, "HOLD_CHARS", hold)
    built = candidate.build(path, Config())
    assert built.blocked_reason is None
    assert built.read.lone_surrogate_lines == 2  # the message and its UI copy
    assert built.read.malformed == 0
    written = candidate.write(built, tmp_path / "out")
    verify_rollout(written, built)
    said = orjson.loads(written.read_bytes().split(b"\n")[1])["payload"]["content"][-1]["text"]
    assert said == "smile \ufffd please"
    reference = scan(path, fast=False)[0]  # the full parse reads it the same way
    assert reference.speech == built.read.speech


@pytest.mark.parametrize("broken", ["second", "no object"])
@pytest.mark.parametrize("command", ["plan", "fork"])
def test_a_rollout_named_file_that_does_not_open_with_session_meta_is_a_codex_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], broken: str, command: str
) -> None:
    """Read as a Claude transcript it would hold 'nothing to carry' though it holds speech;
    read with an empty line 0 it would fork into a rollout without cwd, provider or
    instructions. Codex itself refuses both (``does not start with session metadata``)."""
    rollout = Rollout()
    rollout.exchange("said", "answered")
    if broken == "second":
        rollout.lines[0], rollout.lines[1] = rollout.lines[1], rollout.lines[0]
    else:
        line = orjson.loads(rollout.lines[0])
        rollout.lines[0] = orjson.dumps({**line, "payload": str(line["payload"]["id"])})
    path = rollout.write(tmp_path)
    code = main([command, "--transcript", str(path)])
    out, err = capsys.readouterr()
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and "does not start with session_meta" in err


@pytest.mark.parametrize("copied", [("Part one. ", "Part two."), ("Part one. ", "Part three.")])
def test_the_ui_copy_of_a_two_part_reply_is_recognised_and_a_changed_one_is_not(
    tmp_path: Path, copied: tuple[str, str]
) -> None:
    """Codex's AgentMessage copy holds one Text part per output_text part; the reader takes
    each part as an utterance and the copy's parts joined: the audit matches them joined."""
    rollout = Rollout()
    rollout.start("exec", harness=True)
    rollout.user("say two things")
    rollout.event("item_completed", item={"type": "AgentMessage", "id": "msg_31_0", "content": [
        {"type": "Text", "text": text} for text in copied]})
    rollout.message("assistant", [
        {"type": "output_text", "text": "Part one. ", "annotations": []},
        {"type": "output_text", "text": "Part two.", "annotations": []}],
        {"turn_id": "turn-1", "content_item_kinds": ["unknown", "unknown"]},
        {"history_sequence": 4, "client_authored": False})
    rollout.end("Part one. Part two.")
    built = candidate.build(rollout.write(tmp_path), Config())
    assert [u.text for u in built.turns[0].items] == [
        "say two things", "Part one. ", "Part two."]
    if copied[1] == "Part two.":
        assert built.blocked_reason is None
    else:
        assert built.blocked_reason is not None
        assert built.blocked_reason.startswith("unrecognised speech: 1 UI cop(ies)")
