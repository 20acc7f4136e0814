"""The rebuilt Codex rollout: line 0, file name, messages only, verification, the CLI."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import orjson
import pytest

from runtime.cli import main
from runtime.config import Config
from runtime.engine import candidate as claude_candidate
from runtime.engine.codex import candidate
from runtime.engine.codex.verify import verify_rollout
from runtime.errors import VerificationError
from runtime.paths import codex_rollout
from tests.fixtures.transcripts import Transcript
from tests.runtime.codex_rollouts import BASE_INSTRUCTIONS, Rollout

UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


def noisy(tmp_path: Path) -> Path:
    parent = Rollout()
    parent.exchange("parent said", "parent answered")
    cut = parent.ordinal
    parent.write(tmp_path / "sessions" / "2026" / "12" / "02")
    rollout = Rollout(first_ordinal=cut, history_base={
        "thread_id": parent.id, "end_ordinal_exclusive": cut, "end_byte_offset": 1})
    rollout.start("user", harness=True)
    rollout.user("run the tool")
    rollout.tool_round()
    rollout.assistant("tool ran")
    rollout.end("tool ran")
    rollout.compaction("SUMMARY")
    rollout.exchange("queued words", "queued reply", trigger="queue")
    return rollout.write(tmp_path / "sessions" / "2026" / "12" / "03")


def lines(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def test_the_rollout_holds_new_meta_then_only_the_carried_messages(tmp_path: Path) -> None:
    source = noisy(tmp_path)
    built = candidate.build(source, Config())
    path = candidate.write(built, tmp_path / "out")
    assert re.fullmatch(rf"rollout-\d{{4}}-\d\d-\d\dT\d\d-\d\d-\d\d-({UUID})\.jsonl", path.name)
    written = lines(path)
    head = written[0]
    source_meta = lines(source)[0]["payload"]
    assert head["type"] == "session_meta" and head["ordinal"] == 0
    meta = head["payload"]
    assert meta["id"] == meta["session_id"] == built.new_session_id
    assert path.name.endswith(f"-{built.new_session_id}.jsonl")
    assert built.new_session_id != source_meta["id"]
    for key in ("history_base", "forked_from_id", "forked_from_ordinal_exclusive"):
        assert key in source_meta and key not in meta
    for key in ("cwd", "cli_version", "model_provider", "originator", "history_mode"):
        assert meta[key] == source_meta[key]
    assert meta["base_instructions"] == {"text": BASE_INSTRUCTIONS}
    assert [line["ordinal"] for line in written] == list(range(len(written)))
    said = [(line["payload"]["role"], line["payload"]["content"]) for line in written[1:]]
    assert said == [
        ("user", [{"type": "input_text", "text": "parent said"}]),
        ("assistant", [{"type": "output_text", "text": "parent answered"}]),
        ("user", [{"type": "input_text", "text": "run the tool"}]),
        ("assistant", [{"type": "output_text", "text": "tool ran"}]),
        ("user", [{"type": "input_text", "text": "queued words"}]),
        ("assistant", [{"type": "output_text", "text": "queued reply"}]),
    ]
    assert {line["type"] for line in written[1:]} == {"response_item"}
    assert path.stat().st_mode & 0o777 == 0o600
    report = verify_rollout(path, built)
    assert report.audit["queued"] == {"source": 1, "candidate": 1, "left_out_by_rule": 0}


def test_rebuilding_a_rebuilt_rollout_carries_the_same_speech(tmp_path: Path) -> None:
    first = candidate.build(noisy(tmp_path), Config())
    once = candidate.write(first, tmp_path / "gen1")
    second = candidate.build(once, Config())
    twice = candidate.write(second, tmp_path / "gen2")
    verify_rollout(twice, second)
    said = [(u.role, u.kind, u.text) for t in first.turns for u in t.items]
    assert said == [(u.role, u.kind, u.text) for t in second.turns for u in t.items]
    assert [line["payload"] for line in lines(once)[1:]] == [
        line["payload"] for line in lines(twice)[1:]]
    assert second.counts == first.counts


def test_verification_names_the_check_a_tampered_rollout_fails(tmp_path: Path) -> None:
    built = candidate.build(noisy(tmp_path), Config())
    path = candidate.write(built, tmp_path / "out")
    written = lines(path)
    written[3]["payload"]["content"][0]["text"] += " (edited)"
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in written))
    with pytest.raises(VerificationError, match="check 'text_digest' failed .* line 3"):
        verify_rollout(path, built)
    written[3] = {"type": "response_item", "ordinal": 3,
                  "payload": {"type": "reasoning", "summary": []}}
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in written))
    with pytest.raises(VerificationError, match="check 'types'"):
        verify_rollout(path, built)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_plan_dirty_and_fork_work_on_a_codex_rollout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = noisy(tmp_path)
    code, out, err = run(capsys, "plan", "--transcript", str(source), "--json")
    assert code == 0 and err == ""
    plan = json.loads(out)
    assert plan["speech"]["source"] == {"typed": 2, "queued": 1, "untagged": 0,
                                        "assistant_text": 3}
    assert plan["turns"]["selected"] == plan["turns"]["source"] == 3
    assert plan["dirty"]["categories"]["reasoning"] > 0
    assert plan["ignored"]["types"]["response_item:function_call"] == 1
    code, out, _ = run(capsys, "dirty", "--transcript", str(source), "--json")
    dirty = json.loads(out)
    assert dirty["categories"] == plan["dirty"]["categories"]
    assert dirty["categories"]["function_call_output"] > 0
    code, out, err = run(capsys, "fork", "--transcript", str(source), "--json")
    assert code == 0, err
    forked = json.loads(out)
    path = Path(forked["candidate_path"])
    day = path.parent
    assert day.parent.parent.parent == tmp_path / "sessions" and re.fullmatch(r"\d\d", day.name)
    assert forked["resume"] == f"codex resume {forked['new_session_id']}"
    assert forked["workdir"] == "/srv/probe/work"
    manifest = tmp_path / "manifest.jsonl"
    code, out, _ = run(capsys, "fork", "--transcript", str(source), "--into", str(tmp_path / "x"),
                       "--manifest", str(manifest))
    assert code == 0
    moved = re.escape(f"{tmp_path / 'sessions'}/")
    assert re.search(rf"resume +cd /srv/probe/work && mv \S+ {moved} && codex resume {UUID}",
                     out)
    entries = [orjson.loads(line) for line in manifest.read_bytes().splitlines()]
    assert [e["kind"] for e in entries] == ["typed", "assistant_text"] * 2 + [
        "queued", "assistant_text"]
    assert all(e["source_sha256"] == e["candidate_sha256"] for e in entries)


def test_forcing_claude_on_a_rollout_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Read as a Claude transcript a rollout holds no speech: a silent 'nothing to carry'."""
    source = noisy(tmp_path)
    for command in ("plan", "dirty", "fork"):
        code, out, err = run(capsys, command, "--transcript", str(source), "--agent", "claude")
        assert code == 1 and out == ""
        assert err.count("\n") == 1 and "is a Codex rollout" in err and str(source) in err


