"""runtime.engine.transcript: the input checks and the streaming reader (SPEC §3.1)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.config import Config
from runtime.engine.transcript import resolve_transcript, scan
from runtime.errors import OutsideProjectError, TranscriptError
from tests.conftest import REPO
from tests.fixtures.transcripts import (
    Transcript,
)
from tests.runtime.helpers import build, config, texts

# -- input checks ----------------------------------------------------------------------------


def test_missing_transcript_is_an_error_naming_the_file(tmp_path: Path) -> None:
    with pytest.raises(TranscriptError, match=r"'.*nope\.jsonl' not found"):
        resolve_transcript(tmp_path / "nope.jsonl", Config())


def test_a_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "dir.jsonl").mkdir()
    with pytest.raises(TranscriptError, match="is a directory"):
        resolve_transcript(tmp_path / "dir.jsonl", Config())


def test_a_file_not_ending_in_jsonl_is_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("{}\n")
    with pytest.raises(TranscriptError, match=r"notes\.txt' is not a \.jsonl file"):
        resolve_transcript(tmp_path / "notes.txt", Config())


def test_a_path_outside_project_dir_is_refused_when_configured(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    elsewhere = tmp_path / "other.jsonl"
    elsewhere.write_text("{}\n")
    with pytest.raises(OutsideProjectError, match="outside project_dir"):
        resolve_transcript(elsewhere, Config(project_dir=project))


def test_a_symlink_inside_project_dir_pointing_outside_is_refused(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    target = tmp_path / "secret.jsonl"
    target.write_text("{}\n")
    link = project / "s.jsonl"
    link.symlink_to(target)
    with pytest.raises(OutsideProjectError, match="is a symlink to .*secret.jsonl"):
        resolve_transcript(link, Config(project_dir=project))


def test_a_symlink_loop_is_an_error_naming_the_file(tmp_path: Path) -> None:
    loop = tmp_path / "loop.jsonl"
    loop.symlink_to(loop)
    with pytest.raises(TranscriptError, match=r"'.*loop\.jsonl' cannot be resolved: symlink loop"):
        resolve_transcript(loop, Config())


def test_a_symlink_to_a_non_jsonl_file_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "passwd"
    target.write_text("root:x:0:0\n")
    link = tmp_path / "s.jsonl"
    link.symlink_to(target)
    with pytest.raises(TranscriptError, match="not a .jsonl file"):
        resolve_transcript(link, Config())


def test_a_dangling_symlink_is_reported_as_such(tmp_path: Path) -> None:
    link = tmp_path / "s.jsonl"
    link.symlink_to(tmp_path / "gone.jsonl")
    with pytest.raises(TranscriptError, match="dangling symlink"):
        resolve_transcript(link, Config())


def test_a_file_inside_project_dir_resolves_to_its_real_path(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    real = project / "a.jsonl"
    real.write_text("{}\n")
    (project / "b.jsonl").symlink_to(real)
    assert resolve_transcript(project / "b.jsonl", Config(project_dir=project)) == real


def test_an_unreadable_transcript_is_a_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "locked.jsonl"
    path.write_text('{"type": "user"}\n')
    path.chmod(0)
    if os.geteuid() != 0:
        with pytest.raises(TranscriptError, match="cannot be read: Permission denied"):
            resolve_transcript(path, Config())
        return
    # root reads everything: run the real CLI without the capabilities that bypass file modes
    argv = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]
    done = subprocess.run(
        [*argv, sys.executable, "-m", "runtime.cli", "plan", "--transcript", str(path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"tl-rebuild: error: transcript '{path}' cannot be read: Permission denied"
    )


# -- the reader ------------------------------------------------------------------------------


def test_malformed_and_partial_lines_are_counted_and_reported(tmp_path: Path) -> None:
    t = Transcript()
    t.user("hello")
    t.raw_line(b'{"type": "user", "message": ')
    t.assistant("hi")
    t.raw_line(b'{"type": "assistant", "mess')
    path = t.write(tmp_path / "s.jsonl", trailing_newline=False)
    stats, ledger = scan(path, config().rebuild)
    assert stats.malformed == 2
    assert stats.malformed_lines == [2, 4]
    assert stats.partial_tail is True
    assert ledger.malformed_bytes == len(b'{"type": "user", "message": \n') + len(
        b'{"type": "assistant", "mess'
    )


def test_a_line_that_is_not_utf8_is_read_with_u_fffd_and_one_cut_too_is_malformed(
    tmp_path: Path,
) -> None:
    """Latin-1 bytes in a line: Claude Code (Node) reads U+FFFD in their place and loads the
    line, so does the reader; a line that is not JSON either stays malformed and counted."""
    t = Transcript()
    t.user("hello")
    t.raw_line(b'{"type": "user", "message": {"content": "caf\xe9"}}')
    t.raw_line(b'{"type": "user", "message": {"content": "caf\xe9')
    t.assistant("hi")
    built = build(tmp_path, t)
    assert built.read.malformed == 1
    assert built.read.malformed_non_utf8 == 1
    assert built.read.invalid_utf8_lines == 1
    assert texts(built) == ["hello", "caf\ufffd", "hi"]


def test_a_file_of_binary_junk_is_a_one_line_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "junk.jsonl"
    path.write_bytes(bytes(range(256)) * 40)
    with pytest.raises(TranscriptError, match=r"junk\.jsonl' is not a JSONL transcript"):
        scan(path, config().rebuild)


def test_json_values_that_are_not_objects_are_malformed(tmp_path: Path) -> None:
    t = Transcript()
    t.raw([1, 2])
    t.raw("user")
    t.user("hello")
    built = build(tmp_path, t)
    assert built.read.malformed == 2
    assert texts(built) == ["hello"]


def test_unknown_event_types_are_counted_by_type_and_never_crash(tmp_path: Path) -> None:
    t = Transcript()
    t.raw({"type": "brand-new-thing", "payload": {"x": 1}})
    t.raw({"type": "brand-new-thing"})
    t.raw({"no": "type"})
    t.raw({"type": "user", "message": "not a dict"})
    t.raw({"type": "assistant", "message": {"content": 42}})
    t.user("hello")
    built = build(tmp_path, t)
    assert built.read.ignored_types["brand-new-thing"] == 2
    assert built.read.ignored_types["(no type)"] == 1
    assert built.ledger.other_by_type["brand-new-thing"] > 0
    assert texts(built) == ["hello"]


def test_blank_lines_are_skipped_not_malformed(tmp_path: Path) -> None:
    t = Transcript()
    t.user("hello")
    t.raw_line(b"")
    t.raw_line(b"   ")
    built = build(tmp_path, t)
    assert built.read.malformed == 0
    assert built.read.blank_lines == 2
