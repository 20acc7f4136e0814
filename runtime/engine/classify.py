"""The speech allowlist (SPEC §3.2), applied event by event.

``Classifier`` sees every parsed event once. It tells the sink
(``runtime.engine.turns.TurnBuilder``)
what was said — typed prompts, channel messages, queued prompts, slash commands, assistant
text, channel replies, speech tools — and attributes the line's bytes to the dirty ledger.
Everything else is counted by type and by reason. Plain classes keep ``dirty``'s start-up lean.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import orjson

from runtime.engine.dirty import Ledger
from runtime.engine.find import contains
from runtime.engine.speech import (
    MARK_KEY,
    VOICE_ORIGIN,
    VOICE_SUBTYPE,
    WORDS_TOOLS,
    SpeechRules,
    Utterance,
    answers,
    read_mark,
    rejection_feedback,
    tool_words,
    valid_timestamp,
)

if TYPE_CHECKING:
    from runtime.engine.transcript import ReadStats
    from runtime.engine.turns import TurnBuilder as Sink

RECENT_UUIDS = 4096


class Classifier:
    """The speech allowlist applied event by event (SPEC §3.2), feeding a sink and the ledger."""

    def __init__(
        self, rules: SpeechRules, stats: ReadStats, ledger: Ledger, sink: Sink | None
    ) -> None:
        self.rules = rules
        self.stats = stats
        self.ledger = ledger
        self.sink = sink
        # the last event ids, to tell whether a compaction's logical parent is in this file;
        # bounded so memory does not grow with the file (an older parent counts as absent,
        # which only means the summary is carried, marked)
        self.recent_uuids: deque[str] = deque(maxlen=RECENT_UUIDS)
        self.recent_human: deque[str] = deque(maxlen=RECENT_UUIDS)  # human speech lines' ids
        # the ids of the human speech lines and of their parents: a rewind hangs its new prompt
        # on the parent of the prompt it replaces, however far back that is (two entries per
        # human prompt, not per line)
        self.human_ids: set[str] = set()
        self.prompt_parents: set[str] = set()
        self.last_timestamp: str | None = None  # the newest timestamp of the right shape
        self.last_good: str | None = None  # the newest one known to pass the full check
        self.boundary_parent: str | None = None
        self.boundary_seen = False
        self.assistant_seen = False
        self.snapshot_taken = False
        self.line = 0  # the number of the line being classified (set by the reader)
        self.in_result = False  # the user line just read spoke inside a tool result

    def event(self, event: dict[str, Any], size: int) -> None:
        kind = event.get("type")
        if type(kind) is not str:
            kind = "(no type)"
        self.stats.types[kind] += 1
        if self.sink is not None:  # ids matter only when building a candidate
            uuid = event.get("uuid")
            if type(uuid) is str and event.get("isSidechain") is not True:  # main chain only
                self.recent_uuids.append(uuid)
        if event.get("isSidechain") is True:
            self._ignore(kind, "sidechain", "sidechain", size)
        elif kind == "assistant":
            self._assistant(event, size)
        elif kind == "user":
            if self.sink is None:
                self._user(event, size)
            else:
                spoke = self.stats.spoke["user"]
                self._user(event, size)
                # a prompt, not words given in a tool result (those hang on the call)
                if self.stats.spoke["user"] != spoke and not self.in_result:
                    self._rewind(event)
                self.in_result = False
        elif kind == "attachment":
            self._attachment(event, size)
        elif kind == "system":
            subtype = event.get("subtype")
            if subtype == "compact_boundary":
                parent = event.get("logicalParentUuid")
                self.boundary_parent = parent if isinstance(parent, str) else None
                self.boundary_seen = self.boundary_parent in self.recent_uuids
            if subtype != VOICE_SUBTYPE or not self._voice(event, size):
                self._ignore(kind, "system", "system", size)
        else:
            self.ledger.add_other(kind, size)
        if self.sink is not None:
            # recorded after this event is classified: its own (possibly impossible) time must
            # not hide the nearest earlier one from its fallback; a cheap shape test per event,
            # the full check runs where a fallback is used
            stamp = event.get("timestamp")
            if type(stamp) is str and len(stamp) >= 20 and stamp[10] == "T":
                self.last_timestamp = stamp

    def _rewind(self, event: dict[str, Any]) -> None:
        """A human speech line whose parent is not the line before it: the human rewound the
        conversation to that earlier line (Claude Code's double Esc / ``/rewind``) and spoke
        again, and every line between the two is on a branch Claude Code's resume never sends
        (it walks the ``parentUuid`` chain back from the leaf; every ancestor of this line is
        its parent or precedes it). Noted in ``stats.rewinds`` as (parent uuid, this line);
        the reader then reads the file again with those lines muted (``transcript.scan``).
        The parent is found among the recent ids, or, further back, as the parent of an
        earlier human prompt (the one the rewind replaced); a parent found neither way (or
        none) is no rewind, nor is a line written again (its own id already seen): everything
        stays carried."""
        parent = event.get("parentUuid")
        uuid = event.get("uuid")
        own = isinstance(uuid, str)  # appended by ``event`` before this
        if isinstance(uuid, str):
            if uuid in self.human_ids:
                return  # this line written again: the lines hung on it stay on the chain
            self.human_ids.add(uuid)
            self.recent_human.append(uuid)
        if type(parent) is not str:
            return
        earlier = parent in self.prompt_parents
        self.prompt_parents.add(parent)
        recent = self.recent_uuids
        if len(recent) < 1 + own or parent == recent[-1 - own]:
            return
        if parent not in recent:
            if earlier:  # beyond the window: the parent of the prompt this one replaced
                self.stats.rewinds.append((parent, self.line))
            return
        # a rewind abandons a human prompt (the one it replaces): lines between that hold
        # none are no rewind (nothing of the kind seen in the corpus; carried, to be safe)
        ids = list(recent)
        between = ids[ids.index(parent) + 1:len(ids) - own]
        if set(between).intersection(self.recent_human):
            self.stats.rewinds.append((parent, self.line))

    def finish(self) -> None:
        """End of file: nothing more to classify."""

    def _ignore(self, kind: str, reason: str, category: str, size: int) -> None:
        self.stats.ignored_reasons[reason] += 1
        if category == "other":
            self.ledger.add_other(f"{kind}:{reason}", size)
        else:
            self.ledger.add(category, size)

    def _utterance(self, event: dict[str, Any], kind: str, role: str, text: str) -> Utterance:
        utt = self.rules.utterance(event, kind, role, text, self._earlier_timestamp)
        if utt.timestamp_replaced:
            self.stats.timestamps_replaced += 1
        else:
            self.last_good = utt.timestamp
        if not utt.source_uuid and self.sink is not None:  # the audit finds it by its line
            self.sink.uuidless[self.line, role] += 1
        return utt

    def _earlier_timestamp(self) -> str | None:
        """The nearest earlier timestamp that passes the full check (None when there is none)."""
        candidate = self.last_timestamp
        if candidate is not None and candidate != self.last_good and valid_timestamp(candidate):
            self.last_good = candidate
        return self.last_good

    # -- assistant ---------------------------------------------------------------------------
    def _assistant(self, event: dict[str, Any], size: int) -> None:
        message = event.get("message")
        if type(message) is not dict:
            self._ignore("assistant", "no_message", "other", size)
            return
        if event.get("isApiErrorMessage") is True:
            self._ignore("assistant", "api_error", "system", size)
            return
        if message.get("model") == "<synthetic>":
            self._ignore("assistant", "synthetic", "system", size)
            return
        self.assistant_seen = True
        sink = self.sink
        if sink is not None:
            sink.model_activity()
        if MARK_KEY in event and self._carried(event, "assistant", message, size):
            return
        content = message.get("content")
        if type(content) is str:
            content = [{"type": "text", "text": content}]
        if type(content) is not list or not content:
            self._ignore("assistant", "no_content", "other", size)
            return
        if len(content) == 1 and type(content[0]) is dict and self._single(event, content[0], size):
            return
        spoken = []
        categories: list[tuple[str, int]] = []
        for btype, block in _typed(content):
            if btype == "text":
                text = block.get("text")
                if type(text) is str and text and not text.isspace():
                    spoken.append(("assistant_text", text))
                    categories.append(("", 0))
                else:
                    self.stats.ignored_reasons["empty_text"] += 1
                    categories.append(("other", len(text or "") if type(text) is str else 0))
            elif btype == "tool_use":
                said = self.rules.tool_speech(block)
                asked = tool_words(block) if said is None else None
                if said is not None:
                    spoken.append(said)
                    categories.append(("", 0))
                elif asked:  # the model's questions or plan to the human, one item each
                    spoken += [("speech_tool", question) for question in asked]
                    categories.append(("", 0))
                else:
                    categories.append(("tool_use", -1))
            elif btype in ("thinking", "redacted_thinking"):
                categories.append(("thinking", -1))
            elif btype == "image":
                self.ledger.image_seen = True
                categories.append(("image", -1))
            else:
                categories.append(("other", -1))
        self._split_bytes("assistant", content, categories, size, bool(spoken))
        if not spoken:
            self.stats.ignored_reasons["assistant_no_speech"] += 1
            return
        self.stats.spoke["assistant"] += 1
        for kind, text in spoken:
            self.stats.speech[kind] += 1
            if sink is not None:
                sink.assistant(self._utterance(event, kind, "assistant", text))

    def _single(self, event: dict[str, Any], block: dict[str, Any], size: int) -> bool:
        """Fast path for the common one-block line; False hands it to the general path."""
        btype = block.get("type")
        if btype == "text":
            text = block.get("text")
            if type(text) is not str or not text or text.isspace():
                return False
            kind = "assistant_text"
        elif btype == "tool_use":
            said = self.rules.tool_speech(block)
            if said is None and block.get("name") in WORDS_TOOLS:
                return False  # words to the human: the general path carries each
            if said is None:
                self.ledger.noise["tool_use"] += size
                self.stats.ignored_reasons["assistant_no_speech"] += 1
                return True
            kind, text = said
        elif btype == "thinking" or btype == "redacted_thinking":
            self.ledger.noise["thinking"] += size
            self.stats.ignored_reasons["assistant_no_speech"] += 1
            return True
        else:
            return False
        self.ledger.conversation_bytes += size
        self.stats.speech[kind] += 1
        self.stats.spoke["assistant"] += 1
        if self.sink is not None:
            self.sink.assistant(self._utterance(event, kind, "assistant", text))
        return True

    def _split_bytes(
        self,
        kind: str,
        content: list[Any],
        categories: list[tuple[str, int]],
        size: int,
        has_speech: bool,
    ) -> None:
        """Attribute one line's bytes: a single-category line whole, a mixed line by block."""
        ledger = self.ledger
        if len(categories) == 1:
            category = categories[0][0]
            if category == "":
                ledger.conversation_bytes += size
            elif category == "other":
                ledger.add_other(f"{kind}:block", size)
            else:
                ledger.add(category, size)
            return
        rest = size
        for block, (category, known) in zip(content, categories, strict=False):
            if category == "":
                continue
            nbytes = known if known >= 0 else _block_size(block)
            nbytes = min(nbytes, rest)
            rest -= nbytes
            if category == "other":
                ledger.add_other(f"{kind}:block", nbytes)
            else:
                ledger.add(category, nbytes)
        if has_speech:
            ledger.conversation_bytes += rest
        else:
            first = next((c for c, _ in categories if c), "other")
            if first == "other":
                ledger.add_other(f"{kind}:block", rest)
            else:
                ledger.add(first, rest)

    # -- user --------------------------------------------------------------------------------
    def _user(self, event: dict[str, Any], size: int) -> None:
        message = event.get("message")
        content = message.get("content") if type(message) is dict else None
        if type(content) is str:
            texts = [content]
            has_result = False
            image_bytes = 0
        elif type(content) is list:
            texts, has_result, image_bytes = self._user_blocks(content)
        else:
            self._ignore("user", "no_content", "other", size)
            return
        if MARK_KEY in event and event.get("isMeta") is False and self._carried(
            event, "user", message, size
        ):
            return
        if event.get("isCompactSummary") is True:
            self._compact_summary(event, texts, size)
            return
        if has_result:
            self.ledger.add("image", image_bytes)
            said = self._feedback(content, event) if type(content) is list else None
            if said:  # words the human gave when rejecting the call: typed speech
                spoken = sum(map(_utf8_len, said))
                self._ignore("user", "tool_result", "tool_result", size - image_bytes - spoken)
                self._human(event, "typed", said, spoken, 0)
                self.in_result = True
                return
            self._ignore("user", "tool_result", "tool_result", size - image_bytes)
            return
        rules = self.rules
        if not self.snapshot_taken and not self.assistant_seen:
            self._maybe_snapshot(event, texts)
        origin = event.get("origin")
        origin_kind = origin.get("kind") if type(origin) is dict else None
        if origin_kind == "channel" or rules.opens_channel(texts):
            self._human(event, "channel", texts, size, image_bytes)
            return
        if event.get("isMeta") is True:
            self._ignore("user", "meta", "meta_injection", size - image_bytes)
            self.ledger.add("image", image_bytes)
            return
        if origin_kind == "task-notification":
            self._ignore("user", "task_notification", "injected_block", size)
            return
        joined = texts[0] if len(texts) == 1 else "\n".join(texts)
        if contains(joined, "<command-name>"):
            line = rules.slash_line(joined)
            if line is not None:
                self.ledger.conversation_bytes += size
                self.stats.spoke["user"] += 1
                if self.sink is not None:
                    self.sink.slash(self._utterance(event, "slash", "user", line))
                return
        if contains(joined, "<local-command-std"):
            if self.sink is not None:
                self.sink.local_output()
        self._human(event, "typed", texts, size, image_bytes)

    @staticmethod
    def _feedback(content: list[Any], event: dict[str, Any]) -> list[str]:
        """The human's words in tool results: what they said rejecting a call, and their
        answers to the model's questions."""
        said: list[str] = []
        for btype, block in _typed(content):
            if btype != "tool_result":
                continue
            inner = block.get("content")
            if block.get("is_error") is True:
                words = rejection_feedback(inner)
                if words is not None:
                    said.append(words)
            else:
                given = answers(inner, event.get("toolUseResult"))
                if given:
                    said += given
        return said

    def _user_blocks(self, content: list[Any]) -> tuple[list[str], bool, int]:
        texts: list[str] = []
        has_result = False
        image_bytes = 0
        for btype, block in _typed(content):
            if btype == "text":
                text = block.get("text")
                if type(text) is str:
                    texts.append(text)
            elif btype == "tool_result":
                has_result = True
                inner = block.get("content")
                if type(inner) is list:
                    for item in inner:
                        if type(item) is dict and item.get("type") == "image":
                            self.ledger.image_seen = True
                            image_bytes += _block_size(item)
            elif btype == "image":
                self.ledger.image_seen = True
                image_bytes += _block_size(block)
        return texts, has_result, image_bytes

    def _human(
        self, event: dict[str, Any], kind: str, texts: list[str], size: int, image_bytes: int
    ) -> None:
        """Strip injected blocks, judge what is left, and pass each kept block on as speech."""
        rules = self.rules
        kept: list[str] = []
        removed = 0
        interrupted = False
        for text in texts:
            left, cut = rules.strip_injected(text)
            removed += cut
            words = rules.strip_interrupt(left)
            interrupted = interrupted or words is not left
            if words and not words.isspace():
                kept.append(words)
        ledger = self.ledger
        ledger.add("image", image_bytes)
        removed = min(removed, size - image_bytes)
        ledger.add("injected_block", removed)
        rest = size - image_bytes - removed
        if not kept:
            if interrupted:
                self._ignore("user", "interrupt_marker", "other", rest)
            else:
                self._ignore("user", "empty_after_strip", "injected_block", rest)
            return
        reason = rules.not_speech(kept[0])
        if reason is not None:
            self._ignore("user", reason, "other", rest)
            return
        ledger.conversation_bytes += rest
        self.stats.speech[kind] += len(kept)
        self.stats.spoke[event.get("type") or "user"] += 1
        if self.sink is not None:
            for text in kept:
                self.sink.human(self._utterance(event, kind, "user", text))

    def _voice(self, event: dict[str, Any], size: int) -> bool:
        """Words said aloud on a voice call, stored as a ``voice_call_talk`` system line: human
        speech of kind ``voice``, its ``content`` carried verbatim with its ``origin``.

        False (a system line) where Claude Code keeps the line a system row too — content not
        a string, origin not ``voice-call``, a ``fold`` that is not a queued command — and for
        a blank one. (A folded line is a voice prompt queued while the model worked; its words
        are the same speech.) A line that also keeps the message's block list (``blocks``:
        Claude Code then sends that list, not ``content``) is carried only when ``content`` is
        what Claude Code makes of it — its text blocks' texts joined by newlines — so the words
        carried are the words the model was sent; any other is left to the audit, which blocks.
        """
        text = event.get("content")
        origin = event.get("origin")
        if type(text) is not str or type(origin) is not dict or origin.get("kind") != VOICE_ORIGIN:
            return False
        blocks = event.get("blocks")
        if type(blocks) is list and _joined_texts(blocks) != text:
            return False
        if "fold" in event:
            fold = event["fold"]
            if type(fold) is not dict or type(fold.get("command")) is not dict:
                return False
        if not text or text.isspace():
            return False
        self.ledger.conversation_bytes += size
        self.stats.speech["voice"] += 1
        self.stats.spoke["user"] += 1
        if self.sink is not None:
            self.sink.human(self._utterance(event, "voice", "user", text))
        return True

    def _carried(self, event: dict[str, Any], role: str, message: Any, size: int) -> bool:
        """An item an earlier rebuild wrote: its mark says what it carries (False: not ours).

        The leading block the rebuild added (time stamp, summary mark) is dropped; the rest
        was judged when it was first carried and goes on verbatim, with the same kind.
        """
        mark = read_mark(event, role)
        content = message.get("content") if type(message) is dict else None
        if mark is None or type(content) is not list:
            return False
        kind, lead = mark
        texts = [
            b["text"]
            for b in content
            if type(b) is dict and b.get("type") == "text" and type(b.get("text")) is str
        ]
        if lead is not None and texts[:1] == [lead]:
            texts = texts[1:]
        texts = [t for t in texts if t and not t.isspace()]
        if not texts:
            return False
        sink = self.sink
        if kind == "compact_summary":
            self._ignore("user", "compact_summary", "other", size)
            if sink is not None:
                sink.compact_summary(self._utterance(event, kind, role, "\n".join(texts)), False)
            return True
        self.ledger.conversation_bytes += size
        self.stats.spoke[role] += 1
        if kind == "startup_snapshot":
            self.snapshot_taken = True
            if sink is not None:
                sink.snapshot(self._utterance(event, kind, role, texts[0]))
            return True
        if kind != "slash":
            self.stats.speech[kind] += len(texts)
        if sink is not None:
            add = sink.assistant if role == "assistant" else sink.human
            for text in texts:
                add(self._utterance(event, kind, role, text))
        return True

    def _maybe_snapshot(self, event: dict[str, Any], texts: list[str]) -> None:
        for text in texts:
            block = self.rules.snapshot_block(text)
            if block is not None:
                self.snapshot_taken = True
                if self.sink is not None:
                    self.sink.snapshot(self._utterance(event, "startup_snapshot", "user", block))
                return

    def _compact_summary(self, event: dict[str, Any], texts: list[str], size: int) -> None:
        covered = self.boundary_seen
        self._ignore("user", "compact_summary", "other", size)
        text = texts[0] if len(texts) == 1 else "\n".join(texts)
        if self.sink is not None and text and not text.isspace():
            self.sink.compact_summary(
                self._utterance(event, "compact_summary", "user", text), covered
            )
        self.boundary_seen = False
        self.boundary_parent = None

    # -- attachment --------------------------------------------------------------------------
    def _attachment(self, event: dict[str, Any], size: int) -> None:
        body = event.get("attachment")
        if type(body) is not dict or body.get("type") != "queued_command":
            self._ignore("attachment", "attachment", "attachment", size)
            return
        if body.get("commandMode", "prompt") not in ("prompt", None):
            self._ignore("attachment", f"queued_{body.get('commandMode')}", "attachment", size)
            return
        prompt = body.get("prompt")
        if type(prompt) is str:
            texts = [prompt]
        elif type(prompt) is list:
            texts = [
                b["text"]
                for b in prompt
                if type(b) is dict and b.get("type") == "text" and type(b.get("text")) is str
            ]
        else:
            self._ignore("attachment", "queued_without_prompt", "attachment", size)
            return
        self._human(event, "queued", texts, size, 0)


def _typed(content: list[Any]) -> Iterator[tuple[Any, dict[str, Any]]]:
    """Each dict block of a message's content with its ``type`` (other blocks are skipped)."""
    for block in content:
        if type(block) is dict:
            yield block.get("type"), block


def _block_size(block: Any) -> int:
    """Approximate serialised size of one content block without re-serialising big strings."""
    if type(block) is not dict:
        return 0
    btype = block.get("type")
    if btype == "image":
        source = block.get("source")
        data = source.get("data") if type(source) is dict else None
        return (len(data) if type(data) is str else 0) + 80
    if btype == "thinking":
        text = block.get("thinking")
        return _utf8_len(text) + _utf8_len(block.get("signature")) + 40
    if btype == "redacted_thinking":
        return _utf8_len(block.get("data")) + 40
    if btype == "text":
        return _utf8_len(block.get("text")) + 24
    try:
        return len(orjson.dumps(block))
    except TypeError:
        return 0


def _utf8_len(text: Any) -> int:
    if type(text) is not str:
        return 0
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def _joined_texts(blocks: list[Any]) -> str | None:
    """The texts of a block list's text blocks joined by newlines, as Claude Code writes a
    voice line's ``content`` from them (None when a text block's text is not a string)."""
    texts = []
    for block in blocks:
        if type(block) is dict and block.get("type") == "text":
            said = block.get("text")
            if type(said) is not str:
                return None
            texts.append(said)
    return "\n".join(texts)
