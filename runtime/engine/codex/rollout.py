"""Reading a Codex rollout: line 0, fork/revision parents inlined, every line classified.

``scan`` reads the rollout once (the parent's lines first when line 0 names a
``history_base``) and lets ``Classifier`` decide per line: speech to the turn sink,
everything else to a noise category of the ledger, counted by type. The rollout's own lines
first meet ``prefilter.Prefilter`` (a typed msgspec decode of the fields the rules read);
what it declines, and every parent line, is parsed whole with orjson. A parent that cannot
be found is an error, never a silently shorter history.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from runtime.engine.codex import rules
from runtime.engine.codex.prefilter import Prefilter
from runtime.engine.dirty import Ledger
from runtime.engine.speech import MARK_KEY, Utterance, valid_timestamp
from runtime.engine.transcript import (
    READ_BUFFER,
    Progress,
    ReadStats,
    as_opened,
    book_malformed,
    no_cycle_collection,
    tolerant,
)
from runtime.errors import TranscriptError
from runtime.paths import codex_history_files

if TYPE_CHECKING:  # dirty reads without turns: the builder is the callers' import
    from runtime.engine.turns import TurnBuilder

FIRST_LINE_MAX = 16 << 20  # session_meta carries ~20 KB of base instructions; far more is not it
PARENT_DEPTH_MAX = 64
FAST = True


def first_line(path: Path) -> bytes:
    """The first line of ``path`` (at most ``FIRST_LINE_MAX`` bytes), or b"" when unreadable."""
    try:
        with open(path, "rb") as handle:
            return handle.readline(FIRST_LINE_MAX)
    except OSError:
        return b""


def session_meta(line: bytes) -> dict[str, Any] | None:
    """The ``session_meta`` payload of a rollout's line 0, or None when it is not one.

    Pre-envelope rollouts (mid-2025) open with a bare ``{id, timestamp, instructions}``.
    """
    try:
        event = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if type(event) is not dict:
        return None
    payload = event.get("payload")
    if event.get("type") == "session_meta" and type(payload) is dict:
        return payload
    if "type" not in event and type(event.get("id")) is str and "instructions" in event:
        return {k: v for k, v in event.items() if k != "instructions"}
    return None


def meta_refusal(meta: dict[str, Any]) -> str | None:
    """Why Codex would refuse a line 0 that copies ``meta``'s fields (``rules.META_*``), in
    words, or None when it would load it."""
    for name, accepted in rules.META_FIELD_TYPES.items():
        if name not in meta:
            continue
        value = meta[name]
        kind = _json_type(value)
        if kind not in accepted:
            return _refusal(name, kind, value, " or ".join(sorted(accepted)))
        values = rules.META_FIELD_VALUES.get(name)
        if values is not None and value not in values:
            return _refusal(name, kind, value, " or ".join(repr(v) for v in sorted(values)))
    for (name, sub), accepted in rules.META_SUBFIELD_TYPES.items():
        outer = meta.get(name)
        if type(outer) is not dict:
            continue
        value = outer.get(sub)
        kind = _json_type(value) if sub in outer else "missing"
        if kind not in accepted:
            return _refusal(f"{name}.{sub}", kind, value,
                            " or ".join(sorted(accepted - {"missing"})))
    return None


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if type(value) is bool:
        return "boolean"
    if type(value) in (int, float):
        return "number"
    if type(value) is str:
        return "string"
    return "array" if type(value) is list else "object"  # what JSON holds besides


def _refusal(field: str, kind: str, value: Any, accepted: str) -> str:
    shown = "" if kind == "missing" else f" ({repr(value)[:60]})"
    return (f"session_meta field {field!r} is {kind}{shown}, where Codex 0.169.0 reads only "
            f"{accepted}, so it would refuse to resume a rebuild that copies it")


def parse(line: bytes, stats: ReadStats) -> Any:
    """The JSON value of ``line``, or None. A line only lone UTF-16 surrogate escapes make
    unreadable for orjson (``"\\ud83d"``, a half emoji) is read with U+FFFD in their place, as
    the Claude reader does (counted in ``stats.lone_surrogate_lines``)."""
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return tolerant(line, stats) if line.strip() else None


def normalise(event: dict[str, Any]) -> dict[str, Any]:
    """A pre-envelope line (a bare item or ``record_type`` line) in the current envelope."""
    if "payload" in event:
        return event
    if "type" not in event and "record_type" not in event:
        meta = session_meta(orjson.dumps(event)) if "instructions" in event else None
        return event if meta is None else {"type": "session_meta", "payload": meta,
                                           "timestamp": event.get("timestamp")}
    if "record_type" in event:
        return {"type": "record_" + str(event.get("record_type")), "payload": event}
    return {"type": "response_item", "payload": event, "timestamp": event.get("timestamp")}


SESSIONS = "sessions"
ARCHIVED = "archived_sessions"  # ``codex archive`` moves a thread's rollout here


def sessions_root(path: Path) -> Path:
    """The ``sessions`` folder above ``path`` (for a rollout under ``archived_sessions``, the
    ``sessions`` folder beside it: Codex resumes only from there), else the folder ``path``
    is in."""
    for parent in path.parents:
        if parent.name == SESSIONS:
            return parent
        if parent.name == ARCHIVED:
            return parent.parent / SESSIONS
    return path.parent


def lookup_roots(root: Path) -> tuple[Path, ...]:
    """Where a thread named by a ``history_base`` is looked for, in Codex's order: ``root``,
    then, when ``root`` is a ``sessions`` folder, the ``archived_sessions`` beside it (0.169.0
    resolves a fork's parent there too, measured: an archived parent is still read)."""
    if root.name != SESSIONS:
        return (root,)
    return (root, root.parent / ARCHIVED)


def find_thread(thread_id: str, root: Path, exclude: Path, seen: frozenset[Path] = frozenset()
                ) -> Path:
    """The rollout of ``thread_id`` under ``root`` or its ``archived_sessions`` (not
    ``exclude`` nor ``seen``), read from each line 0.

    First by name (``runtime.paths.codex_history_files``: a thread id names the thread's first
    file, a revision id its revision); two files of that name under one folder are refused,
    since which one Codex reads is not theirs to say. A copy whose name says nothing is found
    by line 0: a revision shares its thread id with the file it revises; the newest other
    file wins, never one already read for this history (a revision of a revision).
    """
    found: dict[str, Path] = {}
    for where in lookup_roots(root):
        outcome, path = _find_in(thread_id, where, exclude, seen)
        if outcome == "found":
            return path
        found.setdefault(outcome, path)
    if "cycle" in found:
        raise TranscriptError(
            f"rollout {str(exclude)!r} continues thread {thread_id!r}, whose rollout under "
            f"{str(found['cycle'])!r} is already part of this history: a cycle of "
            "history_base; refusing it"
        )
    if "odd" in found:
        raise TranscriptError(
            f"rollout {str(exclude)!r} continues thread {thread_id!r}, whose rollout "
            f"{str(found['odd'])!r} is not a regular file; refusing a history without its "
            "parent"
        )
    places = " nor ".join(repr(str(where)) for where in lookup_roots(root))
    raise TranscriptError(
        f"rollout {str(exclude)!r} continues thread {thread_id!r}, whose rollout is not "
        f"under {places}; refusing a history without its parent"
    )


def _find_in(thread_id: str, root: Path, exclude: Path, seen: frozenset[Path]
             ) -> tuple[str, Path]:
    """``("found", rollout)``, else why not: ``("cycle", root)``, ``("odd", the named
    path)`` or ``("missing", root)`` (``find_thread`` under one folder)."""
    named = [path for path in codex_history_files(root, thread_id) if path.is_file()]
    odd = None  # a FIFO would block the read forever; a folder or dangling link is no rollout
    if not named:
        odd = next(iter(codex_history_files(root, thread_id)), None)
    if len(named) > 1:
        raise TranscriptError(
            f"rollout {str(exclude)!r} continues thread {thread_id!r}, which "
            f"{len(named)} rollouts under {str(root)!r} claim by name "
            f"({', '.join(repr(str(path)) for path in named)}): which one Codex reads is "
            "not theirs to say; move the copy out of the folder and retry"
        )
    if named and named[0] != exclude and named[0] not in seen:
        return "found", named[0]
    read = bool(named)  # the thread's file is already part of this history
    found: list[tuple[float, Path]] = []  # a renamed copy (the corpus): read each line 0
    for candidate in root.rglob("*.jsonl"):
        if not candidate.is_file():
            continue
        if thread_id not in candidate.name and thread_id.encode() not in first_line(candidate):
            continue
        meta = session_meta(first_line(candidate))
        if meta is None or meta.get("id") != thread_id:
            continue
        if candidate == exclude or candidate in seen:
            read = True
        else:
            found.append((candidate.stat().st_mtime, candidate))
    if found:
        return "found", max(found)[1]
    if read:
        return "cycle", root
    if odd is not None:
        return "odd", odd
    return "missing", root


class Lines:
    """The parsed lines of a rollout with its parents inlined, and what reading them saw."""

    def __init__(self, path: Path, stats: ReadStats, ledger: Ledger) -> None:
        self.path = path
        self.stats = stats
        self.ledger = ledger
        self.meta: dict[str, Any] | None = None
        self.parents: list[str] = []
        self.position = 0
        self.prefilter: Prefilter | None = None  # books own lines that carry no speech
        # a fork's located sink (``readback.Located``): told each line's file, offset, size
        self.locate: Any = None

    def __iter__(self) -> Iterator[tuple[dict[str, Any], int, str]]:
        """``(event, size, where)`` per line: parents' lines first, then the file's own."""
        yield from self._file(self.path, None, 0, own=True)

    def _file(
        self, path: Path, end: int | None, depth: int, own: bool
    ) -> Iterator[tuple[dict[str, Any], int, str]]:
        if depth > PARENT_DEPTH_MAX:
            raise TranscriptError(f"rollout {str(path)!r}: more than {PARENT_DEPTH_MAX} parents")
        try:
            handle = open(path, "rb", buffering=READ_BUFFER)
        except OSError as exc:
            raise TranscriptError(f"rollout {str(path)!r} cannot be read: {exc.strerror}") from exc
        name = path.name
        prefilter = self.prefilter if own else None  # a parent's lines need their ordinals
        locate = self.locate
        ordinal = -1
        offset = 0  # of the next line (the prefilter's loop keeps ``self.position``)
        line = b"\n"
        with handle:
            read = as_opened(handle)  # as it was when opened: Codex may be appending
            source = enumerate(read, 1) if prefilter is None else prefilter.unsettled(
                read, self)
            for lineno, line in source:
                size = len(line)
                offset += size
                if own and prefilter is None:
                    self.position += size
                    self.stats.lines += 1
                event = parse(line, self.stats)
                if type(event) is not dict:
                    self._bad(line, size, lineno, own)
                    continue
                event = normalise(event)
                given = event.get("ordinal")
                ordinal = given if type(given) is int else ordinal + 1
                if lineno == 1 and event.get("type") == "session_meta":
                    meta = event.get("payload")
                    if own and type(meta) is dict:  # else no line 0: Codex refuses it too
                        refusal = meta_refusal(meta)
                        if refusal is not None:
                            raise TranscriptError(f"rollout {str(path)!r}: {refusal}")
                        self.meta = meta
                    base = meta.get("history_base") if type(meta) is dict else None
                    if base is not None:
                        # before the end test: a parent's own lines continue its base's
                        # ordinals, so a cut inside the history it inherited still needs
                        # that history (a fork of a fork, cut before the middle one's turns)
                        yield from self._parent(path, base, depth, end)
                    if not own:
                        continue  # a parent's line 0 describes the parent, not this thread
                elif end is not None and ordinal >= end:
                    break
                if locate is not None:
                    locate.located.line_file = path
                    locate.line_at = offset - size if prefilter is None else self.position - size
                    locate.line_size = size
                yield event, size, f"{name}:{lineno}"
        # the prefilter hands on every malformed line: the last one read is the file's last
        if own and not line.endswith(b"\n") and self.stats.last_malformed == self.stats.lines:
            self.stats.partial_tail = True  # cut mid-write (a parent's cut is a read bound)

    def _bad(self, line: bytes, size: int, lineno: int, own: bool) -> None:
        if not line.strip():
            self.stats.blank_lines += own
            return
        if own:  # the Claude reader's counts: samples, non-UTF-8, the last one (partial tail)
            book_malformed(self.stats, self.ledger, lineno, line)
            return
        self.stats.malformed += 1  # a parent's line numbers are another file's
        self.ledger.malformed_bytes += size

    def _parent(
        self, path: Path, base: Any, depth: int, limit: int | None
    ) -> Iterator[tuple[dict[str, Any], int, str]]:
        """The lines of ``base``'s thread before its end, and before ``limit`` (the end the
        reader of ``path`` was given) when that comes first."""
        thread = base.get("thread_id") if type(base) is dict else None
        end = base.get("end_ordinal_exclusive") if type(base) is dict else None
        if type(thread) is not str or not thread or type(end) is not int or end < 0:
            # a negative end would read none of the parent: a silently shorter history
            raise TranscriptError(
                f"rollout {str(path)!r}: history_base {base!r} has no thread_id or "
                "no non-negative end_ordinal_exclusive"
            )
        if limit is not None:
            end = min(end, limit)
        seen = frozenset(Path(p) for p in self.parents) | {self.path}
        parent = find_thread(thread, sessions_root(self.path), path, seen)
        self.parents.append(str(parent))
        yield from self._file(parent, end, depth + 1, own=False)


class Classifier:
    """The Codex speech allowlist applied line by line (rules as data in ``rules``)."""

    def __init__(self, stats: ReadStats, ledger: Ledger, sink: TurnBuilder | None,
                 hold_copies: bool = True) -> None:
        self.stats = stats
        self.ledger = ledger
        self.sink = sink
        self.trigger: Any = None
        self.ui_user: list[str] = []  # event_msg copies: the audit's second witness
        self.ui_assistant: list[str] = []
        self.hold_copies = hold_copies  # False: copies are counted and paired, not kept
        self.copy_counts = {"user": 0, "assistant": 0}
        # by role, the last text said and the last UI copy not yet paired with each other: a
        # copy equal to its message's text is kept as that same string (held once, not twice)
        self.said: dict[str, str | None] = {}
        self.copied: dict[str, str | None] = {}
        self.unpaired = 0  # non-blank copies that met no text of their message (yet)
        self.last_timestamp: str | None = None

    def event(self, event: dict[str, Any], size: int, where: str) -> None:
        kind = event.get("type")
        payload = event.get("payload")
        payload = payload if type(payload) is dict else {}
        sub = payload.get("type")
        key = f"{kind}:{sub}" if kind in ("response_item", "event_msg") else str(kind)
        self.stats.types[key] += 1
        if kind == "response_item" and sub == "message":
            if self._message(event, payload, size, where):
                self.stats.spoke[key] += 1
            return
        if kind == "response_item":
            self._noise(rules.ITEM_CATEGORY.get(str(sub)), key, size)
        elif kind == "event_msg":
            self._event_msg(payload, sub, key, size)
        else:
            self._noise(rules.LINE_CATEGORY.get(str(kind)), key, size)

    def _noise(self, category: str | None, key: str, size: int) -> None:
        if category is None:
            self.ledger.add_other(key, size)
        else:
            self.ledger.add(category, size)
        self.stats.ignored_reasons[category or "other"] += 1

    def _event_msg(self, payload: dict[str, Any], sub: Any, key: str, size: int) -> None:
        if sub == "task_started":
            attribution = payload.get("turn_attribution")
            self.trigger = attribution.get("turn_trigger") if type(attribution) is dict else None
        if self.sink is not None:  # the UI copies are the audit's; without turns there is none
            self._copy(payload, sub)
        self._noise(rules.EVENT_CATEGORY.get(str(sub)), key, size)

    def _copy(self, payload: dict[str, Any], sub: Any) -> None:
        item = payload.get("item")
        if sub == "item_completed" and type(item) is dict:
            texts = [str(p.get("text")) for p in _parts(item.get("content")) if "text" in p]
            if item.get("type") == "UserMessage":
                self.keep_copy("user", "".join(texts))
            elif item.get("type") == "AgentMessage":
                self.keep_copy("assistant", "".join(texts))
        elif sub == "user_message" and type(payload.get("message")) is str:
            self.keep_copy("user", payload["message"])
        elif sub == "agent_message" and type(payload.get("message")) is str:
            self.keep_copy("assistant", payload["message"])

    def keep_copy(self, role: str, text: str) -> None:
        """Keep a UI copy for the audit; one equal to the text its role said last (and not yet
        paired) is kept as that text's own string, so a paste is held once, not twice. Codex
        writes the user's copy after its message, the assistant's before: ``_speak`` pairs
        that way round."""
        self.copy_counts[role] += 1
        said = self.said.get(role)
        if said is not None and said == text:
            text = said
            self.said[role] = self.copied[role] = None
        else:
            self.copied[role] = text
            self.unpaired += bool(text) and not text.isspace()
        if self.hold_copies:
            (self.ui_user if role == "user" else self.ui_assistant).append(text)

    def _message(
        self, event: dict[str, Any], payload: dict[str, Any], size: int, where: str
    ) -> bool:
        role = payload.get("role")
        metadata = event.get("metadata")
        if type(event.get(MARK_KEY)) is dict and type(payload.get("content")) is list:
            payload = _without_lead(event[MARK_KEY], payload)
        if role == "assistant":
            rebuilt = _raw_mark(event) == "compact_summary"
            if rebuilt or type(metadata) is dict and metadata.get("compaction_output") is True:
                self._summary(event, payload, where, covered=not rebuilt)
                self._noise("compaction", "compaction_summary", size)
                return False
        elif role != "user":
            self._noise("harness_message", f"message:{role}", size)
            return False
        parts = [(p.get("type"), p.get("text")) for p in _parts(payload.get("content"))]
        passthrough = payload.get("internal_chat_message_metadata_passthrough")
        passthrough = passthrough if type(passthrough) is dict else {}
        kinds = passthrough.get("content_item_kinds")
        provenance = passthrough.get("content_item_metadata")
        return self.spoken(
            role, parts, kinds if type(kinds) is list else [],
            provenance if type(provenance) is list else [], _mark(event, role),
            event.get("timestamp"), payload.get("id"), size, where,
        )

    def spoken(
        self, role: str, parts: list[tuple[Any, Any]], kinds: list[Any], provenance: list[Any],
        mark: str | None, stamp: Any, source: Any, size: int, where: str,
    ) -> bool:
        """Book a user or assistant message from its ``(type, text)`` parts; True when it spoke.

        ``kinds`` and ``provenance`` are the passthrough's per-part lists, ``mark`` the kind a
        Threadline rebuild recorded; the typed fast path (``prefilter``) calls this too.
        """
        said: list[tuple[str, str | None]]
        if role == "assistant":
            said = [(text, None) for ptype, text in parts
                    if type(text) is str and _one_of(ptype, rules.ASSISTANT_TEXT_PARTS)]
            kind = "assistant_text"
        else:
            said = self._human_parts(parts, kinds, provenance, mark)
            kind = ""
        said = [(text, k) for text, k in said if text.strip()]
        if not said:
            self._noise("harness_message" if role == "user" else None, f"message:{role}", size)
            return False
        self._split(parts, said, size)
        for index, (text, part_kind) in enumerate(said):
            self._speak(role, mark or part_kind or kind, text, stamp, source, where, index)
        return True

    def _split(
        self, parts: list[tuple[Any, Any]], said: list[tuple[str, str | None]], size: int
    ) -> None:
        """A speech line's bytes: its speech to the conversation, text parts it did not carry
        (environment, AGENTS.md, wrappers) to ``harness_message``, the rest (ids, metadata,
        JSON syntax) to ``other`` as ``message envelope``."""
        spoken = written = 0
        for text, _ in said:
            spoken += _utf8(text)
        for _, text in parts:
            if type(text) is str:
                written += _utf8(text)
        harness = max(min(written, size) - spoken, 0)
        spoken = min(spoken, size)
        self.ledger.conversation_bytes += spoken
        if harness:
            self.ledger.add("harness_message", harness)
        if size > spoken + harness:
            self.ledger.add_other("message envelope", size - spoken - harness)

    def _human_parts(
        self, parts: list[tuple[Any, Any]], kinds: list[Any], provenance: list[Any],
        mark: str | None,
    ) -> list[tuple[str, str | None]]:
        """Each text part a human typed, with its kind (typed / queued / untagged)."""
        human: list[tuple[str, str | None]] = []
        for index, (ptype, text) in enumerate(parts):
            if ptype == "input_image":
                self.ledger.image_seen = True
            if not _one_of(ptype, rules.USER_TEXT_PARTS) or type(text) is not str:
                continue
            said = _typed_text(text, _at(kinds, index), _provenance(_at(provenance, index)))
            if said is None:
                continue
            if mark is not None:
                human.append((said, mark))
            elif _known_human(_at(kinds, index), _at(provenance, index)):
                human.append((said, rules.TRIGGER_KIND.get(str(self.trigger), "typed")))
            else:
                human.append((said, "untagged"))
        return human

    def _speak(
        self, role: str, kind: str, text: str, stamp: Any, source: Any, where: str, index: int
    ) -> None:
        self.stats.speech[kind] += 1
        if self.sink is None:
            return
        copied = self.copied.get(role)
        if copied is not None and copied == text:  # its UI copy, written before it
            text = copied
            self.said[role] = self.copied[role] = None
            self.unpaired -= 1
        else:
            self.said[role] = text
        good = valid_timestamp(stamp)
        if good:
            self.last_timestamp = stamp
        utt = Utterance(
            kind, role, text,
            f"{source}#{index}" if type(source) is str and source else f"{where}#{index}",
            stamp if good else self.last_timestamp, stamp, not good,
            None, None, None, None, source, None,
        )
        if role == "user":
            self.sink.human(utt)
        else:
            self.sink.assistant(utt)

    def _summary(
        self, event: dict[str, Any], payload: dict[str, Any], where: str, covered: bool
    ) -> None:
        if self.sink is None:
            return
        texts = [p["text"] for p in _parts(payload.get("content")) if type(p.get("text")) is str]
        stamp = event.get("timestamp")
        utt = Utterance(
            "compact_summary", "assistant", "".join(texts), f"{where}#0",
            stamp if valid_timestamp(stamp) else self.last_timestamp, stamp,
            not valid_timestamp(stamp), None, None, None, None, payload.get("id"), None,
        )
        self.sink.compact_summary(utt, covered)


def _parts(content: Any) -> list[dict[str, Any]]:
    if type(content) is str:
        return [{"type": "input_text", "text": content}]
    if type(content) is not list:
        return []
    return [p for p in content if type(p) is dict]


def _utf8(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def _one_of(value: Any, options: frozenset[str]) -> bool:
    """``value`` is one of ``options`` (a list or object from a hostile line is not)."""
    return type(value) is str and value in options


def _at(values: list[Any], index: int) -> Any:
    return values[index] if index < len(values) else None


def _provenance(entry: Any) -> Any:
    provenance = entry.get("provenance") if type(entry) is dict else None
    return provenance.get("type") if type(provenance) is dict else None


def _known_human(kind: Any, entry: Any) -> bool:
    provenance = _provenance(entry)
    return _one_of(kind, rules.HUMAN_ITEM_KINDS) or _one_of(provenance, rules.HUMAN_PROVENANCE)


def _typed_text(text: str, kind: Any, provenance: Any) -> str | None:
    """The part's human text (the whole part, or the request under an IDE wrapper), or None."""
    if _one_of(kind, rules.HUMAN_ITEM_KINDS) or _one_of(provenance, rules.HUMAN_PROVENANCE):
        return text
    if type(kind) is str and kind not in rules.UNKNOWN_ITEM_KINDS:
        return None  # the harness said what it wrote
    if provenance is not None:
        return None
    opening = text.lstrip()
    if opening.startswith(rules.HARNESS_OPENINGS):
        return None
    if opening.startswith(rules.IMAGE_OPENINGS) and len(opening) < 200:
        return None
    if opening.startswith(rules.IDE_WRAPPER):
        _, found, request = text.partition(rules.IDE_REQUEST)
        return request.lstrip("\n") if found else None
    return text


def _raw_mark(event: dict[str, Any]) -> Any:
    mark = event.get(MARK_KEY)
    return mark.get("kind") if type(mark) is dict else None


def _without_lead(mark: dict[str, Any], payload: dict[str, Any]) -> dict[str, Any]:
    """A rebuilt line's payload without the leading part Threadline added (stamp, mark)."""
    lead = mark.get("lead")
    content = payload["content"]
    if type(lead) is not str or len(content) < 2 or type(content[0]) is not dict:
        return payload
    if content[0].get("text") != lead:
        return payload
    return {**payload, "content": content[1:]}


def _mark(event: dict[str, Any], role: str) -> str | None:
    """The kind a Threadline rebuild recorded on this line, or None."""
    mark = event.get(MARK_KEY)
    kind = mark.get("kind") if type(mark) is dict else None
    if type(kind) is not str or kind not in rules.SPEECH_KINDS:
        return None
    if (kind in rules.ASSISTANT_KINDS) != (role == "assistant"):
        return None
    return kind


def scan(
    path: Path,
    sink: TurnBuilder | None = None,
    progress: Progress | None = None,
    *,
    fast: bool | None = None,
    hold_copies: bool = True,
) -> tuple[ReadStats, Ledger, Classifier, Lines]:
    """Read ``path`` once (parents inlined) and classify every line.

    ``fast`` (default ``FAST``) lets ``prefilter.Prefilter`` book the lines that carry no
    speech from a typed head; False parses every line, the reference the tests hold the fast
    path to. ``hold_copies`` False: the UI copies are counted and paired, not kept.
    """
    stats = ReadStats()
    ledger = Ledger(rules.NOISE_CATEGORIES)
    classifier = Classifier(stats, ledger, sink, hold_copies)
    lines = Lines(Path(path), stats, ledger)
    if sink is not None and getattr(sink, "located", None) is not None:
        lines.locate = sink  # a fork that may let texts go notes where each came from
    if FAST if fast is None else fast:
        lines.prefilter = Prefilter(classifier, lines.path, lines.locate)
    try:
        total = os.path.getsize(path)
    except OSError as exc:
        raise TranscriptError(f"rollout {str(path)!r} cannot be read: {exc.strerror}") from exc
    step = max(total // 100, 1 << 20)
    mark = step
    with no_cycle_collection():
        for event, size, where in lines:
            if progress is not None and lines.position >= mark:
                progress(lines.position, total)
                mark = lines.position + step
            classifier.event(event, size, where)
    stats.bytes = lines.position
    if progress is not None:
        progress(lines.position, total)
    if lines.meta is None and stats.events:
        raise TranscriptError(f"rollout {str(path)!r} does not start with session_meta")
    if stats.events == 0 and stats.malformed > 0:
        raise TranscriptError(
            f"rollout {str(path)!r} is not a JSONL rollout: "
            f"{stats.malformed} malformed line(s) and no valid line"
        )
    return stats, ledger, classifier, lines
