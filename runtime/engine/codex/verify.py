"""Verification of a written Codex rollout, by code (SPEC §3.8 for Codex).

The file is re-read from disk and checked against the build: mode 0600; line 0 a
``session_meta`` whose ``id`` and ``session_id`` equal the uuid in the file name, with no
``history_base``/``forked_from_*``; then only user/assistant ``response_item`` messages with
text parts, ordinals 0..n when paginated, the carry mark, each text digest equal to its
source; then the per-kind recognition audit of ``runtime.engine.verify``.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

from runtime.engine.codex import rules
from runtime.engine.codex.candidate import DROPPED_META, CodexBuild
from runtime.engine.items import ManifestEntry, sha256_text
from runtime.engine.verify import VerifyReport, _require, parse_line
from runtime.errors import VerificationError

CHECKS: tuple[str, ...] = (
    "mode", "parse", "item_count", "session_meta", "types", "ordinals", "timestamps",
    "parts", "mark", "text_digest", "recognition_audit",
)
PART = {"user": "input_text", "assistant": "output_text"}


def verify_rollout(path: Path, built: CodexBuild) -> VerifyReport:
    """Re-read ``path`` and prove it is ``built``'s rollout; raise on the first failure."""
    path = Path(path)
    manifest = built.manifest
    items = len(manifest)
    paginated = built.paginated
    marks: dict[tuple[str, str | None], dict[str, str]] = {}  # the expected mark per kind/lead
    count = 0
    try:
        with open(path, "rb", buffering=1 << 20) as handle:  # one line in memory at a time
            mode = os.fstat(handle.fileno()).st_mode & 0o777
            _require(mode == 0o600, "mode", path, f"file mode is {mode:o}, not 600")
            last = b"\n"
            for number, raw in enumerate(handle):
                last = raw
                line = parse_line(path, number, raw)
                if number == 0:
                    _check_meta(path, line, built)
                elif number <= items:
                    _check_item(path, number, line, manifest[number - 1], paginated, marks)
                count = number
    except OSError as exc:
        raise VerificationError(
            f"check 'parse': cannot read {str(path)!r}: {exc.strerror}"
        ) from exc
    _require(last.endswith(b"\n"), "parse", path, "the file does not end with a newline")
    _require(count == items, "item_count", path,
             f"{count} item(s) on disk, {items} in the manifest")
    # every entry's line was checked above (count == items): what is carried, per kind
    carried = Counter(entry.kind for entry in manifest)
    return VerifyReport(path=path, items=count, checks=CHECKS,
                        audit=_audit(built, carried, path))


def _check_meta(path: Path, line: dict[str, Any], built: CodexBuild) -> None:
    payload = line.get("payload")
    _require(line.get("type") == "session_meta" and type(payload) is dict, "session_meta",
             path, "line 0 is not a session_meta")
    assert isinstance(payload, dict)
    uuid = path.name.removesuffix(".jsonl")[-36:]
    _require(payload.get("id") == payload.get("session_id") == uuid == built.new_session_id,
             "session_meta", path, "id, session_id and the file name's uuid differ")
    stale = [key for key in DROPPED_META if key in payload]
    _require(not stale, "session_meta", path, f"line 0 still holds {', '.join(stale)}")
    if built.paginated:
        _require(line.get("ordinal") == 0, "ordinals", path, "line 0 has no ordinal 0")


def _check_item(
    path: Path, number: int, line: dict[str, Any], entry: ManifestEntry, paginated: bool,
    marks: dict[tuple[str, str | None], dict[str, str]],
) -> None:
    """One carried line against its manifest entry (messages are formatted only on failure:
    this runs for every carried utterance). ``marks``: the expected carry marks, made once
    per kind and lead."""
    payload = line.get("payload")
    if not (line.get("type") == "response_item" and type(payload) is dict
            and payload.get("type") == "message"):
        _require(False, "types", path, f"line {number} is not a message")
    assert isinstance(payload, dict)
    role = payload.get("role")
    if role != entry.role:
        _require(False, "types", path, f"line {number} is {role!r}, not {entry.role!r}")
    if paginated and line.get("ordinal") != number:
        _require(False, "ordinals", path, f"line {number} ordinal")
    if type(line.get("timestamp")) is not str:
        _require(False, "timestamps", path, f"line {number} timestamp")
    content = payload.get("content")
    if not (type(content) is list and len(content) == (2 if entry.stamp else 1)):
        _require(False, "parts", path, f"line {number} does not hold exactly its text part(s)")
    assert isinstance(content, list)
    part_type = PART[entry.role]
    for part in content:
        if not (type(part) is dict and part.get("type") == part_type
                and type(part.get("text")) is str):
            _require(False, "parts", path, f"line {number} holds a non-text part")
    expected = marks.get((entry.kind, entry.stamp))
    if expected is None:
        expected = marks[(entry.kind, entry.stamp)] = (
            {"kind": entry.kind, "lead": entry.stamp} if entry.stamp else {"kind": entry.kind})
    if line.get("threadline") != expected:
        _require(False, "mark", path, f"line {number} mark")
    digest = sha256_text(content[-1]["text"])
    if not digest == entry.candidate_sha256 == entry.source_sha256:
        _require(False, "text_digest", path, f"line {number} text digest differs from its source")


def _audit(built: CodexBuild, carried: Counter[str], path: Path) -> dict[str, dict[str, int]]:
    """Per kind: source == candidate + left out by rule == what the reader recognised."""
    selected = set(built.selected)
    left_out: Counter[str] = Counter()
    for turn in built.turns:
        if turn.index not in selected:
            left_out.update(u.kind for u in turn.items)
    audit = {}
    for kind in rules.SPEECH_KINDS:
        row = {"source": built.counts["source"][kind], "candidate": carried[kind],
               "left_out_by_rule": left_out[kind]}
        _require(row["source"] == row["candidate"] + row["left_out_by_rule"]
                 == built.counts["reader"][kind], "recognition_audit", path,
                 f"{kind}: source {row['source']} != candidate {row['candidate']} "
                 f"+ left out {row['left_out_by_rule']}")
        audit[kind] = row
    return audit
