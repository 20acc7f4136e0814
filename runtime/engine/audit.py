"""The independent recognition audit (issue 12 §3): a second, deliberately simple reading.

The classifier (runtime.engine.classify) is an allowlist: a speech shape it does not know is
silently
not speech, and comparing it with itself proves nothing (SPEC §6: "3 of 3 turns" while 22
channel turns were never recognised). This module shares no code with it. It sees every
parsed line of the same single read (``transcript.scan``'s observer, before the classifier)
and counts *candidate* speech by raw shape:

- ``queue-operation`` enqueue texts (what was typed or pushed, echoed by Claude Code);
- ``<channel …>`` openings in user text, whatever the attribute order;
- ``origin.kind`` on user events (other than ``human`` and ``task-notification``);
- attachments carrying a ``prompt`` (any subtype, prompt mode);
- ``tool_use`` blocks whose name says ``reply`` with a text argument;
- ``<command-name>`` tags with no words outside tags beside them (slash commands);
- raw text blocks of user/assistant lines not marked meta/sidechain, after removing *every*
  tag pair (not only the configured injected ones), interrupt markers excepted.

Each candidate is compared with what the classifier produced for the same line (by event uuid
and role; enqueue texts by their words between tags). Where the simple reading finds more than
the classifier recognised, the rebuild is blocked with the shape and the line number:
``unrecognised speech``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import msgspec

from runtime.engine import tags
from runtime.engine.find import contains
from runtime.engine.speech import MARK_KEY

# the definitions of a tag pair and a lone tag; ``_drop_pairs`` and ``tags.lone_sub`` apply
# them in linear time (tests hold each equal to its regex)
_PAIR = re.compile(r"<([A-Za-z][\w:.-]*)(?:\s[^>]*)?>.*?</\1\s*>", re.S)
_LONE = re.compile(r"</?[A-Za-z][\w:.-]*(?:\s[^>]*)?/?>")
_CHANNEL = re.compile(r"<channel\s")
_REPLY_ARGS = ("text", "message", "content")


class _Attached(msgspec.Struct):
    prompt: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET


class _Line(msgspec.Struct):
    """What ``wants`` reads of a settled attachment line: whether it has a prompt (nothing
    else is built)."""

    attachment: _Attached | None = None


_decode_line = msgspec.json.Decoder(_Line).decode
NOT_SPEECH_ORIGINS = ("human", "task-notification")  # human: judged by its text below
# Claude Code's own reports, also when a line was cut before the closing tag
NOT_SPEECH_OPENINGS = ("<task-notification", "[Request interrupted")
_DECISIVE = max(len(o) for o in NOT_SPEECH_OPENINGS if "<" not in o)


Hear = Callable[[str], None]


class Recognised:
    """What the classifier produced: utterances per (event uuid, role) — per (line, role) for
    a line without a uuid — human texts, slashes.

    ``human_texts`` are the texts still held; when the reader let older ones go (``plan``
    keeps only the last turns' texts, having told each to ``SecondReading.hear`` as it was
    made), ``replay`` reads the source again and tells every human text to the function it
    is given, for enqueued prompts that no text told so far nor any held one contains.
    (Plain classes here: a dataclass costs ≈ 0.4 ms of every ``plan``'s start-up, issue 13.)
    """

    def __init__(self, slash_seen: int = 0) -> None:
        self.per_line: Counter[tuple[str, str]] = Counter()
        # what lines without a uuid (none, not a string, or empty) made, by (line, role)
        self.by_line: Counter[tuple[int, str]] = Counter()
        self.human_texts: list[str] = []
        self.slash_seen = slash_seen
        self.replay: Callable[[Hear], None] | None = None


class AuditResult:
    """Per shape: candidates seen and how many were not recognised; the first findings."""

    def __init__(self) -> None:
        self.shapes: Counter[str] = Counter()
        self.unrecognised: Counter[str] = Counter()
        self.findings: list[Finding] = []

    def reason(self) -> str | None:
        """The blocking reason naming the first unrecognised shape and its line, or None."""
        if not self.findings:
            return None
        first = self.findings[0]
        more = sum(self.unrecognised.values()) - 1
        tail = f" (and {more} more)" if more > 0 else ""
        return (f"unrecognised speech: {first.shape} at line {first.line}{tail}; the speech "
                "rules do not know this shape, so a rebuild would lose it")

    def as_dict(self) -> dict[str, Any]:
        return {
            "candidates": dict(self.shapes),
            "unrecognised": dict(self.unrecognised),
            "first_lines": [{"shape": f.shape, "line": f.line} for f in self.findings[:20]],
        }


class Finding(NamedTuple):
    """One line where the simple reading saw more speech than the classifier recognised."""

    shape: str
    line: int


def plain(text: str) -> str:
    """``text`` without any tag pair or lone tag, whitespace-trimmed."""
    if "<" not in text:
        return text.strip()
    return tags.lone_sub(_drop_pairs(text), "").strip()


def _spoken(text: str) -> bool:
    """``plain(text)`` is not empty and opens with no ``NOT_SPEECH_OPENINGS``.

    Every tag starts with ``<``, so the words before the first ``<`` survive ``plain``
    untouched: when they are at least as long as the longest opening without ``<``, they
    alone decide, and a long text is not rewritten whole (a 46 KB paste: 0.1 ms) to learn
    it. Otherwise the definition itself runs.
    """
    words = text.lstrip()
    lead = words.find("<")
    if lead < 0 or lead >= _DECISIVE:
        return bool(words) and not words.startswith(NOT_SPEECH_OPENINGS)
    said = plain(text)
    return bool(said) and not said.startswith(NOT_SPEECH_OPENINGS)


def _enqueued_words(text: str) -> list[str]:
    """What of an enqueued prompt must be heard in the human texts: a channel envelope whole,
    any other prompt by the words between its tags (a tag pair typed in a prompt, which the
    classifier may strip as an injected block, is not asked for)."""
    if _CHANNEL.match(text):
        return [_words(text)]
    cut = tags.lone_sub(_drop_pairs(text, "\0"), "\0")
    return [said for said in map(_words, cut.split("\0")) if said]


def _drop_pairs(text: str, sep: str = "") -> str:
    """``_PAIR.sub(sep, text)`` in linear time (``runtime.engine.tags``): the regex rescans the
    whole rest of the text for every opening tag that is never closed (``<file>`` in pasted
    git output: 0.7 ms per 46 KB text) and for every ``<name `` with no ``>`` after it."""
    if "</" not in text:
        return text  # every pair ends with one
    marks = tags.Marks(text)

    def end_at(at: int) -> int:
        opening = tags.open_tag(text, at, marks)
        return marks.close(opening[0], opening[1]) if opening is not None else -1

    return tags.substitute(text, end_at, sep)[0]


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    return [b["text"] for b in content if isinstance(b, dict) and b.get("type") == "text"
            and isinstance(b.get("text"), str)]


def _answered(content: Any, tool_use_result: Any) -> int:
    """How many answers a question tool's result holds (at least 1 once it says answered)."""
    texts = _texts(content)
    if not texts or not texts[0].startswith(("User has answered", "The user answered")):
        return 0
    given = tool_use_result.get("answers") if isinstance(tool_use_result, dict) else None
    said = [a for a in given.values() if isinstance(a, str) and a.strip()] \
        if isinstance(given, dict) else []
    return max(len(said), 1)


def _asks(arguments: Any) -> int:
    """How many questions with words a question tool's call asks."""
    questions = arguments.get("questions") if isinstance(arguments, dict) else None
    if not isinstance(questions, list):
        return 0
    return sum(1 for q in questions if isinstance(q, dict)
               and isinstance(q.get("question"), str) and q["question"].strip())


def _rejected_with_words(content: Any) -> bool:
    """A tool result that says what the human said when they rejected the call, with words."""
    text = "\n".join(_texts(content))
    if not text.startswith("The user doesn't want to proceed"):
        return False  # a failed command that prints the words is not a rejection
    for mark in ("the user said:", "reason for the rejection:"):
        _, said, words = text.partition(mark)
        if said:
            return bool(words.strip())
    return False


def _words(text: str) -> str:
    return " ".join(text.split())


class _Waiting:
    """Enqueued prompts (by line) with the words of theirs that no human text told so far
    contains. A prompt's words never hold a newline, so "in one of the texts" is the same
    test as "in the texts joined by newlines"."""

    def __init__(self, waiting: dict[int, list[str]]) -> None:
        self.waiting = waiting

    def add(self, line: int, words: list[str]) -> None:
        self.waiting[line] = words

    def hear(self, text: str) -> None:
        if not self.waiting:
            return
        heard = _words(text)
        for line, words in list(self.waiting.items()):
            left = [w for w in words if w not in heard]
            if left:
                self.waiting[line] = left
            else:
                del self.waiting[line]

    def hear_all(self, texts: Iterable[str]) -> None:
        for text in texts:
            if not self.waiting:
                return
            self.hear(text)


# the shapes the classifier carries every day: where lines share a uuid, these are taken to
# be what it made, the others what it missed (only the line a refusal names depends on it)
_ROUTINE = frozenset({"user text", "assistant text", "<channel> envelope"})


class _Candidate(NamedTuple):
    shape: str
    line: int
    seen: int  # candidates of ``role`` on the line
    uuid: Any
    role: str
    counted: int  # how many of them are of ``shape``


class SecondReading:
    """The simple reading, fed every parsed event with its line number; compared at the end.

    It only collects candidates while the file is read (the classifier has not finished yet);
    ``compare`` judges them against what the classifier recognised.
    """

    def __init__(self, reply_chat_ids: frozenset[str] = frozenset()) -> None:
        self.chat_ids = reply_chat_ids
        self.candidates: list[_Candidate] = []
        self.enqueued: list[tuple[int, list[str]]] = []
        self._waiting = _Waiting({})
        self.slash_lines = 0
        self.first_slash = 0

    def flag(self, shape: str, line: int, seen: int, uuid: Any, role: str,
             counted: int | None = None) -> None:
        """``seen`` candidates of ``role`` on this line (``counted`` of them of ``shape``)."""
        self.candidates.append(
            _Candidate(shape, line, seen, uuid, role, seen if counted is None else counted))

    def compare(self, recognised: Recognised) -> AuditResult:
        """Per line: where the simple reading saw more than the classifier produced."""
        result = AuditResult()
        # A line is found by its uuid (by its number when it has none). Lines that share a
        # uuid (a damaged or hostile file) share what the classifier made for it, so that is
        # used up line by line: a shape missed on one is not covered by what another made.
        per_line, by_line = dict(recognised.per_line), dict(recognised.by_line)
        shapes: dict[str, int] = {}
        short = False
        for shape, line, seen, uuid, role, counted in self.candidates:
            shapes[shape] = shapes.get(shape, 0) + counted
            if type(uuid) is str and uuid:
                key = (uuid, role)
                got = per_line.get(key, 0)
                per_line[key] = got - seen
            else:
                where = (line, role)
                got = by_line.get(where, 0)
                by_line[where] = got - seen
            if seen > got:
                short = True
        result.shapes.update(shapes)
        if short:  # the rebuild is refused: name the lines (a second pass, off the fast path)
            self._shortfall(recognised, result)
        waiting = self._waiting
        waiting.hear_all(recognised.human_texts)
        if waiting.waiting and recognised.replay is not None:
            recognised.replay(waiting.hear)
        shape = "queue-operation enqueue"
        for line, _ in self.enqueued:
            result.shapes[shape] += 1
            if line in waiting.waiting:
                result.unrecognised[shape] += 1
                result.findings.append(Finding(shape, line))
        if self.slash_lines:
            shape = "<command-name> slash command"
            result.shapes[shape] += self.slash_lines
            if self.slash_lines > recognised.slash_seen:
                result.unrecognised[shape] += self.slash_lines - recognised.slash_seen
                result.findings.append(Finding(shape, self.first_slash))
        result.findings.sort(key=lambda f: f.line)
        return result

    def _shortfall(self, recognised: Recognised, result: AuditResult) -> None:
        """The findings of ``compare``: per line found, what the classifier made fell short.
        Of lines sharing a uuid the routine shapes are taken to be what it made, the others
        what it missed (only which line is named depends on that guess)."""
        groups: dict[tuple[Any, str], list[_Candidate]] = {}
        for c in self.candidates:
            key = (c.uuid, c.role) if isinstance(c.uuid, str) and c.uuid else (c.line, c.role)
            groups.setdefault(key, []).append(c)
        for key, group in groups.items():
            got = (recognised.per_line[key] if isinstance(key[0], str)
                   else recognised.by_line[key])
            group.sort(key=lambda c: c.shape not in _ROUTINE)
            for c in group:
                if c.seen > got:
                    result.unrecognised[c.shape] += c.seen - got
                    result.findings.append(Finding(c.shape, c.line))
                got = max(got - c.seen, 0)

    def hear(self, text: str) -> None:
        """A human text the classifier made, told as it is made: it is matched now against
        the prompts enqueued before it, so the reader need not keep it to the end."""
        self._waiting.hear(text)

    # the settled lines ``wants`` reads further; the reader does not ask about any other
    wanted = frozenset({"assistant", "attachment", "queue-operation"})

    def wants(self, line: bytes, kind: str, content: Any) -> bool:
        """Whether a raw line the reader's fast path settled can hold a shape read here.

        ``kind`` is the line's ``type`` as the fast path decoded it, ``content`` an assistant
        line's message content as it decoded it (msgspec; a list of blocks with their ``type``
        and ``name``, else the content was not a list). That path settles only lines it knows
        the classifier ignores; of those, this reading can still see an enqueue, an
        attachment's ``prompt`` or an assistant tool whose name says reply. (A user line it
        settles answers a tool call, which this reading skips as well.) Names and keys are
        decoded, not searched in the raw bytes: one written with escapes (``re\\u0070ly``)
        is still seen, and a big tool input is skipped, not lowercased.
        """
        if kind == "assistant":  # a tool named reply, read as ``_reply`` reads it
            if type(content) is not list:
                return True
            for b in content:  # (a loop: no generator for the one block a line mostly has)
                if b.type == "tool_use" and isinstance(b.name, str) and (
                        "reply" in b.name.lower() or b.name in ("AskUserQuestion",
                                                                 "ExitPlanMode")):
                    return True
            return False
        if kind == "attachment":
            try:
                body = _decode_line(line).attachment
            except msgspec.DecodeError:
                return True
            return body is not None and body.prompt is not msgspec.UNSET
        return kind == "queue-operation"

    def event(self, event: dict[str, Any], line: int) -> None:
        kind = event.get("type")
        if event.get("isSidechain") is True:
            return
        if kind == "queue-operation":
            self._enqueue(event, line)
        elif kind == "attachment":
            self._attachment(event, line)
        elif kind == "user":
            self._user(event, line)
        elif kind == "assistant":
            self._assistant(event, line)
        elif kind == "system" and event.get("subtype") == "voice_call_talk":
            # words said on a voice call, stored as a system line (whatever its other fields);
            # a kept block list (Claude Code sends it instead of ``content``) whose words are
            # not the content's counts as words of their own
            text = event.get("content")
            seen = 1 if isinstance(text, str) and text.strip() else 0
            blocks = event.get("blocks")
            if isinstance(blocks, list):
                joined = "\n".join(b["text"] for b in blocks
                                   if isinstance(b, dict) and isinstance(b.get("text"), str))
                if joined.strip() and joined != text:
                    seen += 1
            if seen:
                self.flag("voice call talk", line, seen, event.get("uuid"), "user", 1)

    def _enqueue(self, event: dict[str, Any], line: int) -> None:
        if event.get("operation") != "enqueue":
            return
        # a block that is nothing but tags is an injection; any other block is matched whole
        said = [t.strip() for t in _texts(event.get("content"))
                if _CHANNEL.match(t.lstrip()) or plain(t)]
        said = [t for t in said if not t.startswith(("/", *NOT_SPEECH_OPENINGS))]
        if said:
            self.enqueued.append((line, said))
            self._waiting.add(line, [w for t in said for w in _enqueued_words(t)])

    def _attachment(self, event: dict[str, Any], line: int) -> None:
        body = event.get("attachment")
        if not isinstance(body, dict) or "prompt" not in body:
            return
        if body.get("commandMode", "prompt") not in ("prompt", None):
            return
        if any(plain(t) for t in _texts(body.get("prompt"))):
            self.flag(f"attachment {body.get('type')!r} prompt", line, 1, event.get("uuid"),
                      "user")

    def _user(self, event: dict[str, Any], line: int) -> None:
        message = event.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if event.get("isCompactSummary") is True:
            return
        if isinstance(content, list) and any(
                isinstance(b, dict) and b.get("type") == "tool_result" for b in content):
            # results answer tool calls; one the human rejected with words holds those words
            results = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
            said = sum(1 for b in results
                       if b.get("is_error") is True and _rejected_with_words(b.get("content")))
            if said:
                self.flag("tool rejection words", line, said, event.get("uuid"), "user")
            answered = sum(_answered(b.get("content"), event.get("toolUseResult"))
                           for b in results if b.get("is_error") is not True)
            if answered:
                self.flag("answers to the model's questions", line, answered, event.get("uuid"),
                          "user")
            return
        texts = _texts(content)
        mark = event.get(MARK_KEY)
        lead = mark.get("lead") if isinstance(mark, dict) else None
        if lead is not None and texts[:1] == [lead]:
            texts = texts[1:]  # the time stamp an earlier rebuild added
        # a slash command is its tags alone; words beside them are a human's, read below
        if any(contains(t, "<command-name>") and not _spoken(t) for t in texts):
            self.slash_lines += 1
            self.first_slash = self.first_slash or line
        uuid = event.get("uuid")
        origin = event.get("origin")
        origin_kind = origin.get("kind") if isinstance(origin, dict) else None
        if origin_kind == "task-notification":
            return  # Claude Code's own report of a background task, however it is cut
        if any(_CHANNEL.match(t.lstrip()) for t in texts):
            self.flag("<channel> envelope", line, 1, uuid, "user")
        elif isinstance(origin_kind, str) and origin_kind not in NOT_SPEECH_ORIGINS:
            self.flag(f"origin.kind {origin_kind!r}", line, 1, uuid, "user")
        elif event.get("isMeta") is not True:
            spoken = sum(map(_spoken, texts))
            if spoken:
                self.flag("user text", line, spoken, uuid, "user")

    def _assistant(self, event: dict[str, Any], line: int) -> None:
        message = event.get("message")
        if not isinstance(message, dict) or event.get("isApiErrorMessage") is True:
            return
        if message.get("model") == "<synthetic>":
            return
        content = message.get("content")
        blocks = content if isinstance(content, list) else []
        uuid = event.get("uuid")
        said = [t for t in _texts(content) if t and not t.isspace()]  # t.strip(), no copy
        replies = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"
                   and self._reply(b)]
        asked = sum(_asks(b.get("input")) for b in blocks if isinstance(b, dict)
                    and b.get("type") == "tool_use" and b.get("name") == "AskUserQuestion")
        if asked:  # the model's questions to the human: one item per question
            self.flag("questions to the human", line, asked, uuid, "assistant")
        planned = sum(1 for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"
                      and b.get("name") == "ExitPlanMode" and isinstance(b.get("input"), dict)
                      and isinstance(b["input"].get("plan"), str) and b["input"]["plan"].strip())
        if planned:
            self.flag("plan shown to the human", line, planned, uuid, "assistant")
        if replies:
            self.flag("assistant text", line, 0, uuid, "assistant", len(said))
            shape = f"reply tool {replies[0].get('name')!r}"
            self.flag(shape, line, len(said) + len(replies), uuid, "assistant", len(replies))
        elif said:
            self.flag("assistant text", line, len(said), uuid, "assistant")

    def _reply(self, block: dict[str, Any]) -> bool:
        name = block.get("name")
        arguments = block.get("input")
        if not isinstance(name, str) or "reply" not in name.lower():
            return False
        if not isinstance(arguments, dict):
            return False
        if self.chat_ids and str(arguments.get("chat_id")) not in self.chat_ids:
            return False  # replies to other chats are left out by configuration
        return any(isinstance(arguments.get(k), str) and arguments[k].strip()
                   for k in _REPLY_ARGS)
