"""What counts as speech, as data: compiled rules from the config and the utterance record.

(Plain classes and a NamedTuple rather than dataclasses: this module is on the start-up path
of ``plan``/``dirty``, whose speed target leaves little room for class generation.)

``SpeechRules`` holds everything the classifier needs that the config can change — injected
tags, reply tools, chat ids, speech tools — compiled once. ``Utterance`` is one carried piece
of speech with the source fields the candidate keeps.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, NamedTuple

from runtime.config import RebuildConfig
from runtime.engine import find, tags

HUMAN_KINDS: tuple[str, ...] = ("typed", "channel", "queued", "slash", "voice")
# Words said aloud on a voice call: Claude Code (2.1.328) stores them as a system line of this
# subtype with ``origin: {kind: "voice-call"}`` and loads that back as a user message from a
# non-user source (never as typed intent); a rebuild carries them in the same form
VOICE_SUBTYPE = "voice_call_talk"
VOICE_ORIGIN = "voice-call"
ASSISTANT_KINDS: tuple[str, ...] = ("assistant_text", "channel_reply", "speech_tool")
SPEECH_KINDS: tuple[str, ...] = HUMAN_KINDS + ASSISTANT_KINDS

SNAPSHOT_MARKERS: tuple[str, ...] = ("# claudeMd", "CLAUDE.md", "MEMORY.md", "# memory")
# the definitions; runtime.engine.tags applies them in linear time (tests hold them equal)
_SYSTEM_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>", re.S)
_COMMAND_NAME = re.compile(r"<command-name>\s*(.*?)\s*</command-name>", re.S)
_COMMAND_ARGS = re.compile(r"<command-args>(.*?)</command-args>", re.S)
_COMMAND_TAGS = re.compile(r"<(command-(?:name|message|args))>.*?</\1>", re.S)
_COMMAND_TAG_NAMES = ("command-name", "command-message", "command-args")  # _COMMAND_TAGS' order
_ISO = re.compile(
    r"\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])T(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d"
    r"(?:\.\d{1,9})?(?:Z|[+-](?:[01]\d|2[0-3]):?[0-5]\d)"
)
_INTERRUPT_PREFIX = "[Request interrupted by user"
_INTERRUPT = re.compile(r"\[Request interrupted by user[^\]\n]*\]?\s*")
_BASH_ECHO = ("<bash-input>", "<bash-stdout>", "<bash-stderr>")
# The model's questions to the human (Claude Code's AskUserQuestion tool) and the human's
# answers: the questions are the tool call's ``questions[].question``, the answers come back in
# a tool result opening with one of these (2.0.x / 2.1.328) and, word for word, in the line's
# ``toolUseResult.answers`` (question -> answer); Claude Code sends both to the model
ASK_TOOL = "AskUserQuestion"
ANSWERED = ("User has answered your questions:", "The user answered:")
ANSWERED_BYTES = tuple(b'"' + opening.encode() for opening in ANSWERED)
# (and the plan the model shows for approval: ExitPlanMode's ``plan``, 2.0.x)
PLAN_TOOL = "ExitPlanMode"
WORDS_TOOLS = (ASK_TOOL, PLAN_TOOL)
# A tool call the human rejected with words ("No" + Tab to amend): Claude Code writes them in
# the call's error result, which opens with REJECTED, after one of FEEDBACK_MARKS (2.1.328 /
# 2.0.37), and sends them to the model
REJECTED = "The user doesn't want to proceed with this tool use."
FEEDBACK_MARKS = ("To tell you how to proceed, the user said:\n",
                  "The user provided the following reason for the rejection:")
FEEDBACK_BYTES = tuple(mark.rstrip("\n").encode() for mark in FEEDBACK_MARKS)


def tool_words(block: dict[str, Any]) -> list[str]:
    """The model's words to the human in a tool call, each verbatim: the questions of a
    question tool, the plan it shows for approval (none: not such a call)."""
    arguments = block.get("input")
    if type(arguments) is not dict:
        return []
    name = block.get("name")
    if name == PLAN_TOOL:
        plan = arguments.get("plan")
        return [plan] if type(plan) is str and plan.strip() else []
    asked = arguments.get("questions")
    if name != ASK_TOOL or type(asked) is not list:
        return []
    return [q["question"] for q in asked if type(q) is dict
            and type(q.get("question")) is str and q["question"].strip()]


def answers(content: Any, tool_use_result: Any) -> list[str] | None:
    """The human's answers in a question tool's result (None: not such a result).

    ``content`` is the result block's content, ``tool_use_result`` its line's
    ``toolUseResult``; the answers are its ``answers`` values, in the questions' order."""
    if type(content) is list:
        content = next((b.get("text") for b in content
                        if type(b) is dict and b.get("type") == "text"), None)
    if type(content) is not str or not content.startswith(ANSWERED):
        return None
    given = tool_use_result.get("answers") if type(tool_use_result) is dict else None
    if type(given) is not dict:
        return []
    return [a for a in given.values() if type(a) is str and a and not a.isspace()]