def test_fork_of_a_rollout_without_speech_refuses_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rollout = Rollout()
    rollout.start("exec", harness=True)
    path = rollout.write(tmp_path)
    code, out, err = run(capsys, "fork", "--transcript", str(path))
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and "nothing to carry" in err and str(path) in err
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


def test_fork_with_a_missing_parent_refuses_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    child = Rollout(first_ordinal=5, history_base={
        "thread_id": "01a23b12-0000-7000-8000-00000000abcd", "end_ordinal_exclusive": 5})
    child.exchange("child", "reply")
    path = child.write(tmp_path / "sessions")
    code, out, err = run(capsys, "fork", "--transcript", str(path))
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and "01a23b12-0000-7000-8000-00000000abcd" in err


def test_forcing_codex_on_a_claude_transcript_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    t = Transcript()
    t.user("hello")
    t.assistant("hi")
    path = t.write(tmp_path / "11111111-2222-3333-4444-555555555555.jsonl")
    code, out, err = run(capsys, "fork", "--transcript", str(path), "--agent", "codex")
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and "does not start with session_meta" in err and str(path) in err


@pytest.mark.parametrize("hold", [0, 10**9])
def test_plan_lets_the_old_turns_texts_go_and_reports_as_a_fork_read_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hold: int
) -> None:
    rollout = Rollout()
    for n in range(15):  # more turns than the poison window (10)
        rollout.exchange(f"prompt {n} → " * 40, f"reply {n} — " * 40)
    path = rollout.write(tmp_path)
    held = candidate.build(path, Config())  # a fork's read: every text kept
    monkeypatch.setattr(claude_candidate, "HOLD_CHARS", hold)
    planned = candidate.build(path, Config(), lay_out=False)
    assert planned.details == held.details
    assert planned.counts == held.counts
    first = [u.text for u in planned.turns[0].items]
    assert first == (["", ""] if hold == 0 else ["prompt 0 → " * 40, "reply 0 — " * 40])
    assert planned.turns[-1].items[0].text == "prompt 14 → " * 40


def test_a_fork_into_a_folder_outside_sessions_prints_a_resume_that_finds_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Codex 0.169.0 finds a thread only under ``$CODEX_HOME/sessions`` (``codex resume
    <path>`` read the path as a name and started a new thread, measured): the bare
    ``codex resume <id>`` printed after ``fork --into /elsewhere`` found nothing."""
    source = noisy(tmp_path)
    code, out, err = run(capsys, "fork", "--transcript", str(source), "--into",
                         str(tmp_path / "elsewhere"), "--json")
    assert code == 0, err
    forked = json.loads(out)
    new_id = forked["new_session_id"]
    assert not forked["resume"].startswith("codex resume")
    moving, resuming = forked["resume"].split(" && ")
    assert resuming == f"codex resume {new_id}"
    subprocess.run(moving, shell=True, check=True, cwd=tmp_path)  # noqa: S602 - our own line
    assert codex_rollout(tmp_path / "sessions", new_id) == (
        tmp_path / "sessions" / Path(forked["candidate_path"]).name)


def test_a_fork_of_an_archived_rollout_lands_in_sessions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An archived rollout is rebuilt into ``sessions`` beside ``archived_sessions``: Codex
    resumes nothing from the archive ("session … is archived", measured)."""
    rollout = Rollout()
    rollout.exchange("archived question", "archived answer")
    source = rollout.write(tmp_path / "archived_sessions" / "2026" / "12" / "03")
    code, out, err = run(capsys, "fork", "--transcript", str(source), "--json")
    assert code == 0, err
    forked = json.loads(out)
    path = Path(forked["candidate_path"])
    assert path.parent.parent.parent.parent == tmp_path / "sessions"
    assert forked["resume"] == f"codex resume {forked['new_session_id']}"
