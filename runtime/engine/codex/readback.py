"""Texts read back from a rollout and its parents: what lets Codex ``fork`` write a big
rollout's speech without holding all of it (issue 16: 114 MiB for a speech-heavy 100 MB file).

The reader notes, for each utterance it may let go, the file and offset of its source line,
the line's size and the utterance's place among those the line makes (``Located``): a
rollout inlines its parents' lines, so the offset alone does not say where. When the rollout
is written (``candidate.RolloutLines``), ``ReadBack`` reads each such line again with one
``pread``, has a fresh ``rollout.Classifier`` (the code the first read ran, on the full parse
the fast path is held equal to) make that line's utterances, and gives the text for just the
time its line is written. The digest of every let-go text was taken from the original string, so
``verify_rollout`` proves each text read back equals what the first read saw.
"""

from __future__ import annotations

import os
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
        self._file: Path | None = None  # the line the last utterance came from
        self._at = -1
        self._place = 0
        self.where: dict[int, Where] = {}  # id(utterance) -> where

    def note(self, utt: Utterance) -> None:
        at, file = self.line_at, self.line_file
        if at != self._at or file is not self._file:
            self._at, self._file, self._place = at, file, 0
        self.where[id(utt)] = (file, at, self.line_size, self._place)
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


class ReadBack:
    """Reads let-go texts back: each source file opened when first needed (closed on exit),
    every line classified by one fresh ``rollout.Classifier``.

    Its state (trigger, last timestamp, UI copies: none, only message lines are read) decides
    only kinds and timestamps, kept with the items: the texts come from each line alone.
    """

    def __init__(self) -> None:
        self.handles: dict[Path, IO[bytes]] = {}
        self.said = _Said()
        self.classifier = Classifier(
            ReadStats(), Ledger(rules.NOISE_CATEGORIES), self.said)  # type: ignore[arg-type]

    def __enter__(self) -> ReadBack:
        return self

    def __exit__(self, *exc: object) -> None:
        for handle in self.handles.values():
            handle.close()
        self.handles.clear()

    def text(self, where: Where) -> str:
        """The text of the utterance at ``where``, made again from its line."""
        path, offset, size, place = where
        handle = self.handles.get(path)
        if handle is None:
            try:
                handle = self.handles[path] = open(path, "rb", buffering=0)  # preads only
            except OSError as exc:
                raise TranscriptError(
                    f"rollout {str(path)!r} cannot be read back: {exc.strerror}") from exc
        line = os.pread(handle.fileno(), size, offset)
        try:
            event = orjson.loads(line)
        except orjson.JSONDecodeError:
            event = None
        said = self.said.said
        said.clear()
        if type(event) is dict:
            self.classifier.event(normalise(event), size, f"{path.name}:?")
        if place >= len(said):
            raise TranscriptError(
                f"rollout {str(path)!r}: the line at byte {offset} no longer holds its speech")
        text = said[place].text
        said.clear()
        return text