def rejection_feedback(content: Any) -> str | None:
    """The human's words in a rejected tool call's result ``content``, or None."""
    if type(content) is list:  # the result as blocks: their texts, as Claude Code joins them
        content = "\n".join(b["text"] for b in content if type(b) is dict
                            and b.get("type") == "text" and type(b.get("text")) is str)
    if type(content) is not str or not content.startswith(REJECTED):
        return None  # (a failed command's output that quotes the mark is not the human's)
    for mark in FEEDBACK_MARKS:
        at = content.find(mark)
        if at >= 0:
            words = content[at + len(mark):].lstrip(" ")
            return words if words.strip() else None
    return None
# Every item a rebuild writes says what it carries under this top-level key (Claude Code loads
# the event and ignores the key; it never reaches the model): ``{"kind": KIND}``, plus
# ``"lead": TEXT`` when the item opens with a block Threadline added (a turn's time stamp or
# the compaction-summary mark). The next rebuild reads it back, so the kind survives and the
# added block is never mistaken for speech.
MARK_KEY = "threadline"
CARRIED_KINDS: frozenset[str] = frozenset(
    (*HUMAN_KINDS, *ASSISTANT_KINDS, "startup_snapshot", "compact_summary")
)


def carry_mark(kind: str, lead: str | None) -> dict[str, str]:
    """The mark a rebuilt item carries under ``MARK_KEY``."""
    return {"kind": kind, "lead": lead} if lead else {"kind": kind}


def read_mark(event: dict[str, Any], role: str) -> tuple[str, str | None] | None:
    """``(kind, lead)`` of an item a rebuild wrote, or None when ``event`` carries no valid mark.

    A mark whose kind does not fit the role, or whose lead is not a string, is not ours.
    """
    mark = event.get(MARK_KEY)
    if type(mark) is not dict:
        return None
    kind = mark.get("kind")
    if type(kind) is not str or kind not in CARRIED_KINDS:
        return None
    if (kind in ASSISTANT_KINDS) != (role == "assistant"):
        return None
    lead = mark.get("lead")
    if lead is not None and type(lead) is not str:
        return None
    return kind, lead


def looks_like_timestamp(value: Any) -> bool:
    """The cheap check used on every event: the ISO-8601 shape with plausible field ranges."""
    return type(value) is str and _ISO.fullmatch(value) is not None


def valid_timestamp(value: Any) -> bool:
    """True when ``value`` is an ISO-8601 date-time string with a zone (what Claude Code writes)."""
    if type(value) is not str or _ISO.fullmatch(value) is None:
        return False
    if value[8:10] <= "28" and "0001" < value[:4] < "9999":
        return True  # the pattern bounds every field; only late days and edge years vary
    try:
        datetime.fromisoformat(value).astimezone(UTC)  # the turn stamp shifts it to UTC
    except (ValueError, OverflowError):
        return False
    return True


class Utterance(NamedTuple):
    """One piece of speech to carry, with the source fields the candidate keeps (immutable)."""

    kind: str
    role: str
    text: str
    source_uuid: str
    timestamp: str | None
    source_timestamp: Any
    timestamp_replaced: bool
    cwd: Any
    version: Any
    git_branch: Any
    user_type: Any
    message_id: Any
    model: Any
    origin: Any = None  # a channel message's or voice line's ``origin`` ({kind: …}), kept


