"""Candidate items in Claude Code's session-file format, and their manifest (SPEC §3.7).

``Layout`` turns carried utterances into ``user``/``assistant`` events: deterministic ids
(uuid5 of session, position and source uuid), a linear parent chain, the source's own
timestamp/cwd/version/gitBranch/userType, only text blocks (a stamp or summary mark is a
separate leading block), a valid timestamp and a version on every item, and the carry mark
(``runtime.engine.speech.MARK_KEY``: the item's kind and the leading block Threadline added) that
lets
the next rebuild read the item back as what it was.
"""

from __future__ import annotations

import uuid
from typing import Any, NamedTuple

import orjson

from runtime.engine.speech import MARK_KEY, VOICE_SUBTYPE, Utterance, carry_mark

NAMESPACE = uuid.UUID("8ebe8dba-c0be-55d0-bcf2-1bc645e9378b")
_NS_BYTES = NAMESPACE.bytes
FALLBACK_VERSION = "2.1.328"
EPOCH = "1970-01-01T00:00:00.000Z"
TIMESTAMP_RULE = (
    "an invalid timestamp takes the nearest earlier valid one; with none earlier, the first "
    "valid one of the carried items; with none at all, " + EPOCH
)
SUMMARY_MARK = "[compaction summary, carried because the turns it summarises are not all here]"


def item_uuid(session: str, position: int, source_uuid: str) -> str:
    """``uuid5(NAMESPACE, f"{session}:{position}:{source_uuid}")``, without uuid.UUID overhead."""
    import hashlib  # here, not at the top: its OpenSSL start-up (5 ms) is wasted on plan

    name = f"{session}:{position}:{source_uuid}".encode()
    raw = bytearray(hashlib.sha1(_NS_BYTES + name, usedforsecurity=False).digest()[:16])
    raw[6] = (raw[6] & 0x0F) | 0x50
    raw[8] = (raw[8] & 0x3F) | 0x80
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def sha256_text(text: str, encoded: bytes | None = None) -> str:
    """SHA-256 of ``text`` in UTF-8 (surrogatepass); ``encoded``: that encoding, if at hand."""
    import hashlib

    if encoded is None:
        encoded = text.encode("utf-8", "surrogatepass")
    return hashlib.sha256(encoded).hexdigest()


class ManifestEntry(NamedTuple):
    """One candidate item: where its text came from and the digests that must agree.

    (A NamedTuple: immutable like a frozen dataclass, and cheap to create per item.)
    """

    position: int
    role: str
    kind: str
    item_id: str
    source_uuid: str
    source_timestamp: Any
    turn: int | None
    source_sha256: str
    candidate_sha256: str
    stamp: str | None

    def as_dict(self) -> dict[str, Any]:
        return dict(self._asdict())


def manifest_jsonl(manifest: Any) -> bytes:
    """The manifest as JSONL, one entry per item in order (digests and ids, no speech text)."""
    return b"".join(
        orjson.dumps(entry.as_dict(), option=orjson.OPT_SORT_KEYS) + b"\n" for entry in manifest
    )


