"""Hostile transcripts (issue 11 §3, §4, §11, §13): odd JSON values, lone surrogates and
interrupt markers never crash the reader or drop a human word."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime.config import Config, config_from_mapping
from runtime.engine.transcript import resolve_transcript, scan
from runtime.errors import OutsideProjectError
from tests.fixtures.transcripts import Transcript
from tests.runtime.helpers import build, texts


@pytest.mark.parametrize("block", [
    {"type": "thinking", "thinking": "hm", "signature": 5},
    {"type": "thinking", "thinking": 7, "signature": [1, 2]},
    {"type": "redacted_thinking", "data": 7},
    {"type": "redacted_thinking", "data": {"x": 1}},
])
def test_a_thinking_block_with_numeric_signature_or_data_is_ignored_not_a_crash(
    tmp_path: Path, block: dict,
) -> None:
    t = Transcript()
    t.user("keep the blue door")
    t.assistant(block, "noted")
    built = build(tmp_path, t)
    assert texts(built) == ["keep the blue door", "noted"]
    assert built.read.ignored_reasons.get("assistant_no_speech", 0) == 0


@pytest.mark.parametrize("stamp", ["0001-01-01T00:30:00+01:00", "0000-01-01T00:00:00Z",
                                   "9999-12-31T23:00:00-05:00"])
def test_a_timestamp_that_overflows_when_shifted_is_replaced_and_counted(
    tmp_path: Path, stamp: str,
) -> None:
    t = Transcript()
    t.user("first words")
    t.assistant("first answer")
    t.user("we chose postgres", timestamp=stamp)
    t.assistant("fine")
    built = build(tmp_path, t)
    assert texts(built) == ["first words", "first answer", "we chose postgres", "fine"]
    assert built.details["timestamps_replaced"] == 1
    assert all(stamp not in json.dumps(item) for item in built.items)


def surrogate_transcript(tmp_path: Path) -> Path:
    t = Transcript()
    t.user("PLACEHOLDER")
    t.assistant("ok")
    raw = b"\n".join(t.lines).replace(b"PLACEHOLDER", b"we chose postgres \\ud83d") + b"\n"
    path = tmp_path / "source.jsonl"
    path.write_bytes(raw)
    return path


def test_a_lone_surrogate_escape_keeps_the_human_words_and_the_candidate_stays_utf8(
    tmp_path: Path,
) -> None:
    from runtime.engine import candidate

    path = surrogate_transcript(tmp_path)
    built = candidate.build(path, Config())
    assert texts(built) == ["we chose postgres \ufffd", "ok"]
    assert built.read.malformed == 0 and built.read.lone_surrogate_lines == 1
    for item in built.items:
        json.dumps(item, ensure_ascii=False).encode("utf-8")  # strict: no surrogate left


def invalid_bytes_transcript(tmp_path: Path) -> Path:
    """A typed prompt with a cut two-byte character, an answer with two bytes no UTF-8 has,
    a noise line with one, and a line cut mid-character that is not JSON either."""
    t = Transcript()
    t.user("hello")
    t.assistant("hi")
    t.user("the gate code is TYPED 4471")
    t.assistant("noted ASSIST")
    t.tool_round(result="NOISE output")
    raw = (b"\n".join(t.lines).replace(b"TYPED", b"caf\xc3").replace(b"ASSIST", b"caf\xff\xfe")
           .replace(b"NOISE", b"\xe2\x82") + b"\n" + t.lines[2][:40] + b"\xc3\n")
    path = tmp_path / "source.jsonl"
    path.write_bytes(raw)
    return path


def test_bytes_that_are_not_utf8_are_read_as_claude_code_reads_them(tmp_path: Path) -> None:
    """Claude Code (Node) decodes the file with U+FFFD for each invalid sequence and loads the
    line — the model is sent those words (tests/e2e/test_invalid_utf8_resume.py). So are they
    carried here, with the same U+FFFD; a line that is not JSON even so stays malformed."""
    from runtime.engine import candidate

    path = invalid_bytes_transcript(tmp_path)
    built = candidate.build(path, Config())
    assert texts(built) == ["hello", "hi", "the gate code is caf\ufffd 4471",
                            "noted caf\ufffd\ufffd"]
    assert built.read.invalid_utf8_lines == 3  # the noise line too: read, booked as noise
    assert built.read.malformed == 1 and built.read.malformed_non_utf8 == 1
    assert built.ledger.noise["tool_result"] > 0
    for item in built.items:
        json.dumps(item, ensure_ascii=False).encode("utf-8")  # the candidate is UTF-8


def test_a_nan_line_is_still_malformed_not_rescued_by_the_fallback(tmp_path: Path) -> None:
    t = Transcript()
    t.user("hello")
    t.raw_line(b'{"type": "user", "x": NaN, "note": "\\u00e9"}')
    stats, _ = scan(t.write(tmp_path / "s.jsonl"), Config().rebuild)
    assert stats.malformed == 1 and stats.lone_surrogate_lines == 0


@pytest.mark.parametrize("content", [
    "[Request interrupted by user]\nwe chose postgres",
    "[Request interrupted by user for tool use] we chose postgres",
    [{"type": "text", "text": "[Request interrupted by user for tool use]"},
     {"type": "text", "text": "we chose postgres"}],
])
def test_words_after_an_interrupt_marker_are_carried_without_the_marker(
    tmp_path: Path, content: str | list,
) -> None:
    t = Transcript()
    t.user(content)
    t.assistant("ok")
    assert texts(build(tmp_path, t)) == ["we chose postgres", "ok"]


def test_a_bare_interrupt_marker_is_still_not_speech(tmp_path: Path) -> None:
    t = Transcript()
    t.user("real words")
    t.user("[Request interrupted by user for tool use]")
    t.assistant("ok")
    built = build(tmp_path, t)
    assert texts(built) == ["real words", "ok"]
    assert built.read.ignored_reasons["interrupt_marker"] == 1


def test_partial_tail_is_seen_after_more_than_twenty_malformed_lines(tmp_path: Path) -> None:
    t = Transcript()
    t.user("hello")
    for _ in range(25):
        t.raw_line(b"{broken")
    t.raw_line(b'{"type": "user", "cut')
    stats, _ = scan(t.write(tmp_path / "s.jsonl", trailing_newline=False), Config().rebuild)
    assert stats.malformed == 26 and stats.partial_tail is True
    assert len(stats.malformed_lines) == 20


def test_a_dotdot_path_outside_the_project_is_not_called_a_symlink(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    (tmp_path / "x.jsonl").write_text("{}\n")
    config = config_from_mapping({"project_dir": str(project)})
    with pytest.raises(OutsideProjectError) as caught:
        resolve_transcript(project / ".." / "x.jsonl", config)
    assert "symlink" not in str(caught.value) and "outside project_dir" in str(caught.value)


@pytest.mark.parametrize("kind", ["tool_result", "attachment", "progress"])
def test_a_deeply_nested_value_in_a_noise_line_is_read_not_a_recursion_crash(
    tmp_path: Path, kind: str,
) -> None:
    """An MCP tool's structured result nested 1000 deep: JSON.parse reads it (so does orjson,
    up to 1024), msgspec's skip of the field recursed past Python's limit: RecursionError."""
    t = Transcript()
    t.user("keep the blue door")
    if kind == "tool_result":
        t.tool_round(result="NESTED")
    elif kind == "attachment":
        t.event("attachment", {"attachment": {"type": "mcp_resource", "content": "NESTED"}})
    else:
        t.event("progress", {"data": {"type": "mcp_progress", "output": "NESTED"}})
    t.assistant("noted")
    deep = b"[" * 1000 + b"]" * 1000
    t.lines = [line.replace(b'"NESTED"', deep) for line in t.lines]
    built = build(tmp_path, t)
    assert texts(built) == ["keep the blue door", "noted"]
    assert built.read.malformed == 0



def test_a_transcript_appended_to_while_it_is_read_is_read_as_it_was_when_opened(
    tmp_path: Path,
) -> None:
    """The reader met a half-written line at the end of the file; Claude Code finished it
    before the next read, which went on into the rest: the line became two malformed lines
    in the middle (a pasted prompt lost), and what came after the read began was read too."""
    t = Transcript()
    t.user("keep the blue door")
    t.tool_round(result="x" * 500_000)  # a big tool result: 1 MB, the reader reports progress
    t.assistant("noted")
    t.user("and this paste: " + "y" * 200_000)
    t.assistant("read it")
    *before, cut, later = t.lines
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"\n".join(before) + b"\n" + cut[:150_000])
    size = path.stat().st_size
    appended: list[int] = []

    def claude_code_writes(position: int, total: int) -> None:
        if not appended and position == size:  # the half-written line was just read
            with open(path, "ab") as out:
                appended.append(out.write(cut[150_000:] + b"\n" + later + b"\n"))

    stats, _ = scan(path, Config().rebuild, progress=claude_code_writes)
    assert appended  # the rest was written while the file was read
    assert (stats.lines, stats.malformed, stats.partial_tail) == (len(before) + 1, 1, True)
    assert stats.bytes == size and stats.speech["assistant_text"] == 1