class SpeechRules:
    """Compiled speech rules of one config (read-only after construction)."""

    __slots__ = (
        "injected",
        "injected_names",
        "reply_tool",
        "reply_argument",
        "reply_chat_ids",
        "speech_tools",
        "_is_reply",
    )

    def __init__(
        self,
        injected: re.Pattern[str],
        injected_names: tuple[str, ...],
        reply_tool: re.Pattern[str],
        reply_argument: str,
        reply_chat_ids: frozenset[str],
        speech_tools: dict[str, tuple[str, ...]],
    ) -> None:
        self.injected = injected
        self.injected_names = injected_names  # the pattern's alternatives, in its order
        self.reply_tool = reply_tool
        self.reply_argument = reply_argument
        self.reply_chat_ids = reply_chat_ids
        self.speech_tools = speech_tools
        self._is_reply: dict[str, bool] = {}  # tool name -> matches reply_tool (memo)

    @classmethod
    def from_config(cls, rebuild: RebuildConfig) -> SpeechRules:
        return cls(
            injected=injected_pattern(rebuild.injected_tags),
            injected_names=injected_names(rebuild.injected_tags),
            reply_tool=rebuild.reply_tool_regex,
            reply_argument=rebuild.reply_tool_argument,
            reply_chat_ids=frozenset(rebuild.reply_chat_ids),
            speech_tools={tool.name: tool.keys for tool in rebuild.speech_tools},
        )

    def strip_injected(self, text: str) -> tuple[str, int]:
        """Remove injected blocks (each with the one line break right after it, if any).

        Returns the kept text and the UTF-8 bytes removed. Everything else, whitespace
        included, stays byte for byte: the block and its own line break are the injection.
        What the human pasted (Claude Code 2.1.328 wraps a long paste in
        ``<pasted_content id="…">…</pasted_content id="…">``) is theirs whatever tags it
        holds — a pasted transcript's ``<system-reminder>`` is sent to the model as pasted —
        so nothing inside a paste is removed.
        """
        at = text.find("<")
        if at < 0:
            return text, 0
        if find.contains(text, PASTE_OPEN):
            return self._strip_around_pastes(text)
        return self._strip_from(text, at)

    def _strip_around_pastes(self, text: str) -> tuple[str, int]:
        pieces: list[str] = []
        removed = 0
        start = 0
        for begin, end in pastes(text):
            kept, cut = self._strip_from(text[start:begin], 0)
            pieces += (kept, text[begin:end])
            removed += cut
            start = end
        kept, cut = self._strip_from(text[start:], 0)
        pieces.append(kept)
        return "".join(pieces), removed + cut

    def _strip_from(self, text: str, at: int) -> tuple[str, int]:
        """``strip_injected`` of a text with no paste, its first ``<`` (if any) at ``at``."""
        at = text.find("<", at)
        if at < 0:
            return text, 0
        # the pattern is tried at each "<" (every match starts with one; a search tries the
        # positions in the same order), not run over the whole text: a 46 KB paste with a
        # few "<" in it, 13 us -> 3 us; a text with many falls back to the plain ``subn``
        match = self.injected.match
        pieces: list[str] = []
        start = 0
        for _ in range(find.TRIES):
            found = match(text, at)
            if found is not None:
                pieces.append(text[start:at])
                start = found.end()
                at = text.find("<", start)
            else:
                at = text.find("<", at + 1)
            if at < 0:
                break
        else:
            return self._strip_all(text)
        if not pieces:
            return text, 0
        pieces.append(text[start:])
        kept = "".join(pieces)
        return kept, _utf8_len(text) - _utf8_len(kept)

    def _strip_all(self, text: str) -> tuple[str, int]:
        """``strip_injected`` as the pattern's ``subn`` over the whole text, in linear time
        (``runtime.engine.tags``: the regex itself is quadratic in unclosed tags)."""
        kept, count = tags.injected_subn(text, self.injected_names)
        if not count:
            return text, 0
        return kept, _utf8_len(text) - _utf8_len(kept)

    def opens_channel(self, texts: list[str]) -> bool:
        """True when the (stripped) text opens with a ``<channel source=…>`` envelope."""
        if not texts:
            return False
        first = texts[0]
        if first.lstrip().startswith("<channel source="):
            return True
        if not find.contains(first, "<channel source=", 8192):
            return False
        return self.strip_injected(first)[0].lstrip().startswith("<channel source=")

    def slash_line(self, text: str) -> str | None:
        """``/name args`` from a slash-command event, or None when it names no command.

        Claude Code writes a slash command as its command tags alone; a text with words
        beside them is a human quoting the tags, judged as typed text (its words kept).
        """
        command = tags.first_inner(text, "<command-name>", "</command-name>")
        if command is None or not command.strip():
            return None
        if tags.exact_pairs_sub(self.strip_injected(text)[0], _COMMAND_TAG_NAMES).strip():
            return None
        command = command.strip()
        if not command.startswith("/"):
            command = "/" + command
        args = tags.first_inner(text, "<command-args>", "</command-args>")
        if args is not None and args.strip():
            return f"{command} {args}"
        return command

    def strip_interrupt(self, text: str) -> str:
        """``text`` without a leading ``[Request interrupted by user…]`` marker (strip, then
        judge: the human's words after the marker are speech, SPEC §3.2-5)."""
        if not text.startswith(_INTERRUPT_PREFIX):
            return text
        match = _INTERRUPT.match(text)
        return text[match.end():] if match else ""

    def not_speech(self, text: str) -> str | None:
        """The reason a kept human text is still not speech (SPEC §3.2-5), or None."""
        if text.startswith(_INTERRUPT_PREFIX):
            return "interrupt_marker"
        if text.lstrip().startswith(_BASH_ECHO):
            return "bash_echo"
        return None

    def snapshot_block(self, text: str) -> str | None:
        """The environment/memory ``<system-reminder>`` block of a start-up event, verbatim."""
        if not find.contains(text, "<system-reminder>"):  # each read-back user line asks
            return None
        for start, end in tags.blocks(text, "<system-reminder>", "</system-reminder>"):
            block = text[start:end]
            if any(marker in block for marker in SNAPSHOT_MARKERS):
                return block
        return None

    def tool_speech(self, block: dict[str, Any]) -> tuple[str, str] | None:
        """``(kind, text)`` when a tool_use block is a channel reply or a speech tool."""
        name = block.get("name")
        if type(name) is not str:
            return None
        arguments = block.get("input")
        if type(arguments) is not dict:
            return None
        is_reply = self._is_reply.get(name)
        if is_reply is None:
            is_reply = self._is_reply[name] = self.reply_tool.search(name) is not None
        if is_reply:
            text = arguments.get(self.reply_argument)
            if type(text) is str and text and not text.isspace() and self._chat_allowed(arguments):
                return "channel_reply", text
            return None
        keys = self.speech_tools.get(name)
        if keys is None:
            return None
        value: Any = arguments
        for key in keys:
            value = value.get(key) if type(value) is dict else None
        if type(value) is str and value and not value.isspace():
            return "speech_tool", value
        return None

    def _chat_allowed(self, arguments: dict[str, Any]) -> bool:
        if not self.reply_chat_ids:
            return True
        chat = arguments.get("chat_id")
        return chat is not None and str(chat) in self.reply_chat_ids

    def utterance(
        self,
        event: dict[str, Any],
        kind: str,
        role: str,
        text: str,
        fallback: Callable[[], str | None],
    ) -> Utterance:
        """An utterance of ``event``; an invalid timestamp is replaced by ``fallback()``."""
        raw = event.get("timestamp")
        good = valid_timestamp(raw)
        message = event.get("message")
        message = message if type(message) is dict else {}
        uuid = event.get("uuid")
        return Utterance(  # positional: this runs once per carried utterance
            kind,
            role,
            text,
            uuid if type(uuid) is str else "",
            raw if good else fallback(),
            raw,
            not good,
            event.get("cwd"),
            event.get("version"),
            event.get("gitBranch"),
            event.get("userType"),
            message.get("id"),
            message.get("model"),
            event.get("origin") if kind == "channel" or kind == "voice" else None,
        )


