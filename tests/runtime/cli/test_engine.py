"""``tl-rebuild plan|dirty|fork``: JSON and tables, one-line errors, a fork that verifies."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.cli import main
from tests.conftest import REPO
from tests.fixtures.transcripts import Transcript, tool_use


def chat(tmp_path: Path, name: str = "11111111-2222-3333-4444-555555555555.jsonl") -> Path:
    t = Transcript()
    t.user("hello")
    t.tool_round()
    t.assistant("hi there")
    t.channel("from the phone")
    t.assistant(tool_use("mcp__companion__reply", {"text": "answered on the phone"}))
    return t.write(tmp_path / name)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def write_config(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "threadline.toml"
    path.write_text(body, encoding="utf-8")
    return path


def test_plan_json_reports_turns_speech_tokens_and_dirty(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "plan", "--transcript", str(chat(tmp_path)), "--json")
    assert code == 0 and err == ""
    report = json.loads(out)
    assert report["turns"] == {
        "source": 2,
        "selected": 2,
        "open_tail": False,
        "excluded_open_tail": 0,
        "dropped_oldest_turns": 0,
    }
    assert report["speech"]["source"]["channel"] == 1
    assert report["speech"]["candidate"]["channel_reply"] == 1
    for key in ("tokens", "startup_snapshot", "poison", "ignored", "malformed", "dirty"):
        assert key in report
    assert report["ignored"]["types"]["queue-operation"] == 2
    assert report["blocked_reason"] is None


def test_plan_prints_a_summary_line_a_table_and_the_next_step_without_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "plan", "--transcript", str(chat(tmp_path)))
    assert code == 0
    lines = out.splitlines()
    # 1412 bytes of noise (tool_use 595 + tool_result 453 + queue-operation 364) of 3357
    assert lines[0] == ("carries 4 utterances in 2 turns, drops 1.4 KiB of noise (42.1 %) — "
                        "blocked: no")
    assert "turns                 2 of 2 carried" in lines
    assert "open tail             no" in lines
    assert "  channel         1          1" in lines
    assert "  tool_use     595 B  17.7 %" in lines
    assert lines[-1].startswith("next: run `tl-rebuild request --reason")
    assert not [line for line in lines if "True" in line or "False" in line or "dirty." in line]


def test_plan_without_transcript_takes_the_newest_in_the_configured_project_dir(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    newest = chat(project)
    config = write_config(tmp_path, f'project_dir = "{project}"\n')
    monkeypatch.setenv("THREADLINE_CONFIG", str(config))
    code, out, _ = run(capsys, "plan", "--json")
    assert code == 0
    assert json.loads(out)["transcript"] == str(newest)


def test_plan_without_transcript_or_config_is_a_one_line_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run(capsys, "plan")
    assert code == 1 and out == ""
    assert err == "tl-rebuild: error: no --transcript given and no project_dir configured\n"


def test_a_bad_config_key_is_a_one_line_error_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, '[rebuild]\ncarry_overflow = "x"\n')
    code, _, err = run(
        capsys, "dirty", "--transcript", str(chat(tmp_path)), "--config", str(config)
    )
    assert code == 1
    assert "rebuild.carry_overflow: 'x' is not one of" in err
    assert len(err.splitlines()) == 1


def test_a_transcript_outside_the_configured_project_dir_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "project").mkdir()
    config = write_config(tmp_path, f'project_dir = "{tmp_path / "project"}"\n')
    path = chat(tmp_path)
    code, _, err = run(capsys, "plan", "--transcript", str(path), "--config", str(config))
    assert code == 1
    assert "outside project_dir" in err and str(path) in err


def test_dirty_json_reports_categories_and_the_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "dirty", "--transcript", str(chat(tmp_path)), "--json")
    report = json.loads(out)
    assert code == 0
    assert report["categories"]["tool_result"] > 0
    assert report["should_rebuild"] is False
    assert set(report) >= {"noise_bytes", "conversation_bytes", "noise_ratio", "image_seen"}


def test_dirty_prints_a_summary_with_units_and_the_verdict_without_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "dirty", "--transcript", str(chat(tmp_path)))
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == ("1.4 KiB of noise (42.1 %) beside 1.9 KiB of conversation — "
                        "rebuild advised: no")
    assert "read          8 lines, 3.3 KiB, 0 malformed" in lines
    assert "image seen    no" in lines
    assert "  tool_result  453 B  13.5 %" in lines
    assert lines[-1] == "next: nothing to do (below the dirty budget)"
    assert not [line for line in lines if "True" in line or "False" in line or "_bytes" in line]


def test_fork_writes_a_verified_0600_session_next_to_the_source_and_leaves_it_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = chat(tmp_path)
    before = (source.read_bytes(), source.stat().st_mtime_ns)
    code, out, err = run(capsys, "fork", "--transcript", str(source), "--json")
    assert code == 0 and err == ""
    result = json.loads(out)
    path = Path(result["candidate_path"])
    assert path == tmp_path / f"{result['new_session_id']}.jsonl"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert result["stats"]["turns"]["selected"] == 2
    assert result["verify"]["audit"]["channel_reply"]["candidate"] == 1
    assert "recognition_audit" in result["verify"]["checks"]
    assert (source.read_bytes(), source.stat().st_mtime_ns) == before
    events = [json.loads(line) for line in path.read_text().splitlines()]
    assert {e["sessionId"] for e in events} == {result["new_session_id"]}


def test_fork_into_writes_into_the_given_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    into = tmp_path / "elsewhere"
    into.mkdir()
    code, out, _ = run(capsys, "fork", "--transcript", str(chat(tmp_path)), "--into", str(into))
    assert code == 0
    assert [p.suffix for p in into.iterdir()] == [".jsonl"]
    assert any(line.startswith("new_session_id ") for line in out.splitlines())


def test_fork_into_a_missing_folder_makes_it_and_a_file_in_the_way_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    into = tmp_path / "forks" / "monday"  # neither folder exists yet
    manifest = tmp_path / "manifests" / "monday.jsonl"
    code, out, err = run(capsys, "fork", "--transcript", str(chat(tmp_path)), "--into", str(into),
                         "--manifest", str(manifest), "--json")
    assert code == 0, err
    assert json.loads(out)["manifest"]["entries"] == len(manifest.read_bytes().splitlines()) > 0
    written = Path(json.loads(out)["candidate_path"])
    assert written.parent == into and [p.name for p in into.iterdir()] == [written.name]
    assert into.stat().st_mode & 0o777 == 0o700 & ~current_umask()
    blocker = tmp_path / "taken"
    blocker.write_text("not a folder")
    code, _, err = run(capsys, "fork", "--transcript", str(chat(tmp_path)), "--into",
                       str(blocker / "sub"))
    assert code != 0 and blocker.read_text() == "not a folder"
    assert err.strip().splitlines() == [
        f"tl-rebuild: error: cannot create directory {str(blocker / 'sub')!r}: Not a directory"]


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_fork_of_an_empty_file_refuses_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    code, out, err = run(capsys, "fork", "--transcript", str(empty))
    assert code == 1 and out == ""
    assert err == (f"tl-rebuild: error: nothing to carry from '{empty}': the transcript is empty\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.jsonl"]


def test_fork_of_a_poisoned_session_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    t = Transcript()
    t.user("is this a refusal loop?")
    t.assistant("It looks like a policy violation.")
    source = t.write(tmp_path / "p.jsonl")
    code, _, err = run(capsys, "fork", "--transcript", str(source))
    assert code == 1
    assert "refused: poison check: 2 hit(s)" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.jsonl"]


def test_fork_needs_an_explicit_transcript(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["fork"])
    assert info.value.code == 2
    assert "--transcript" in capsys.readouterr().err


def test_the_console_command_reports_junk_in_one_line_and_exits_non_zero(tmp_path: Path) -> None:
    junk = tmp_path / "junk.jsonl"
    junk.write_bytes(b"\xff\xfe\x00binary\x00junk\n" * 50)
    done = subprocess.run(
        [sys.executable, "-m", "runtime.cli", "plan", "--transcript", str(junk)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr == (
        f"tl-rebuild: error: transcript '{junk}' is not a JSONL transcript: "
        "50 malformed line(s) and no valid event\n"
    )


def test_a_big_file_shows_progress_on_a_terminal_and_nothing_otherwise(tmp_path: Path) -> None:
    from tests.fixtures.terminal import stdout_on_a_terminal

    line = b'{"type":"user","message":{"content":[{"type":"tool_result","content":"'
    line += b"x" * (1 << 20) + b'"}]}}\n'
    big = tmp_path / "big.jsonl"
    with open(big, "wb") as out:
        for _ in range(52):  # just over the 50 MB threshold
            out.write(line)
    argv = [sys.executable, "-m", "runtime.cli", "dirty", "--json", "--transcript", str(big)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    plain = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, env=env, timeout=120)
    assert plain.returncode == 0 and plain.stderr == ""
    rc, seen, _ = stdout_on_a_terminal(argv, env, REPO, timeout=120, stderr=True)
    assert rc == 0
    assert "tl-rebuild: reading big.jsonl 100%" in seen


def test_a_fork_whose_manifest_cannot_be_written_leaves_no_session_behind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    source = chat(project)
    blocker = tmp_path / "a file"
    blocker.write_text("")
    code, out, err = run(capsys, "fork", "--transcript", str(source), "--manifest",
                         str(blocker / "manifest.jsonl"))
    assert code == 1 and out == ""
    assert err.startswith("tl-rebuild: error: ") and str(blocker) in err and err.count("\n") == 1
    assert sorted(p.name for p in project.iterdir()) == [source.name]


def test_fork_manifest_writes_one_0600_entry_per_item_with_its_digest_in_the_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import hashlib

    target = tmp_path / "proof" / "manifest.jsonl"
    target.parent.mkdir()
    code, out, _ = run(capsys, "fork", "--transcript", str(chat(tmp_path)), "--manifest",
                       str(target), "--json")
    assert code == 0
    result = json.loads(out)
    assert result["manifest"]["path"] == str(target)
    assert result["manifest"]["sha256"] == hashlib.sha256(target.read_bytes()).hexdigest()
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    entries = [json.loads(line) for line in target.read_text().splitlines()]
    items = [json.loads(line) for line in Path(result["candidate_path"]).read_text().splitlines()]
    assert [e["item_id"] for e in entries] == [i["uuid"] for i in items]
    assert [e["kind"] for e in entries] == ["typed", "assistant_text", "channel", "channel_reply"]
    for entry, item in zip(entries, items, strict=True):
        said = hashlib.sha256(item["message"]["content"][-1]["text"].encode()).hexdigest()
        assert entry["source_sha256"] == entry["candidate_sha256"] == said
    assert "hello" not in target.read_text()  # digests and ids, never the words


def test_json_of_plan_dirty_status_and_doctor_carries_schema_version_1_and_nothing_else_new(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from runtime.config import load_config
    from runtime.engine.report import dirty_report, plan_report
    from runtime.switch import ops

    monkeypatch.delenv("THREADLINE_CONFIG", raising=False)
    config = write_config(tmp_path, f'state_dir = "{tmp_path / "state"}"\n')
    source = chat(tmp_path)
    loaded = load_config(config)
    expected = {
        "plan": plan_report(source, loaded), "dirty": dirty_report(source, loaded),
        "status": ops.status(loaded), "doctor": ops.doctor(loaded),
    }
    for command, before in expected.items():
        where = ["--transcript", str(source)] if command in ("plan", "dirty") else []
        _, out, err = run(capsys, command, *where, "--config", str(config), "--json")
        assert err == "", (command, err)
        shown = json.loads(out)
        assert next(iter(shown)) == "schema_version" and shown.pop("schema_version") == 1
        assert shown == json.loads(json.dumps(before, default=str)), command


@pytest.mark.parametrize("command", ["plan", "dirty"])
def test_a_one_shot_command_leaves_typing_extensions_out_and_prints_the_same_json(
    tmp_path: Path, command: str
) -> None:
    """msgspec is imported with typing_extensions hidden (≈ 2 ms of start-up, issue 13): the
    JSON is the same as with typing_extensions loaded first, and it still imports after."""
    source = str(chat(tmp_path))

    def run_after(setup: str) -> tuple[str, str]:
        code = (f"import sys\n{setup}\nfrom runtime.cli import main\n"
                f"main([{command!r}, '--json', '--transcript', {source!r}])\n"
                "print('typing_extensions' in sys.modules, file=sys.stderr)\n"
                "import typing_extensions\n")
        done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                              text=True, timeout=60, check=True)
        return done.stdout, done.stderr

    alone, loaded = run_after(""), run_after("import typing_extensions")
    assert alone == (loaded[0], "False\n")
    assert loaded[1] == "True\n" and '"schema_version": 1' in alone[0]
