"""runtime.paths: the cwd -> project folder rule, the newest session transcript and a Codex
thread's rollout."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runtime.errors import TranscriptError
from runtime.paths import (
    codex_history_files,
    codex_revision_of,
    codex_rollout,
    codex_thread_of,
    encode_project_dir,
    latest_transcript,
    project_dir_for,
)


@pytest.mark.parametrize(
    ("cwd", "folder"),
    [
        ("/srv/app", "-srv-app"),
        ("/srv/wo.rk_x y", "-srv-wo-rk-x-y"),  # measured on Claude Code 2.1.328
        ("/root", "-root"),
        ("/home/u/Über", "-home-u--ber"),
        ("/", "-"),
    ],
)
def test_every_non_alphanumeric_character_becomes_a_dash(cwd: str, folder: str) -> None:
    assert encode_project_dir(cwd) == folder


def test_project_dir_follows_claude_config_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", "/cfg")
    assert project_dir_for("/srv/app") == Path("/cfg/projects/-srv-app")


def test_latest_transcript_is_the_newest_top_level_session(tmp_path: Path) -> None:
    for name, age in [("old.jsonl", 300), ("new.jsonl", 100), ("agent-x.jsonl", 0)]:
        path = tmp_path / name
        path.write_text("{}\n")
        os.utime(path, (1_700_000_000 - age, 1_700_000_000 - age))
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "newest.jsonl").write_text("{}\n")
    (tmp_path / "notes.txt").write_text("x")
    assert latest_transcript(tmp_path) == tmp_path / "new.jsonl"


def test_latest_transcript_is_none_for_an_empty_or_missing_folder(tmp_path: Path) -> None:
    assert latest_transcript(tmp_path) is None
    assert latest_transcript(tmp_path / "missing") is None


def test_a_codex_thread_s_rollout_is_found_in_any_folder_by_its_name_end(tmp_path: Path) -> None:
    thread = "01a24632-6827-7a52-8813-53ab6b6ff12b"
    dated = tmp_path / "2026" / "12" / "03"
    dated.mkdir(parents=True)
    rollout = dated / f"rollout-2026-12-03T10-00-00-{thread}.jsonl"
    rollout.write_text("{}\n")
    (tmp_path / f"rollout-2026-12-03T11-00-00-{OTHER}_{thread}.jsonl").write_text("{}\n")
    assert codex_rollout(tmp_path, thread) == rollout
    assert codex_rollout(tmp_path, "01a24632-0000-7000-8000-000000000000") is None
    for junk in ("", None, "*", "../x", "[0-9]*"):
        assert codex_rollout(tmp_path, junk) is None


OTHER = "01a24915-0000-7000-8000-000000000000"


def test_two_copies_of_a_codex_thread_s_rollout_are_refused_naming_both(tmp_path: Path) -> None:
    """``codex resume <id>`` loads the copy its sqlite index holds, else the first of a fuzzy
    file search (measured with 0.169.0: the shorter path, not the newer date or mtime); the
    lookup took the sorted-first path silently, so ``dirty``/``plan`` and a switch could read
    the copy Codex does not write to."""
    thread = "01a24632-6827-7a52-8813-53ab6b6ff12b"
    paths = [tmp_path / day / f"rollout-2026-12-03T10-00-00-{thread}.jsonl"
             for day in ("2025/01/15", "2026/12/03")]
    for path in paths:
        path.parent.mkdir(parents=True)
        path.write_text("{}\n")
    with pytest.raises(TranscriptError) as caught:
        codex_rollout(tmp_path, thread)
    message = str(caught.value)
    assert all(str(path) in message for path in paths) and "\n" not in message
    revision = "01a24916-263a-7b23-9a45-119d92d0f8b8"  # a revision's copy is as ambiguous
    for path in paths:
        path.with_name(f"rollout-2026-12-03T11-00-00-{thread}_{revision}.jsonl").write_text("{}")
    with pytest.raises(TranscriptError, match=revision):
        codex_rollout(tmp_path, thread)




def test_a_reverted_codex_thread_continues_in_its_newest_revision(tmp_path: Path) -> None:
    """Measured with 0.169.0 (two ``thread/revert``s over the app-server protocol): the original
    file stays, each revert writes ``…-<thread>_<revision>.jsonl`` (UUIDv7 revision ids, names
    in the same second) and ``codex exec resume`` appends to the newest revision."""
    thread = "01a24916-254d-7ff1-99b8-1637d7d0487d"
    older, newer = "01a24916-263a-7b23-9a45-119d92d0f8b8", "01a24916-26cf-70f0-bca7-ca7be2469e69"
    day = tmp_path / "2026" / "12" / "06"
    day.mkdir(parents=True)
    original = day / f"rollout-2026-12-06T02-01-57-{thread}.jsonl"
    first = day / f"rollout-2026-12-06T02-01-58-{thread}_{older}.jsonl"
    second = day / f"rollout-2026-12-06T02-01-58-{thread}_{newer}.jsonl"
    for path in (original, second, first):  # written in another order: the id decides
        path.write_text("{}\n")
    assert codex_rollout(tmp_path, thread) == second
    assert codex_history_files(tmp_path, thread) == (original,)  # revision 1's history_base
    assert codex_history_files(tmp_path, older) == (first,)  # revision 2's history_base
    assert codex_history_files(tmp_path, newer) == (second,)  # a fork's of the reverted thread
    assert codex_history_files(tmp_path, OTHER) == ()
    assert codex_history_files(tmp_path, "*") == ()
    assert [codex_thread_of(p) for p in (original, first, second)] == [thread] * 3
    assert [codex_revision_of(p) for p in (original, first, second)] == [None, older, newer]
    assert codex_thread_of(tmp_path / f"{thread}.jsonl") is None
