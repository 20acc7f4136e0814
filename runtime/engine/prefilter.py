"""The reader's fast path: settle lines that cannot carry speech without building their content.

98–99 % of a real transcript's bytes are noise: tool results, base64 images, thinking, tool
calls, progress lines. ``Prefilter.take`` decodes a line into a typed view holding only the
fields the speech allowlist reads to rule speech out (``msgspec`` skips every other field
without building it), and books the line exactly as ``runtime.engine.classify.Classifier`` would.
It settles only what it is sure of; everything else — any line that could hold speech, an
odd value, a compaction boundary, a line msgspec rejects — returns False and goes through
the full parse (``orjson`` + ``Classifier.event``). ``tests/runtime/engine/test_prefilter.py``
holds the two paths to identical results over the corpus and fuzzed lines.

Settled here: sidechain lines; assistant lines that are an API error, ``<synthetic>``, or a
single thinking block or non-speech tool call; user lines answering a tool call (images in
them counted apart); attachments other than queued prompts; system lines other than
compaction boundaries and voice-call talk; every other event type.

What it buys (issue 13, in-process CPU against the reference on 100 MB files): most where
the noise is structured (tool results with nested ``toolUseResult`` objects: 0.21 s -> 0.17 s),
little where it is one long string orjson copies at memory speed (base64 images: 0.090 s ->
0.088 s), and nothing on files of many small speech lines, which it declines after a decode.

Validity: orjson rejects invalid UTF-8 anywhere in a line, which msgspec does not check in
the fields it skips, so a non-ASCII line is settled here only after it decodes as UTF-8.
A number beyond the double range in a skipped field, which orjson rejects, is read by the
full parse's fallback as Claude Code's ``JSON.parse`` reads it (``transcript.tolerant``), so
both paths book that line the same way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from runtime.engine.speech import ANSWERED_BYTES, FEEDBACK_BYTES, VOICE_SUBTYPE, WORDS_TOOLS

# how far into a result's raw content its opening words are looked for (a string, or a list
# whose first text block opens it: ``[{"type":"text","text":"User has answered…``)
ANSWER_PEEK = 96

if TYPE_CHECKING:
    from runtime.engine.classify import Classifier

PEEK = 4096  # lines longer than this are first guessed from their first PEEK bytes
NULL = msgspec.Raw(b"null")


class _Source(msgspec.Struct, gc=False):
    data: Any = None


class _Inner(msgspec.Struct, gc=False):
    """One item of a tool result's content (only images count)."""

    type: Any = None
    source: _Source | None = None


class _Block(msgspec.Struct, gc=False):
    type: Any = None
    name: Any = None  # tool_use
    content: msgspec.Raw = NULL  # tool_result: decoded further only when it is a list
    is_error: Any = None  # tool_result: a rejected call's result may hold the human's words
    source: _Source | None = None  # image


class _Message(msgspec.Struct, gc=False):
    content: list[_Block] | str | None = None
    model: Any = None


class _Attachment(msgspec.Struct, gc=False):
    type: Any = None


class _Head(msgspec.Struct, gc=False):
    type: Any = None
    isSidechain: Any = None  # noqa: N815 - the transcript's own key
    uuid: Any = None
    timestamp: Any = None
    subtype: Any = None
    isApiErrorMessage: Any = None  # noqa: N815
    isCompactSummary: Any = None  # noqa: N815
    message: _Message | None = None
    attachment: _Attachment | None = None


_decode_head = msgspec.json.Decoder(_Head).decode
_decode_inner = msgspec.json.Decoder(list[_Inner]).decode


