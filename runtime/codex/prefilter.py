"""The Codex reader's fast path: book every line that cannot carry speech from a typed head.

All but the user and assistant messages of a rollout are noise: token records, turn contexts,
world states, reasoning, tool calls and outputs, developer messages, UI copies. ``Prefilter.take``
decodes a line into ``_Head`` — the envelope ``type`` and the payload's ``type`` and ``role``,
with ``turn_attribution``, ``item`` and ``message`` left as raw bytes — and books it exactly as
``rollout.Classifier.event`` would: its type count, its reason, its bytes. ``msgspec`` skips
every other field without building it. Only what the classifier reads from a noise line is
decoded further: the queue trigger of ``task_started`` and, when the caller keeps turns (the
recognition audit), the texts of ``item_completed`` UserMessage/AgentMessage copies and legacy
``user_message``/``agent_message`` events.

It settles only what it is sure of. A user or assistant message, a line without an object
``payload`` or with a non-string type, an odd value where a typed field is expected, a line
msgspec rejects or one that is not valid UTF-8 returns False and goes through the full parse
(``orjson`` + ``Classifier.event``). ``tests/runtime/test_codex_prefilter.py`` holds both
paths to identical ``plan``/``dirty`` JSON and byte-identical forks over the corpus and fuzzed
lines. (One known difference stays, as in ``runtime.prefilter``: a number beyond the float
range in a skipped field, which orjson rejects and Codex's serde_json never writes.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from runtime.codex import rules

if TYPE_CHECKING:
    from runtime.codex.rollout import Classifier

NULL = msgspec.Raw(b"null")


class _Payload(msgspec.Struct):
    type: Any = None
    role: Any = None
    turn_attribution: msgspec.Raw = NULL  # task_started
    item: msgspec.Raw = NULL  # item_completed
    message: msgspec.Raw = NULL  # legacy user_message / agent_message


class _Head(msgspec.Struct):
    type: Any = None
    payload: _Payload | None = None


class _Attribution(msgspec.Struct):
    turn_trigger: Any = None


class _Part(msgspec.Struct):
    text: str | msgspec.UnsetType = msgspec.UNSET


class _Item(msgspec.Struct):
    type: Any = None
    content: msgspec.Raw = NULL


_decode_head = msgspec.json.Decoder(_Head).decode
_decode_attribution = msgspec.json.Decoder(_Attribution | None).decode
_decode_item = msgspec.json.Decoder(_Item | None).decode
_decode_content = msgspec.json.Decoder(list[_Part] | str | None).decode
_decode_message = msgspec.json.Decoder(str | None).decode
COPIES = ("UserMessage", "AgentMessage")


class Prefilter:
    """Books the lines of a rollout that carry no speech into ``classifier``'s counts."""

    def __init__(self, classifier: Classifier) -> None:
        self.classifier = classifier
        # bound once: take runs for nearly every line
        self.types = classifier.stats.types
        self.reasons = classifier.stats.ignored_reasons
        self.noise = classifier.ledger.noise
        self.other_by_type = classifier.ledger.other_by_type
        self.copies = classifier.sink is not None  # only the audit reads the UI copies
        self.items: dict[str, tuple[str, str | None]] = {
            sub: (f"response_item:{sub}", cat) for sub, cat in rules.ITEM_CATEGORY.items()}
        self.events: dict[str, tuple[str, str | None]] = {
            sub: (f"event_msg:{sub}", cat) for sub, cat in rules.EVENT_CATEGORY.items()}

    def take(self, line: bytes, size: int) -> bool:
        """Book ``line`` when it surely carries no speech; False hands it to the full parse."""
        try:
            head = _decode_head(line)
        except msgspec.DecodeError:
            return False
        payload = head.payload
        kind = head.type
        if payload is None or type(kind) is not str:
            return False
        if not line.isascii() and not _utf8(line):
            return False  # before any state changes: the full parse counts it malformed
        category: str | None
        if kind == "response_item":
            sub = payload.type
            if type(sub) is not str:
                return False
            if sub == "message":
                role = payload.role
                if role == "user" or role == "assistant":
                    return False
                key, category = "response_item:message", "harness_message"
            else:
                key, category = self.items.get(sub) or self._learn(self.items, kind, sub)
        elif kind == "event_msg":
            sub = payload.type
            if type(sub) is not str:
                return False
            key, category = self.events.get(sub) or self._learn(self.events, kind, sub)
            if sub in _READ and not self._event(sub, payload):
                return False
        else:
            key, category = kind, rules.LINE_CATEGORY.get(kind)
        self.types[key] += 1
        if category is None:  # as Ledger.add_other
            self.reasons["other"] += 1
            self.noise["other"] += size
            self.other_by_type[key] += size
        else:
            self.reasons[category] += 1
            self.noise[category] += size
        return True

    @staticmethod
    def _learn(
        known: dict[str, tuple[str, str | None]], kind: str, sub: str
    ) -> tuple[str, str | None]:
        """The key of a payload type no rule names (booked as other), kept for the next line."""
        known[sub] = (f"{kind}:{sub}", None)
        return known[sub]

    def _event(self, sub: str, payload: _Payload) -> bool:
        """Read what the classifier keeps from an event (trigger, UI copy); False to decline.

        The state changes only after every decode succeeded: a declined line is read again
        by the full parse and must not be counted twice.
        """
        try:
            if sub == "task_started":
                attribution = _decode_attribution(payload.turn_attribution)
                trigger = attribution.turn_trigger if attribution is not None else None
                self.classifier.trigger = trigger
                return True
            if not self.copies:
                return True
            if sub == "item_completed":
                item = _decode_item(payload.item)
                if item is None or item.type not in COPIES:
                    return True
                content = _decode_content(item.content)
                if type(content) is str:
                    text = content
                elif content is None:
                    text = ""
                else:
                    text = "".join([p.text for p in content if p.text is not msgspec.UNSET])
                copies = self.classifier.ui_user if item.type == "UserMessage" else (
                    self.classifier.ui_assistant)
            else:
                message = _decode_message(payload.message)
                if message is None:
                    return True
                text = message
                copies = self.classifier.ui_user if sub == "user_message" else (
                    self.classifier.ui_assistant)
        except msgspec.DecodeError:
            return False
        copies.append(text)
        return True


_READ = frozenset({"task_started", "item_completed", "user_message", "agent_message"})


def _utf8(line: bytes) -> bool:
    """True when ``line`` is valid UTF-8, as orjson requires of every byte of it.

    msgspec does not check the fields it skips, so this runs before a line is settled.
    """
    try:
        line.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
