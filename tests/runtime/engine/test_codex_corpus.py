"""The Codex engine on every recorded rollout of ``../shared/corpus/codex-0.169/``.

The oracle is each file's ``.outline.txt`` (written when the rollouts were recorded, not by this
code): its ``response_item message`` rows with role user (minus ``<environment_context>``) and
assistant (minus ``[compaction_output]``), the parent's rows before the fork point first for a
fork or revision. Every file must fork, verify, and carry exactly those texts in order.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from runtime.config import Config
from runtime.engine.codex import candidate
from runtime.engine.codex.rollout import scan
from runtime.engine.codex.verify import verify_rollout
from runtime.engine.turns import TurnBuilder
from runtime.paths import codex_rollout
from tests.conftest import corpus_dir

pytestmark = pytest.mark.corpus

FOLDER = (corpus_dir() or Path("/nonexistent")) / "codex-0.169"
FILES = sorted(p.name for p in FOLDER.glob("*.jsonl")) if FOLDER.is_dir() else []


def outline_rows(name: str) -> list[tuple[int, str, str]]:
    """``(ordinal, role, shown text)`` of the outline's message rows that are speech."""
    rows = []
    text = (FOLDER / name.replace(".jsonl", ".outline.txt")).read_text(encoding="utf-8")
    for line in text.splitlines():
        if line.startswith("#") or " response_item " not in line or " message " not in line:
            continue
        detail = line.split(" message ", 1)[1].strip()
        role, _, said = detail.partition(": ")
        column = line.split()[1]  # "-": a legacy line without an ordinal
        ordinal = int(column) if column.isdigit() else -1
        if role == "user" and not said.startswith("<environment_context>"):
            rows.append((ordinal, "user", said))
        elif role == "assistant":
            rows.append((ordinal, "assistant", said))
    return rows


def meta(name: str) -> dict:
    return orjson.loads((FOLDER / name).read_bytes().split(b"\n", 1)[0])["payload"]


def expected(name: str) -> list[tuple[str, str]]:
    own = [(role, said) for _, role, said in outline_rows(name)]
    base = meta(name).get("history_base")
    if base is None:
        return own
    parent = next(other for other in FILES
                  if other != name and meta(other)["id"] == base["thread_id"])
    return [(role, said) for ordinal, role, said in outline_rows(parent)
            if ordinal < base["end_ordinal_exclusive"]] + own


def shown(text: str) -> str:
    return text.replace("\n", "\\n")


@pytest.fixture(scope="module")
def folder() -> Path:
    if not FILES:
        pytest.skip(f"Codex corpus not found at {FOLDER} (../shared/corpus/codex-0.169)")
    return FOLDER


@pytest.mark.parametrize("name", FILES or ["(corpus missing)"])
def test_every_recorded_rollout_forks_and_carries_exactly_its_speech(
    folder: Path, name: str, tmp_path: Path
) -> None:
    built = candidate.build(folder / name, Config())
    path = candidate.write(built, tmp_path)
    report = verify_rollout(path, built)
    carried = [(line["payload"]["role"], line["payload"]["content"][0]["text"])
               for line in map(orjson.loads, path.read_bytes().splitlines()[1:])]
    want = expected(name)
    assert len(carried) == len(want), (carried, want)
    for (role, text), (want_role, said) in zip(carried, want, strict=True):
        assert role == want_role
        if said.endswith("..."):
            assert shown(text).startswith(said[:-3])
        else:
            assert shown(text) == said
    assert sum(row["candidate"] for row in report.audit.values()) == len(want)
    assert built.details["recognition_audit"]["unrecognised"] == {}


def test_the_queued_message_of_sample_11_is_counted_as_queued(folder: Path) -> None:
    built = candidate.build(folder / "11-tui-fork-then-codex-queue.jsonl", Config())
    queued = [u.text for t in built.turns for u in t.items if u.kind == "queued"]
    assert queued == ["QUEUED-MSG via codex queue"]


def test_the_compacted_sample_carries_the_conversation_before_the_compacted_line(
    folder: Path,
) -> None:
    built = candidate.build(folder / "04-auto-compaction.jsonl", Config())
    texts = [u.text for t in built.turns for u in t.items]
    assert "compaction test first message" in texts
    assert not any(t.startswith("SUMMARY-OF-CONVERSATION") for t in texts)
    assert built.details["compaction"] == {"summaries": 1, "carried": 0}


def test_a_fork_whose_parent_is_not_beside_it_is_refused(folder: Path, tmp_path: Path) -> None:
    alone = tmp_path / "08-exec-fork-child.jsonl"
    alone.write_bytes((folder / "08-exec-fork-child.jsonl").read_bytes())
    with pytest.raises(Exception, match="01a23b12-da7f-7f00-b596-a358c49a08fb"):
        candidate.build(alone, Config())


@pytest.mark.parametrize("name", FILES or ["(corpus missing)"])
def test_the_fast_path_counts_every_recorded_rollout_like_the_full_parse(
    folder: Path, name: str
) -> None:
    fast = scan(folder / name, TurnBuilder(), fast=True)
    plain = scan(folder / name, TurnBuilder(), fast=False)
    assert fast[0].as_dict() == plain[0].as_dict()
    assert fast[0].speech == plain[0].speech
    assert fast[1].report(1, True) == plain[1].report(1, True)


def test_a_reverted_thread_under_codex_names_is_read_from_its_revision(tmp_path: Path) -> None:
    """09a/09b copied under the names Codex gives them (the thread's file and
    ``…-<thread>_<revision>.jsonl``): the thread's current rollout is the revision, and reading
    it carries turn one, the injected messages and what came after, never the reverted turns."""
    original, revised = "09a-app-server-3-turns-before-revert.jsonl", \
        "09b-app-server-revision-after-revert-inject.jsonl"
    if original not in FILES or revised not in FILES:
        pytest.skip(f"corpus files {original} / {revised} are not in {FOLDER}")
    thread = meta(original)["id"]
    day = tmp_path / "sessions" / "2026" / "12" / "03"
    day.mkdir(parents=True)
    (day / f"rollout-2026-12-03T10-30-00-{thread}.jsonl").write_bytes(
        (FOLDER / original).read_bytes())
    revision_id = "01a23b74-0000-7000-8000-000000000000"
    revision = day / f"rollout-2026-12-03T10-30-35-{thread}_{revision_id}.jsonl"
    revision.write_bytes((FOLDER / revised).read_bytes())
    assert codex_rollout(tmp_path / "sessions", thread) == revision
    built = candidate.build(revision, Config())
    texts = [u.text for i in built.selected for u in built.turns[i].items]
    assert texts == [said for _, said in expected(revised)]
    assert "APP turn two" not in texts and "INJECTED-USER text" in texts