def injected_pattern(tags: tuple[str, ...]) -> re.Pattern[str]:
    """One regex for paired, lone and self-closing forms of the injected tags.

    Every match starts with ``<`` (``SpeechRules.strip_injected`` tries it only there)."""
    if not tags:
        return re.compile(r"(?!)")
    names = "|".join(re.escape(tag) for tag in injected_names(tags))
    paired = rf"<({names})(?:\s[^>]*)?>.*?</\1\s*>"
    lone = rf"</?(?:{names})(?:\s[^>]*)?/?>"
    return re.compile(rf"(?:{paired}|{lone})(?:\r?\n)?", re.S)


def injected_names(tags: tuple[str, ...]) -> tuple[str, ...]:
    """The injected tags in the order ``injected_pattern`` tries them: longest first."""
    return tuple(sorted(tags, key=len, reverse=True))


PASTE_OPEN = '<pasted_content id="'
_PASTE_ID = re.compile(r'([0-9A-Za-z_-]{1,32})">')


def pastes(text: str) -> list[tuple[int, int]]:
    """The ``(begin, end)`` of every paste Claude Code wrapped in ``text``, in order: from its
    ``<pasted_content id="ID">`` to the end of its ``</pasted_content id="ID">``. An opener
    without its closer wraps nothing (Claude Code stops reading pastes there too)."""
    found: list[tuple[int, int]] = []
    at = text.find(PASTE_OPEN)
    while at >= 0:
        named = _PASTE_ID.match(text, at + len(PASTE_OPEN))
        if named is None:
            at = text.find(PASTE_OPEN, at + 1)
            continue
        closer = f'</pasted_content id="{named.group(1)}">'
        close = text.find(closer, named.end())
        if close < 0:
            break
        found.append((at, close + len(closer)))
        at = text.find(PASTE_OPEN, close + len(closer))
    return found


def _utf8_len(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
