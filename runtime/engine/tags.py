"""The reader's tag regexes, run in linear time: each function here is one regex's exact result.

A tag regex ends its opening tag with ``(?:\\s[^>]*)?>`` and, for a pair, finds its closing
tag with a lazy ``.*?``. Tried at every ``<`` of a text, both rescan the whole rest of it when
there is no ``>`` or no closing tag after: quadratic in the number of ``<``. A paste holding
thousands of tags that never close (a pasted log, a transcript, git output) made a read take
seconds to minutes — ``"<system-reminder a" * 16000`` (288 KB) 102 s in ``strip_injected``.
Here a text's ``>`` and closing tags are found once (``Marks``) and looked up by bisection, so
a whole text costs one pass plus a lookup per ``<``. The regexes stay the definitions:
``tests/runtime/engine/test_tags.py`` holds every function to its regex on generated texts.

``\\s`` is ``str.isspace`` and ``\\w`` is ``str.isalnum`` or ``_`` (the ``re`` module's own
Unicode tables), so no character is judged differently.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable, Iterator

_NAME = re.compile(r"[A-Za-z][\w:.-]*")  # the audit's tag name (greedy; see open_tag)
_CLOSING = re.compile(r"</([A-Za-z][\w:.-]*)\s*>")  # a closing tag (every name it can close)


class Marks:
    """Where one text's ``>`` and closing tags are, each found once, looked up by bisection."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._gts: list[int] | None = None
        self._closes: dict[str, tuple[list[int], list[int]]] | None = None

    def gt(self, at: int) -> int:
        """The first ``>`` at or after ``at``, or -1."""
        gts = self._gts
        if gts is None:
            gts = self._gts = _positions(self.text, ">")
        i = bisect_left(gts, at)
        return gts[i] if i < len(gts) else -1

    def close(self, name: str, at: int) -> int:
        """The end of the first ``</name\\s*>`` that starts at or after ``at``, or -1."""
        closes = self._closes
        if closes is None:
            closes = self._closes = _closing_tags(self.text)
        found = closes.get(name)
        if found is None:
            return -1
        starts, ends = found
        i = bisect_left(starts, at)
        return ends[i] if i < len(starts) else -1


def _positions(text: str, char: str) -> list[int]:
    found: list[int] = []
    at = text.find(char)
    while at >= 0:
        found.append(at)
        at = text.find(char, at + 1)
    return found


def _closing_tags(text: str) -> dict[str, tuple[list[int], list[int]]]:
    """Starts and ends of every ``</name\\s*>`` of the text, by name, in one pass (a text with
    thousands of distinct names is not searched once per name). The name is the longest run:
    a shorter one is followed by a name character, which neither ``\\s`` nor ``>`` is; and
    closing tags cannot overlap (each starts with ``<``, none holds one)."""
    found: dict[str, tuple[list[int], list[int]]] = {}
    for tag in _CLOSING.finditer(text):
        starts, ends = found.setdefault(tag.group(1), ([], []))
        starts.append(tag.start())
        ends.append(tag.end())
    return found


def _open_end(text: str, after_name: int, marks: Marks) -> int:
    """``(?:\\s[^>]*)?>`` at ``after_name``: the index of its ``>``, or -1."""
    if after_name >= len(text):
        return -1
    char = text[after_name]
    if char == ">":
        return after_name
    if char.isspace():
        return marks.gt(after_name + 1)
    return -1


def _lone_end(text: str, after_name: int, marks: Marks) -> int:
    """``(?:\\s[^>]*)?/?>`` at ``after_name``: the end of the match, or -1."""
    if after_name >= len(text):
        return -1
    char = text[after_name]
    if char.isspace():
        gt = marks.gt(after_name + 1)
        return gt + 1 if gt >= 0 else -1
    if char == ">":
        return after_name + 1
    if char == "/" and text.startswith(">", after_name + 1):
        return after_name + 2
    return -1


def _line_break(text: str, end: int) -> int:
    """``(?:\\r?\\n)?`` at ``end``."""
    if text.startswith("\r\n", end):
        return end + 2
    if text.startswith("\n", end):
        return end + 1
    return end


