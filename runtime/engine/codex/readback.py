"""Texts read back from a rollout and its parents: what lets Codex ``fork`` write a big
rollout's speech without holding all of it (issue 16: 114 MiB for a speech-heavy 100 MB file).

The reader notes, for each utterance it may let go, the file and offset of its source line,
the line's size and the utterance's place among those the line makes (``Located``): a
rollout inlines its parents' lines, so the offset alone does not say where. When the rollout
is written (``candidate.RolloutLines``), ``text_at`` reads each such line again with one
``pread``, has a fresh ``rollout.Classifier`` (the code the first read ran, on the full parse
the fast path is held equal to) make that line's utterances, and gives the text for just the
time its line is written. The digest of every let-go text was taken from the original string, so
``verify_rollout`` proves each text read back equals what the first read saw.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import IO

import orjson

from runtime.engine.codex import rules
from runtime.engine.codex.rollout import Classifier, normalise
from runtime.engine.dirty import Ledger
from runtime.engine.speech import Utterance
from runtime.engine.transcript import ReadStats
from runtime.errors import TranscriptError

# (source file, line offset, line size, place on that line)
Where = tuple[Path, int, int, int]


class Located:
    """Where each utterance a sink was given came from (``Where``).

    The reader sets ``line_file`` and, through the sink, ``line_at`` and ``line_size`` before
    each line that may speak reaches the classifier.
    """

    def __init__(self) -> None:
        self.line_file = Path()
        self.line_at = -1
        self.line_size = 0
        self._line: tuple[Path, int] | None = None
        self._place = 0
        self.where: dict[int, Where] = {}  # id(utterance) -> where

    def note(self, utt: Utterance) -> None:
        line = (self.line_file, self.line_at)
        if line != self._line:
            self._line, self._place = line, 0
        self.where[id(utt)] = (self.line_file, self.line_at, self.line_size, self._place)
        self._place += 1


class _Said:
    """A sink that keeps, in order, the utterances a single line makes."""

    def __init__(self) -> None:
        self.said: list[Utterance] = []

    def human(self, utt: Utterance) -> None:
        self.said.append(utt)

    assistant = human

    def compact_summary(self, utt: Utterance, covered: bool) -> None:
        pass


def text_at(handle: IO[bytes], where: Where) -> str:
    """The text of the utterance at ``where``, made again from its line in ``handle``."""
    path, offset, size, place = where
    line = os.pread(handle.fileno(), size, offset)
    try:
        event = orjson.loads(line)
    except orjson.JSONDecodeError:
        event = None
    said = _Said()
    # a fresh classifier's state (trigger, last timestamp, copies) decides only kinds and
    # timestamps, kept with the item: the texts come from the line alone
    classifier = Classifier(ReadStats(), Ledger(rules.NOISE_CATEGORIES), said)  # type: ignore[arg-type]
    if type(event) is dict:
        classifier.event(normalise(event), size, f"{path.name}:?")
    if place >= len(said.said):
        raise TranscriptError(
            f"rollout {str(path)!r}: the line at byte {offset} no longer holds its speech")
    return said.said[place].text


@contextmanager
def opened() -> Iterator[dict[Path, IO[bytes]]]:
    """Handles of the source files by path, each opened when first read, closed at the end."""
    with ExitStack() as stack:
        yield _Handles(stack)


class _Handles(dict[Path, IO[bytes]]):
    """Open files by path; a missing one is opened (unbuffered: ``text_at`` preads)."""

    def __init__(self, stack: ExitStack) -> None:
        super().__init__()
        self.stack = stack

    def __missing__(self, path: Path) -> IO[bytes]:
        try:
            handle = self.stack.enter_context(open(path, "rb", buffering=0))
        except OSError as exc:
            raise TranscriptError(
                f"rollout {str(path)!r} cannot be read back: {exc.strerror}") from exc
        self[path] = handle
        return handle