class Layout:
    """Turns utterances into candidate items, chaining ids and fixing timestamps/versions."""

    def __init__(self, session: str) -> None:
        self.session = session
        self.items: list[dict[str, Any]] = []
        self.manifest: list[ManifestEntry] = []
        self.pending: list[tuple[Utterance, str | None, int | None]] = []
        self._last_message: Any = None
        self._used_ids: set[Any] = set()
        # digests of texts a reader let go (by id of the utterance standing for them)
        self.digests: dict[int, str] = {}

    def add(self, utt: Utterance, stamp: str | None, turn: int | None) -> None:
        self.pending.append((utt, stamp, turn))

    @property
    def count(self) -> int:
        return len(self.pending)

    def timestamps_replaced(self) -> int:
        """Items whose source timestamp is not valid (they take the nearest earlier one)."""
        return sum(1 for utt, _, _ in self.pending if utt.timestamp_replaced or not utt.timestamp)

    def timestamp_fallbacks(self) -> dict[str, Any]:
        """How invalid source timestamps were replaced, by rule (SPEC §3.7), with the counts.

        ``earlier``: the nearest earlier valid timestamp of the source; ``later`` (no earlier
        one exists): the first valid timestamp of the carried items; ``epoch`` (no valid
        timestamp anywhere): 1970-01-01T00:00:00.000Z.
        """
        counts = {"earlier": 0, "later": 0, "epoch": 0}
        later = any(u.timestamp for u, _, _ in self.pending)
        for utt, _, _ in self.pending:
            if utt.timestamp_replaced or not utt.timestamp:
                counts["earlier" if utt.timestamp else "later" if later else "epoch"] += 1
        return {
            "replaced": sum(counts.values()),
            **counts,
            "rule": TIMESTAMP_RULE,
        }

    def versions_filled(self) -> int:
        """Items whose source has no version (they take the one before, or a fallback)."""
        return sum(
            1 for utt, _, _ in self.pending if not (type(utt.version) is str and utt.version)
        )

    def finish(self) -> tuple[list[dict[str, Any]], list[ManifestEntry]]:
        """Build every queued item and its manifest entry, in order."""
        last_ts = next((u.timestamp for u, _, _ in self.pending if u.timestamp), EPOCH)
        version = next((u.version for u, _, _ in self.pending if _nonempty(u.version)), None)
        version = version or FALLBACK_VERSION
        parent: str | None = None
        for position, (utt, stamp, turn) in enumerate(self.pending):
            item_id = item_uuid(self.session, position, utt.source_uuid)
            last_ts = utt.timestamp or last_ts  # None only before the first valid one
            if type(utt.version) is str and utt.version:
                version = utt.version
            blocks = ([{"type": "text", "text": stamp}] if stamp else []) + [
                {"type": "text", "text": utt.text}
            ]
            item = self._item(utt, parent, version, blocks, item_id, last_ts)
            known = self.digests.get(id(utt))
            # the last block *is* this string: one digest
            digest = sha256_text(utt.text) if known is None else known
            self.items.append(item)
            self.manifest.append(
                ManifestEntry(
                    position,
                    utt.role,
                    utt.kind,
                    item_id,
                    utt.source_uuid,
                    utt.source_timestamp,
                    turn,
                    digest,
                    digest if blocks[-1]["text"] is utt.text else "",
                    stamp,
                )
            )
            parent = item_id
        return self.items, self.manifest

    def _item(
        self,
        utt: Utterance,
        parent: str | None,
        version: str,
        blocks: list[dict[str, str]],
        item_id: str,
        timestamp: str,
    ) -> dict[str, Any]:
        """One event in Claude Code's session format, keys in the order it writes them."""
        item: dict[str, Any] = {
            "parentUuid": parent,
            "isSidechain": False,
            "userType": utt.user_type if _nonempty(utt.user_type) else "external",
        }
        if _nonempty(utt.cwd):
            item["cwd"] = utt.cwd
        item["sessionId"] = self.session
        item["version"] = version
        if _nonempty(utt.git_branch):
            item["gitBranch"] = utt.git_branch
        if utt.kind == "voice":  # as Claude Code stores it (speech.VOICE_SUBTYPE)
            item.update(type="system", subtype=VOICE_SUBTYPE, level="info", isMeta=True,
                        msgV=1, content=utt.text, origin=utt.origin)
            self._last_message = None
            item["uuid"] = item_id
            item["timestamp"] = timestamp
            item[MARK_KEY] = carry_mark(utt.kind, None)
            return item
        item["type"] = utt.role
        if utt.role == "user":
            item["message"] = {"role": "user", "content": blocks}
            item["isMeta"] = False
            if type(utt.origin) is dict:  # where a channel message came from, as the source says
                item["origin"] = utt.origin
            self._last_message = None
        else:
            item["message"] = self._assistant_message(utt, blocks, item_id)
        item["uuid"] = item_id
        item["timestamp"] = timestamp
        item[MARK_KEY] = carry_mark(utt.kind, blocks[0]["text"] if len(blocks) > 1 else None)
        return item

    def _assistant_message(
        self, utt: Utterance, blocks: list[dict[str, str]], item_id: str
    ) -> dict[str, Any]:
        """The message body; split parts keep their shared id only while they stay adjacent."""
        message_id = utt.message_id
        if not _nonempty(message_id) or (
            message_id in self._used_ids and message_id != self._last_message
        ):
            message_id = "msg_tl_" + item_id.replace("-", "")[:24]
        self._used_ids.add(message_id)
        self._last_message = message_id
        return {
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": utt.model if _nonempty(utt.model) else "unknown",
            "content": blocks,
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        }


def _nonempty(value: Any) -> bool:
    return type(value) is str and value != ""