def _injected_at(text: str, at: int, names: tuple[str, ...], marks: Marks) -> int:
    """The end of ``speech.injected_pattern(names)`` matched at ``at`` (a ``<``), or -1:
    first a pair for each name in turn, then a lone tag (``</?`` tries the slash first)."""
    for name in names:
        if text.startswith(name, at + 1):
            opened = _open_end(text, at + 1 + len(name), marks)
            if opened >= 0:
                closed = marks.close(name, opened + 1)
                if closed >= 0:
                    return _line_break(text, closed)
    starts = (at + 2, at + 1) if text.startswith("/", at + 1) else (at + 1,)
    for start in starts:
        for name in names:
            if text.startswith(name, start):
                end = _lone_end(text, start + len(name), marks)
                if end >= 0:
                    return _line_break(text, end)
    return -1


def substitute(text: str, end_at: Callable[[int], int], sep: str = "") -> tuple[str, int]:
    """``pattern.subn(sep, text)`` for a pattern whose every match starts with ``<``:
    ``end_at(at)`` is the end of its match at ``at`` (a ``<``), or -1. Tried at each ``<`` in
    turn, after a match from its end, as ``re`` does; (the text, the number of matches)."""
    pieces: list[str] = []
    start = 0
    at = text.find("<")
    while at >= 0:
        end = end_at(at)
        if end < 0:
            at = text.find("<", at + 1)
            continue
        pieces.append(text[start:at])
        start = end
        at = text.find("<", end)
    if not pieces:
        return text, 0
    count = len(pieces)
    pieces.append(text[start:])
    return sep.join(pieces), count


def injected_subn(text: str, names: tuple[str, ...]) -> tuple[str, int]:
    """``speech.injected_pattern(names).subn("", text)``; ``names`` in the pattern's order
    (longest first)."""
    if not names:
        return text, 0
    marks = Marks(text)
    return substitute(text, lambda at: _injected_at(text, at, names, marks))


def open_tag(text: str, at: int, marks: Marks) -> tuple[str, int] | None:
    """``<([A-Za-z][\\w:.-]*)(?:\\s[^>]*)?>`` matched at ``at``: (name, end), or None. The name
    is the longest run: a shorter one is followed by a name character, which neither ``\\s``
    nor ``>`` matches."""
    name = _NAME.match(text, at + 1) if text.startswith("<", at) else None
    if name is None:
        return None
    opened = _open_end(text, name.end(), marks)
    return (name.group(), opened + 1) if opened >= 0 else None


def lone_sub(text: str, sep: str) -> str:
    """``re.sub(r"</?[A-Za-z][\\w:.-]*(?:\\s[^>]*)?/?>", sep, text)``."""
    if "<" not in text:
        return text
    marks = Marks(text)

    def end_at(at: int) -> int:
        for begin in ((at + 2, at + 1) if text.startswith("/", at + 1) else (at + 1,)):
            name = _NAME.match(text, begin)
            if name is not None:
                end = _lone_end(text, name.end(), marks)
                if end >= 0:
                    return end
        return -1

    return substitute(text, end_at, sep)[0]


def blocks(text: str, opening: str, closing: str) -> Iterator[tuple[int, int]]:
    """Spans of ``re.finditer(re.escape(opening) + ".*?" + re.escape(closing), text, re.S)``:
    when an opening has no closing after it, no later one has either."""
    at = text.find(opening)
    while at >= 0:
        close = text.find(closing, at + len(opening))
        if close < 0:
            return
        end = close + len(closing)
        yield at, end
        at = text.find(opening, end)


def first_inner(text: str, opening: str, closing: str) -> str | None:
    """What lies between ``opening`` and ``closing`` in the first match of ``re.search(
    re.escape(opening) + "(.*?)" + re.escape(closing), text, re.S)``, or None."""
    for start, end in blocks(text, opening, closing):
        return text[start + len(opening):end - len(closing)]
    return None


def exact_pairs_sub(text: str, names: tuple[str, ...]) -> str:
    """``re.sub(r"<(n1|n2|…)>.*?</\1>", "", text, flags=re.S)`` for ``names`` in that order.

    A name's closing tag is searched forward only: the openings tried come in text order,
    so a search that found nothing, or found a tag at or after the next opening's end, is
    still the answer."""
    if "</" not in text:
        return text
    closes: dict[str, int] = {}  # name -> start of its first closing tag at or after the last ask

    def end_at(at: int) -> int:
        for name in names:
            opening = f"<{name}>"
            if not text.startswith(opening, at):
                continue
            after = at + len(opening)
            close = closes.get(name)
            if close is None or 0 <= close < after:
                close = closes[name] = text.find(f"</{name}>", after)
            if close >= 0:
                return close + len(name) + 3
        return -1

    return substitute(text, end_at)[0]
