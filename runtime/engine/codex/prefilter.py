"""The Codex reader's fast path: book every line that cannot carry speech from a typed head.

All but the user and assistant messages of a rollout are noise: token records, turn contexts,
world states, reasoning, tool calls and outputs, developer messages, UI copies.
``Prefilter.unsettled`` runs the loop over the rollout's own lines: it decodes each into
``_Head`` — the envelope ``type``, the payload's ``type``, ``role`` and ``turn_attribution``,
a message's ``content``, ``id``, passthrough, timestamp and metadata, with a legacy copy's
``message`` left as raw bytes and, only when the caller keeps turns (the recognition audit
reads the UI copies), ``item`` typed too (``_CopyHead``); ``msgspec`` skips every other field
without building it — and books it exactly as
``rollout.Classifier.event`` would: its type count, its reason, its bytes. A
``(type, payload type, role)`` key that no rule reads further is counted in the loop (count
and bytes per key, added to the reports once at the end); ``take`` reads the rest: the queue
trigger of ``task_started``, the texts of ``item_completed`` UserMessage/AgentMessage copies
and legacy ``user_message``/``agent_message`` events. User and assistant messages are read
from that same head (one decode per line); one text part that surely speaks is booked by
``_one``, anything else is classified by ``Classifier.spoken``, the code the full parse uses
for them too.

It settles only what it is sure of. A message with a rebuild's carry mark or a compaction
summary, a line without an object ``payload`` or with a non-string type, an odd value where a
typed field is expected, a line msgspec rejects or one that is not valid UTF-8 is handed on
to the full parse (``orjson`` + ``Classifier.event``).
``tests/runtime/engine/test_codex_prefilter.py`` holds both paths to identical ``plan``/``dirty``
JSON and byte-identical forks over the corpus and fuzzed lines. (One known difference stays:
a number beyond the float range in a skipped field, which orjson rejects — as Codex's
serde_json does, so the full parse counts the line malformed — and which Codex never writes.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec

from runtime.engine.codex import rules

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator
    from pathlib import Path

    from runtime.engine.codex.rollout import Classifier, Lines

NULL = msgspec.Raw(b"null")
# Every struct below is made with gc=False: decoded from JSON, it holds only strings, numbers,
# lists and other such structs, so it can never be part of a cycle, and untracked structs are
# cheaper to make (146 k heads per 100 MB rollout: 0.083 -> 0.079 s)


class _Part(msgspec.Struct, gc=False):
    text: str | msgspec.UnsetType = msgspec.UNSET


class _Item(msgspec.Struct, gc=False):
    type: Any = None
    content: list[_Part] | str | None = None  # another shape: the line takes the full parse


class _Attribution(msgspec.Struct, gc=False):
    turn_trigger: Any = None


class _TextPart(msgspec.Struct, gc=False):
    type: Any = None
    text: Any = None


class _Passthrough(msgspec.Struct, gc=False):
    content_item_kinds: Any = None
    content_item_metadata: Any = None


class _Metadata(msgspec.Struct, gc=False):
    compaction_output: Any = None


class _MessageFields(msgspec.Struct, gc=False):
    """What ``Classifier.spoken`` reads of a user or assistant message's payload, typed in the
    head's decode (one decode per message line; reasoning's ``content: null`` fits too)."""

    id: Any = None
    content: list[_TextPart] | str | None = None  # another shape: the line takes the full parse
    internal_chat_message_metadata_passthrough: _Passthrough | None = None


class _Payload(_MessageFields, gc=False):
    type: str | None = None  # any other type: the line takes the full parse
    role: str | None = None  # part of the loop's key: another type takes the full parse
    turn_attribution: _Attribution | None = None  # task_started
    item: msgspec.Raw = NULL  # item_completed (not read without the audit)
    message: msgspec.Raw = NULL  # legacy user_message / agent_message


class _CopyPayload(_MessageFields, gc=False):
    """``_Payload`` when the audit reads the UI copies: ``item`` typed in the same decode."""

    type: str | None = None
    role: str | None = None
    turn_attribution: _Attribution | None = None
    item: _Item | None = None  # another shape: the line takes the full parse
    message: msgspec.Raw = NULL


class _Envelope(msgspec.Struct, gc=False):
    """A message line's envelope fields (read only for user and assistant messages)."""

    timestamp: Any = None
    metadata: _Metadata | None = None  # the compaction summary's compaction_output
    threadline: Any = None  # a rebuild's carry mark: such messages take the full parse


class _Head(_Envelope, gc=False):
    type: str | None = None
    payload: _Payload | None = None


class _CopyHead(_Envelope, gc=False):
    type: str | None = None
    payload: _CopyPayload | None = None


