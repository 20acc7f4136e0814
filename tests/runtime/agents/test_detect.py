"""A session file that opens with a UTF-8 byte-order mark is refused, never half read.

Neither Claude Code nor Codex writes a BOM; an editor that saved the file did. Read as it is,
line 0 would not parse: a transcript's first event would be counted malformed and left out of a
fork, and a rollout's session_meta would be missed, so the rollout would be read as a transcript
with nothing to carry.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from runtime.cli import main
from tests.fixtures.transcripts import Transcript

BOM = b"\xef\xbb\xbf"
META = (b'{"timestamp":"2026-05-01T10:00:00.000Z","type":"session_meta","payload":{"id":'
        b'"019e0000-0000-7000-8000-000000000001","timestamp":"2026-05-01T10:00:00.000Z",'
        b'"cwd":"/srv/probe","originator":"codex-tui","cli_version":"0.169.0"}}\n')


def transcript(tmp_path: Path) -> Path:
    t = Transcript()
    t.user("the first thing I said")
    t.assistant("and my answer")
    return t.write(tmp_path / "11111111-2222-3333-4444-555555555555.jsonl")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("agent", [None, "claude", "codex"])
@pytest.mark.parametrize("command", [
    ["plan"], ["dirty"], ["plan", "--show"], ["fork", "--into", "OUT"],
    ["report", "--html", "OUT"],
])
def test_a_transcript_with_a_bom_is_refused_in_one_line_and_left_as_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str], agent: str | None
) -> None:
    source = transcript(tmp_path)
    source.write_bytes(BOM + source.read_bytes())
    before = source.read_bytes()
    argv = [str(tmp_path / "forks") if a == "OUT" else a for a in command]
    argv += ["--transcript", str(source), *(["--agent", agent] if agent else [])]
    code, out, err = run(capsys, *argv)
    assert code == 1 and out == ""
    assert err.splitlines() == [
        f"tl-rebuild: error: {str(source)!r} starts with a UTF-8 byte-order mark (Claude Code "
        "and Codex never write one; an editor did) and its first line would be lost; remove it "
        f"with sed -i '1s/^\\xEF\\xBB\\xBF//' {str(source)!r}"]
    assert source.read_bytes() == before and not (tmp_path / "forks").exists()


def test_the_command_the_error_names_removes_the_mark_and_the_first_line_is_carried(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = transcript(tmp_path)
    plain = source.read_bytes()
    source.write_bytes(BOM + plain)
    _, _, err = run(capsys, "plan", "--transcript", str(source))
    command = err.split("remove it with ", 1)[1].strip()
    subprocess.run(["bash", "-c", command], check=True, timeout=30)
    assert source.read_bytes() == plain
    code, out, err = run(capsys, "plan", "--show", "--transcript", str(source))
    assert code == 0, err
    assert "the first thing I said" in out


def test_a_rollout_with_a_bom_is_refused_not_read_as_an_empty_transcript(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "rollout-2026-05-01T10-00-00-019e0000-0000-7000-8000-000000000001.jsonl"
    source.write_bytes(BOM + META)
    code, out, err = run(capsys, "plan", "--transcript", str(source), "--json")
    assert code == 1 and out == "" and "starts with a UTF-8 byte-order mark" in err
    source.write_bytes(META)  # without the mark it is a rollout again (nothing to carry in it)
    code, out, err = run(capsys, "plan", "--transcript", str(source), "--json")
    assert code == 0, err
    assert '"agent": "codex"' in out
