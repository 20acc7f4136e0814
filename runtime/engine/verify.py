"""Verification of a written candidate, by code (SPEC §3.8).

The candidate file is re-read from disk and checked against the build's manifest: only
user/assistant items (and the system lines of words said on a voice call), one new
sessionId, the manifest's ids in order, a linear parent chain, valid timestamps and
versions, text blocks only, every text digest equal to its source. Then
the recognition audit: per speech kind, what the source said = what the candidate carries +
what the rules left out (dropped oldest turns, an excluded open tail). Any failure raises
``VerificationError`` naming the check.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any, NoReturn

import orjson

from runtime.engine.candidate import Build
from runtime.engine.items import ManifestEntry, sha256_text
from runtime.engine.speech import (
    SPEECH_KINDS,
    VOICE_ORIGIN,
    VOICE_SUBTYPE,
    read_mark,
    valid_timestamp,
)
from runtime.errors import VerificationError
from runtime.record import Record

CHECKS: tuple[str, ...] = (
    "mode",
    "parse",
    "item_count",
    "types",
    "session_id",
    "uuids",
    "parent_chain",
    "flags",
    "timestamps",
    "version",
    "blocks",
    "stamp",
    "mark",
    "text_digest",
    "recognition_audit",
)


class VerifyReport(Record):
    """A passed verification: what was checked and the per-kind audit."""

    path: Path
    items: int
    checks: tuple[str, ...]
    audit: dict[str, dict[str, int]]

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "items": self.items,
            "checks": list(self.checks),
            "audit": self.audit,
        }


def verify_candidate(path: Path, build: Build) -> VerifyReport:
    """Re-read ``path`` and prove it is ``build``'s candidate; raise on the first failure.

    The file is read line by line (memory bounded by one item); failures are reported in the
    order of the checks: mode, parse (any line), item count, then item by item.
    """
    path = Path(path)
    try:
        with open(path, "rb", buffering=1 << 20) as handle:
            mode = os.fstat(handle.fileno()).st_mode & 0o777
            _require(mode == 0o600, "mode", path, f"file mode is {mode:o}, not 600")
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(size - 1, 0))
            _require(size == 0 or handle.read(1) == b"\n", "parse", path,
                     "the file does not end with a newline")
            handle.seek(0)
            count, carried, failure = _check_lines(path, handle, build)
    except OSError as exc:
        raise VerificationError(
            f"check 'parse': cannot read {str(path)!r}: {exc.strerror}"
        ) from exc
    manifest = build.manifest
    _require(
        count == len(manifest),
        "item_count",
        path,
        f"{count} item(s) on disk, {len(manifest)} in the manifest",
    )
    if failure is not None:
        raise failure
    audit = _audit(build, carried, path)
    return VerifyReport(path=path, items=count, checks=CHECKS, audit=audit)


def _check_lines(
    path: Path, lines: Any, build: Build
) -> tuple[int, Counter[str], VerificationError | None]:
    """Parse every line (a parse failure raises at once) and check each item in turn.

    Returns the line count, the carried kinds and the first item failure, raised by the
    caller after the item count so the count is reported first, as for a whole-file read.
    """
    manifest = build.manifest
    carried: Counter[str] = Counter()
    failure: VerificationError | None = None
    parent = None
    number = 0
    for number, line in enumerate(lines, 1):  # noqa: B007 - the count is returned
        event = parse_line(path, number, line)
        if failure is not None or number > len(manifest):
            continue
        entry = manifest[number - 1]
        try:
            _check_item(path, number, event, entry, build.new_session_id, parent)
        except VerificationError as exc:
            failure = exc
        parent = entry.item_id
        carried[entry.kind] += 1
    return number, carried, failure


def _check_item(
    path: Path,
    number: int,
    event: dict[str, Any],
    entry: ManifestEntry,
    session: str,
    parent: str | None,
) -> None:
    """Raise the first failed check of one item; a message is worded only when it fails
    (55 k f-strings a speech-heavy fork formatted for nothing).

    A voice item is the system line Claude Code loads as words said on a voice call: its
    type, flags (``isMeta: true``, a ``voice-call`` origin, no ``fold``) and text (its
    ``content``, no lead) are checked on those terms, the rest as for every item."""
    kind = event.get("type")
    voice = entry.kind == "voice"
    if voice:
        if kind != "system" or event.get("subtype") != VOICE_SUBTYPE:
            _fail("types", path, f"item {number} is not a {VOICE_SUBTYPE} system line")
    elif kind not in ("user", "assistant"):
        _fail("types", path, f"item {number} has type {kind!r}")
    elif kind != entry.role:
        _fail("types", path, f"item {number} is {kind!r}, manifest says {entry.role!r}")
    if event.get("sessionId") != session:
        _fail("session_id", path, f"item {number} has another sessionId")
    if event.get("uuid") != entry.item_id:
        _fail("uuids", path, f"item {number} uuid differs from manifest")
    if event.get("parentUuid") != parent:
        _fail("parent_chain", path, f"item {number} breaks the chain")
    if voice:
        origin = event.get("origin")
        if not (event.get("isSidechain") is False and event.get("isMeta") is True
                and type(origin) is dict and origin.get("kind") == VOICE_ORIGIN
                and "fold" not in event):
            _fail("flags", path, f"item {number} is not a voice line (isMeta, origin, no fold)")
    else:
        # a user item must say isMeta: false (an absent flag is not the same claim)
        meta = event.get("isMeta") if kind == "user" else event.get("isMeta", False)
        if not (event.get("isSidechain") is False and meta is False):
            _fail("flags", path,
                  f"item {number} is not marked isSidechain: false / isMeta: false")
    if not valid_timestamp(event.get("timestamp")):
        _fail("timestamps", path, f"item {number} timestamp")
    version = event.get("version")
    if not (type(version) is str and version != ""):
        _fail("version", path, f"item {number} has no version")
    text = _voice_text(path, number, event, entry) if voice else _blocks_text(
        path, number, event, entry, str(kind))
    digest = sha256_text(text)
    if not digest == entry.candidate_sha256 == entry.source_sha256:
        _fail("text_digest", path, f"item {number} text digest differs from its source")


def _blocks_text(
    path: Path, number: int, event: dict[str, Any], entry: ManifestEntry, kind: str
) -> str:
    """The carried text of a user/assistant item: its blocks, stamp and mark checked."""
    message = event.get("message")
    content = message.get("content") if type(message) is dict else None
    if not (type(message) is dict and message.get("role") == kind and type(content) is list):
        _fail("blocks", path, f"item {number} has no {kind} message content list")
    assert isinstance(content, list)
    for block in content:
        btype = block.get("type") if type(block) is dict else None
        if btype != "text":
            _fail("blocks", path, f"item {number} holds a {btype!r} block")
        if type(block.get("text")) is not str:
            _fail("blocks", path, f"item {number} has a non-text text")
    expected = 2 if entry.stamp else 1
    if len(content) != expected:
        _fail("stamp", path, f"item {number} has {len(content)} block(s)")
    if entry.stamp and content[0]["text"] != entry.stamp:
        _fail("stamp", path, f"item {number} stamp differs")
    if read_mark(event, kind) != (entry.kind, entry.stamp):
        _fail("mark", path, f"item {number} does not carry the mark of a {entry.kind!r} item")
    return str(content[-1]["text"])


def _voice_text(path: Path, number: int, event: dict[str, Any], entry: ManifestEntry) -> str:
    """The carried text of a voice item: its ``content`` (no blocks, no lead), mark checked."""
    text = event.get("content")
    if type(text) is not str or "blocks" in event:
        _fail("blocks", path, f"item {number} has no text content")
    if entry.stamp:
        _fail("stamp", path, f"item {number} is a voice line with a lead")
    if read_mark(event, "user") != ("voice", None):
        _fail("mark", path, f"item {number} does not carry the mark of a 'voice' item")
    return text


def _audit(build: Build, carried: Counter[str], path: Path) -> dict[str, dict[str, int]]:
    """Per kind: source == candidate + left out by rule; the reader agrees with the turns."""
    selected = set(build.selected)
    left_out: Counter[str] = Counter()
    in_turns: Counter[str] = Counter()
    for turn in build.turns:
        for utt in turn.items:
            in_turns[utt.kind] += 1
            if turn.index not in selected:
                left_out[utt.kind] += 1
    source = build.counts["source"]
    reader = build.counts["reader"]
    audit = {}
    for kind in SPEECH_KINDS:
        row = {
            "source": source[kind],
            "candidate": carried[kind],
            "left_out_by_rule": left_out[kind],
        }
        _require(
            row["source"] == row["candidate"] + row["left_out_by_rule"] == in_turns[kind],
            "recognition_audit",
            path,
            f"{kind}: source {row['source']} != candidate {row['candidate']} "
            f"+ left out {row['left_out_by_rule']}",
        )
        if kind in reader:
            _require(
                reader[kind] == source[kind],
                "recognition_audit",
                path,
                f"{kind}: the reader recognised {reader[kind]}, the turns hold {source[kind]}",
            )
        audit[kind] = row
    return audit


def parse_line(path: Path, number: int, raw: bytes) -> dict[str, Any]:
    """Line ``number`` of a written candidate as a JSON object (check ``parse``), else raise."""
    try:
        event = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise VerificationError(
            f"check 'parse': line {number} of {str(path)!r} is not JSON"
        ) from exc
    if type(event) is not dict:  # one call a line: the check inline, _require only to word it
        _require(False, "parse", path, f"line {number} is not an object")
    # checked to be a dict just above; orjson gives it, no copy needed
    return event  # type: ignore[no-any-return]


def _require(ok: bool, check: str, path: Path, detail: str) -> None:
    if not ok:
        _fail(check, path, detail)


def _fail(check: str, path: Path, detail: str) -> NoReturn:
    raise VerificationError(f"check {check!r} failed for {str(path)!r}: {detail}")