_decode_head = msgspec.json.Decoder(_Head).decode
_decode_copy_head = msgspec.json.Decoder(_CopyHead).decode
_NO_HEAD = _Head()  # what a line msgspec rejects gives: no payload, the full parse decides
_decode_message = msgspec.json.Decoder(str | None).decode
COPIES = ("UserMessage", "AgentMessage")


class Prefilter:
    """Books the lines of a rollout that carry no speech into ``classifier``'s counts."""

    def __init__(self, classifier: Classifier, path: Path, locate: Any = None) -> None:
        self.classifier = classifier
        self.path = path
        self.name = path.name  # the rollout's file name, for an utterance without an item id
        # a fork's located sink: told the file, offset and size of each message line it reads
        self.locate = locate
        # bound once: take runs for nearly every line
        self.types = classifier.stats.types
        self.spoke = classifier.stats.spoke
        self.reasons = classifier.stats.ignored_reasons
        self.noise = classifier.ledger.noise
        self.other_by_type = classifier.ledger.other_by_type
        self.copies = classifier.sink is not None  # only the audit reads the UI copies
        # (type, payload type, role) -> [count, bytes] of the lines the loop booked without a
        # look at any other field; a key is learnt when ``take`` has booked its first line (so
        # every count key is first made in line order, as the full parse makes it: ties in the
        # reports keep that order) and summed into the counts by ``_flush``. User and assistant
        # messages are never learnt.
        self.plain: dict[tuple[str | None, str | None, str | None], list[int]] = {}
        self.rules: list[tuple[str, str, bool, list[int]]] = []
        # event payload type -> [count, bytes] of the events ``_event`` read (trigger, copies):
        # counted the same way once their first line was booked
        self.read: dict[str, list[int]] = {}
        # (type, payload type, role) of such an event -> (its reader, its ``read`` tally):
        # the loop reads the next ones itself (learnt, like ``plain``, after the first)
        self.events: dict[tuple[str | None, str | None, str | None],
                          tuple[Reader, list[int]]] = {}

    def unsettled(self, handle: Iterable[bytes], lines: Lines) -> Iterator[tuple[int, bytes]]:
        """``(number, line)`` of each line of ``handle`` left to the full parse; the rest booked.

        Line 1 (``session_meta``) is always left. ``lines.position`` and ``lines.stats.lines``
        are current at each yield and at the end. The loop books a line whose type pair has
        a plain rule (``self.plain``) itself, hands a user/assistant message to ``_message``
        and a learnt trigger/UI-copy event to its reader (``self.events``) as ``take`` would;
        ``take`` reads the others.
        """
        decode = _decode_copy_head if self.copies else _decode_head
        plain = self.plain
        events = self.events
        message = self._message
        stats = lines.stats
        position = lines.position
        counted = stats.lines
        lineno = 0
        source = iter(handle)
        for line in source:  # line 1 only
            lineno = 1
            position += len(line)
            lines.position = position
            stats.lines = counted + 1
            yield 1, line
            break
        for line in source:
            lineno += 1
            size = len(line)
            position += size
            try:
                head: _Head | _CopyHead = decode(line)
            except (msgspec.DecodeError, RecursionError):  # msgspec recurses into skipped values
                head = _NO_HEAD
            payload = head.payload
            if payload is not None:
                key = (head.type, payload.type, payload.role)
                tally = plain.get(key)
                if tally is not None:
                    if line.isascii() or _utf8(line):
                        tally[0] += 1
                        tally[1] += size
                        continue
                elif key in _MESSAGES:  # what take would do, without its type tests
                    if (line.isascii() or _utf8(line)) and message(
                        head, size, lineno, position - size):
                        continue
                elif (read := events.get(key)) is not None:
                    if (line.isascii() or _utf8(line)) and read[0](self, payload):
                        read[1][0] += 1
                        read[1][1] += size
                        continue
                elif self.take(head, payload, line, size, lineno, position - size):
                    continue
            lines.position = position
            stats.lines = counted + lineno
            yield lineno, line
        lines.position = position
        stats.lines = counted + lineno
        self._flush()

    def _flush(self) -> None:
        """Add what the loop gathered per type pair to the counts (once, at the end)."""
        types, reasons, noise, other_by_type = (
            self.types, self.reasons, self.noise, self.other_by_type)
        for key, category, other, tally in self.rules:
            count, nbytes = tally
            if not count:
                continue
            tally[:] = [0, 0]
            types[key] += count
            reasons[category] += count
            noise[category] += nbytes
            if other:
                other_by_type[key] += nbytes

    def take(self, head: _Head | _CopyHead, payload: _Payload | _CopyPayload, line: bytes,
             size: int, lineno: int, at: int) -> bool:
        """Book ``line`` when it surely carries no speech; False hands it to the full parse."""
        kind = head.type
        if kind is None:
            return False
        if not line.isascii() and not _utf8(line):
            return False  # before any state changes: the full parse counts it malformed
        sub = payload.type
        category: str | None
        if kind == "response_item":
            if sub is None:
                return False
            if sub == "message":
                role = payload.role
                if role == "user" or role == "assistant":
                    return self._message(head, size, lineno, at)
                key, category = "response_item:message", "harness_message"
            else:
                key, category = f"response_item:{sub}", rules.ITEM_CATEGORY.get(sub)
            self._learn(kind, sub, payload.role, key, category)
        elif kind == "event_msg":
            if sub is None:
                return False
            if sub in _READ and (self.copies or sub == "task_started"):
                if not self._event(sub, payload):
                    return False
                tally = self.read.get(sub)
                if tally is not None:
                    tally[0] += 1
                    tally[1] += size
                    self.events[(kind, sub, payload.role)] = (self._reader(sub), tally)
                    return True
                key, category = f"event_msg:{sub}", rules.EVENT_CATEGORY.get(sub)
                tally = self.read.setdefault(sub, [0, 0])
                self._tally(key, category, tally)
                self.events[(kind, sub, payload.role)] = (self._reader(sub), tally)
            else:
                key, category = f"event_msg:{sub}", rules.EVENT_CATEGORY.get(sub)
                self._learn(kind, sub, payload.role, key, category)
        else:
            key, category = kind, rules.LINE_CATEGORY.get(kind)
            self._learn(kind, sub, payload.role, key, category)
        self.types[key] += 1
        if category is None:  # as Ledger.add_other
            self.reasons["other"] += 1
            self.noise["other"] += size
            self.other_by_type[key] += size
        else:
            self.reasons[category] += 1
            self.noise[category] += size
        return True

    def _message(self, message: _Head | _CopyHead, size: int, lineno: int, at: int) -> bool:
        """A user or assistant message of the usual shape (its line at byte ``at``), classified
        from the parts its head decode typed.

        Declined: a rebuild's mark (its lead part and kind), a compaction summary (a field of
        another shape than the typed one never gets here: the head decode rejected it).
        """
        metadata = message.metadata
        if type(message.threadline) is dict or (
            metadata is not None and metadata.compaction_output is True
        ):
            return False
        payload = message.payload
        if payload is None or payload.role is None:
            return False
        if self.locate is not None:
            self.locate.located.line_file = self.path
            self.locate.line_at, self.locate.line_size = at, size
        content = payload.content
        if type(content) is list and len(content) == 1 and self._one(
            message, payload, content[0], size, lineno
        ):
            return True
        if content is None:
            parts: list[tuple[Any, Any]] = []
        elif isinstance(content, str):
            parts = [("input_text", content)]
        else:
            parts = [(part.type, part.text) for part in content]
        passthrough = payload.internal_chat_message_metadata_passthrough
        kinds = passthrough.content_item_kinds if passthrough is not None else None
        provenance = passthrough.content_item_metadata if passthrough is not None else None
        self.types["response_item:message"] += 1
        if self.classifier.spoken(
            payload.role, parts, kinds if type(kinds) is list else [],
            provenance if type(provenance) is list else [], None, message.timestamp,
            payload.id, size, f"{self.name}:{lineno}",
        ):
            self.spoke["response_item:message"] += 1
        return True

    def _one(self, message: _Head | _CopyHead, payload: _Payload | _CopyPayload, part: _TextPart,
             size: int, lineno: int) -> bool:
        """A message of one text part that surely speaks, booked as ``Classifier.spoken`` would.

        False (nothing booked) for any other case: ``spoken`` decides those.
        """
        text = part.text
        if type(text) is not str or not text or text.isspace():  # = not text.strip(), no copy
            return False
        role = payload.role
        ptype = part.type
        if type(ptype) is not str or role is None:
            return False
        if role == "assistant":
            if ptype not in rules.ASSISTANT_TEXT_PARTS:
                return False
            kind = "assistant_text"
        else:  # a user message: its one part typed by the human, as its kinds or provenance say
            if ptype not in rules.USER_TEXT_PARTS:
                return False
            passthrough = payload.internal_chat_message_metadata_passthrough
            if passthrough is None:
                return False
            kinds = passthrough.content_item_kinds
            first = kinds[0] if type(kinds) is list and kinds else None
            if not (type(first) is str and first in rules.HUMAN_ITEM_KINDS):
                entries = passthrough.content_item_metadata
                entry = entries[0] if type(entries) is list and entries else None
                provenance = entry.get("provenance") if type(entry) is dict else None
                said = provenance.get("type") if type(provenance) is dict else None
                if not (type(said) is str and said in rules.HUMAN_PROVENANCE):
                    return False
            kind = rules.TRIGGER_KIND.get(str(self.classifier.trigger), "typed")
        self.types["response_item:message"] += 1
        self.spoke["response_item:message"] += 1
        spoken = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
        spoken = min(spoken, size)  # as Classifier._split: no harness text in a one-part line
        classifier = self.classifier
        classifier.ledger.conversation_bytes += spoken
        if size > spoken:  # as Ledger.add_other
            self.noise["other"] += size - spoken
            self.other_by_type["message envelope"] += size - spoken
        if classifier.sink is None:  # as Classifier._speak without turns
            classifier.stats.speech[kind] += 1
            return True
        source = payload.id  # the line's place names the utterance only without an item id
        where = "" if type(source) is str and source else f"{self.name}:{lineno}"
        classifier._speak(role, kind, text, message.timestamp, source, where, 0)
        return True

    def _learn(self, kind: str, sub: str | None, role: str | None, key: str,
               category: str | None) -> None:
        """Book the next line of these types in the loop (types no rule reads further)."""
        if (kind, sub, role) in self.plain:
            return
        tally: list[int] = [0, 0]
        self.plain[(kind, sub, role)] = tally
        self._tally(key, category, tally)

    def _tally(self, key: str, category: str | None, tally: list[int]) -> None:
        """Have ``_flush`` add ``tally`` to ``key``'s type count and ``category``'s reason/bytes."""
        self.rules.append((key, category or "other", category is None, tally))

    def _event(self, sub: str, payload: _Payload | _CopyPayload) -> bool:
        """Read what the classifier keeps from an event (trigger, UI copy); False to decline."""
        return self._reader(sub)(self, payload)

    def _reader(self, sub: str) -> Reader:
        """The reader of a ``sub`` event in ``_READ`` (the loop keeps it per learnt key): a
        plain function, called with the prefilter — a bound method kept in ``events`` would
        make a cycle that holds the whole read (every turn) until the cyclic GC runs.

        Each changes the state only after every decode succeeded: a declined line is read
        again by the full parse and must not be counted twice.
        """
        if sub == "task_started":
            return Prefilter._trigger
        if not self.copies:
            return _nothing
        if sub == "item_completed":
            return Prefilter._item_copy
        return Prefilter._user_copy if sub == "user_message" else Prefilter._agent_copy

    def _trigger(self, payload: _Payload | _CopyPayload) -> bool:
        attribution = payload.turn_attribution  # typed by the head's decode
        self.classifier.trigger = attribution.turn_trigger if attribution is not None else None
        return True

    def _item_copy(self, payload: _Payload | _CopyPayload) -> bool:
        item = payload.item  # typed by _CopyHead: the audit reads the copies
        if not isinstance(item, _Item) or item.type not in COPIES:
            return True
        content = item.content
        if isinstance(content, str):
            text = content
        elif content is None:
            text = ""
        else:
            text = "".join([p.text for p in content if p.text is not msgspec.UNSET])
        self.classifier.keep_copy("user" if item.type == "UserMessage" else "assistant", text)
        return True

    def _user_copy(self, payload: _Payload | _CopyPayload) -> bool:
        return _legacy_copy(payload, self.classifier, "user")

    def _agent_copy(self, payload: _Payload | _CopyPayload) -> bool:
        return _legacy_copy(payload, self.classifier, "assistant")


def _legacy_copy(payload: _Payload | _CopyPayload, classifier: Classifier, role: str) -> bool:
    """A legacy ``user_message``/``agent_message`` event's text to ``role``'s copies; False
    when its ``message`` is neither a string nor null (the full parse decides)."""
    try:
        message = _decode_message(payload.message)
    except msgspec.DecodeError:
        return False
    if message is not None:
        classifier.keep_copy(role, message)
    return True


def _nothing(prefilter: Prefilter, payload: _Payload | _CopyPayload) -> bool:
    return True


Reader = Callable[[Prefilter, _Payload | _CopyPayload], bool]


_READ = frozenset({"task_started", "item_completed", "user_message", "agent_message"})
# the loop's keys of the messages ``_message`` reads (take's first tests, settled by the key)
_MESSAGES = frozenset({("response_item", "message", "user"),
                       ("response_item", "message", "assistant")})


def _utf8(line: bytes) -> bool:
    """True when ``line`` is valid UTF-8, as orjson requires of every byte of it.

    msgspec does not check the fields it skips, so this runs before a line is settled.
    """
    try:
        line.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