class Prefilter:
    """Books the lines that cannot carry speech into ``classifier``'s stats, ledger and sink."""

    def __init__(self, classifier: Classifier) -> None:
        self.classifier = classifier
        rules = classifier.rules
        self.reply_tool = rules.reply_tool
        self.speech_tools = rules.speech_tools
        self.speaks: dict[str, bool] = {}  # tool name -> may be speech (memo)
        # bound once: _book runs for nearly every line
        self.types = classifier.stats.types
        self.reasons = classifier.stats.ignored_reasons
        self.noise = classifier.ledger.noise
        self.other_by_type = classifier.ledger.other_by_type
        self.tracking = classifier.sink is not None
        self.recent_uuids = classifier.recent_uuids
        self.kind = ""  # the ``type`` of the line settled last (for the audit's ``wants``)
        # an assistant line's decoded message content (blocks with ``type`` and ``name``), for
        # the same reader: set for each assistant line settled, None when it had no message
        self.content: Any = None
        # (type, reason, category) -> [lines, bytes] booked since its first line; added to
        # the counts by ``flush``. The first line of a key is booked at once, so every count
        # key is still made in line order (the reports break ties by that order).
        self.tallies: dict[tuple[str, str | None, str | None], list[int]] = {}
        self.others: dict[str, list[int]] = {}  # type -> its (type, None, None) tally

    def take(self, line: bytes, size: int) -> bool:
        """Book ``line`` when it surely carries no speech; False hands it to the full parse."""
        if size > PEEK and _looks_spoken(line):
            return False
        try:
            head = _decode_head(line)
        except (msgspec.DecodeError, RecursionError):  # msgspec recurses into skipped values
            return False
        kind = head.type
        if type(kind) is not str:
            kind = "(no type)"
        if head.isSidechain is True:
            reason: str | None = "sidechain"
            category: str | None = "sidechain"
            message = head.message
            self.content = message.content if message is not None else None
        elif kind == "assistant":
            return self._assistant(head, line, size)
        elif kind == "user":
            return self._tool_result(head, line, size)
        elif kind == "attachment":
            body = head.attachment
            if body is not None and body.type == "queued_command":
                return False
            reason = category = "attachment"
        elif kind == "system":
            subtype = head.subtype
            if subtype == "compact_boundary" or subtype == VOICE_SUBTYPE:
                return False
            reason = category = "system"
        else:  # a type no rule reads further (progress, snapshots, ...): _book, inline
            if not (line.isascii() or _utf8(line)):
                return False
            self.kind = kind
            tally = self.others.get(kind)
            if tally is not None:
                tally[0] += 1
                tally[1] += size
            else:
                self._count(kind, None, None, 1, size)
                self.others[kind] = self.tallies[kind, None, None] = [0, 0]
            if self.tracking:
                self._track(head)
            return True
        if not (line.isascii() or _utf8(line)):
            return False
        self._book(head, kind, size, reason, category)
        return True

    def _book(
        self, head: _Head, kind: str, size: int, reason: str | None, category: str | None
    ) -> None:
        """What ``Classifier.event`` records for a line without speech: counts, ids, bytes.

        ``category`` None: an event type the allowlist does not know, booked as other.
        """
        self.kind = kind
        tally = self.tallies.get((kind, reason, category))
        if tally is not None:
            tally[0] += 1
            tally[1] += size
        else:
            self._count(kind, reason, category, 1, size)
            self.tallies[kind, reason, category] = [0, 0]
        if self.tracking:
            self._track(head)

    def _track(self, head: _Head) -> None:
        """The ids and time stamp ``Classifier.event`` records when a candidate is built."""
        uuid = head.uuid
        if type(uuid) is str and head.isSidechain is not True:  # main chain only
            self.recent_uuids.append(uuid)
        stamp = head.timestamp
        if type(stamp) is str and len(stamp) >= 20 and stamp[10] == "T":
            self.classifier.last_timestamp = stamp

    def _count(
        self, kind: str, reason: str | None, category: str | None, lines: int, size: int
    ) -> None:
        self.types[kind] += lines
        if reason is not None:
            self.reasons[reason] += lines
        if category is None:  # as Ledger.add_other
            self.noise["other"] += size
            self.other_by_type[kind] += size
        else:
            self.noise[category] += size

    def flush(self) -> None:
        """Add the lines booked per key to the counts (the reader calls it after its loop)."""
        for (kind, reason, category), (lines, size) in self.tallies.items():
            if lines:
                self._count(kind, reason, category, lines, size)
        self.tallies.clear()
        self.others.clear()

    def _assistant(self, head: _Head, line: bytes, size: int) -> bool:
        message = head.message
        if message is None:
            return False
        self.content = message.content
        if head.isApiErrorMessage is True or message.model == "<synthetic>":
            if not (line.isascii() or _utf8(line)):
                return False
            reason = "api_error" if head.isApiErrorMessage is True else "synthetic"
            self._book(head, "assistant", size, reason, "system")
            return True
        content = message.content
        if type(content) is not list or len(content) != 1:
            return False
        block = content[0]
        btype = block.type
        if btype == "thinking" or btype == "redacted_thinking":
            category = "thinking"
        elif btype == "tool_use" and not self._may_speak(block.name):
            category = "tool_use"
        else:
            return False
        if not (line.isascii() or _utf8(line)):
            return False
        c = self.classifier
        c.assistant_seen = True
        if c.sink is not None:
            c.sink.model_activity()
        self._book(head, "assistant", size, "assistant_no_speech", category)
        return True

    def _may_speak(self, name: Any) -> bool:
        """True when a tool of this name can be a channel reply or a speech tool."""
        if type(name) is not str:
            return False
        speaks = self.speaks.get(name)
        if speaks is None:
            speaks = self.speaks[name] = (
                self.reply_tool.search(name) is not None or name in self.speech_tools
                or name in WORDS_TOOLS
            )
        return speaks

    def _tool_result(self, head: _Head, line: bytes, size: int) -> bool:
        """A user line answering a tool call: its images apart, the rest tool_result noise."""
        message = head.message
        content = message.content if message is not None else None
        if type(content) is not list or head.isCompactSummary is True:
            return False
        has_result = False
        image_bytes = 0
        images = False
        for block in content:
            btype = block.type
            if btype == "tool_result":
                has_result = True
                inner = block.content
                # the human's words when they rejected the call (escaped or not, the mark's
                # own words are ASCII letters; a raw search finds every spelling but \u-escapes)
                if block.is_error is True:
                    raw = bytes(inner)  # an error result: mostly short
                    if b"\\u" in raw or any(mark in raw for mark in FEEDBACK_BYTES):
                        return False
                else:  # the human's answers to the model's questions open their result
                    opening = bytes(memoryview(inner)[:ANSWER_PEEK])
                    if b"\\u" in opening or any(o in opening for o in ANSWERED_BYTES):
                        return False
                # a memoryview equals the bytes it views; typeshed has no overlap for that
                if memoryview(inner)[:1] == b"[":  # type: ignore[comparison-overlap]
                    try:
                        items = _decode_inner(inner)
                    except (msgspec.DecodeError, RecursionError):
                        return False
                    for item in items:
                        if item.type == "image":
                            images = True
                            image_bytes += _image_size(item.source)
            elif btype == "image":
                images = True
                image_bytes += _image_size(block.source)
        if not has_result or not (line.isascii() or _utf8(line)):
            return False
        ledger = self.classifier.ledger
        if images:
            ledger.image_seen = True
        ledger.add("image", image_bytes)
        self._book(head, "user", size - image_bytes, "tool_result", "tool_result")
        return True


def _looks_spoken(line: bytes) -> bool:
    """A guess from a long line's first bytes that it holds speech, to spare it a decode here.

    Only the order of work depends on it: a wrong guess either way gives the same result,
    since the full parse handles every line and this module settles only what it is sure of.
    """
    if line.find(b'"type":"user"', 0, PEEK) >= 0:
        return line.find(b'"tool_use_id"', 0, PEEK) < 0
    return line.find(b'"content":[{"type":"text"', 0, PEEK) >= 0


def _utf8(line: bytes) -> bool:
    """True when ``line`` is valid UTF-8, as orjson requires of every byte of it.

    msgspec does not check the fields it skips, so this runs before a line is settled.
    """
    if line.isascii():
        return True
    try:
        line.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _image_size(source: _Source | None) -> int:
    """``runtime.engine.classify._block_size`` of an image block: its data length plus 80."""
    data = source.data if source is not None else None
    return (len(data) if type(data) is str else 0) + 80
