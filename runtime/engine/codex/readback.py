"""Texts read back from a rollout and its parents: what lets Codex ``fork`` write a big
rollout's speech without holding all of it (issue 16: 114 MiB for a speech-heavy 100 MB file).

The reader notes, for each utterance it may let go, the file and offset of its source line,
the line's size and the utterance's place among those the line makes
(``runtime.engine.located.Located``): a
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

from runtime.engine.codex import rules
from runtime.engine.codex.rollout import Classifier, normalise, parse
from runtime.engine.dirty import Ledger
from runtime.engine.located import Said, Where
from runtime.engine.transcript import ReadStats
from runtime.errors import TranscriptError


class ReadBack:
    """Reads let-go texts back: each source file opened when first needed (closed on exit),
    every line classified by one fresh ``rollout.Classifier``.

    Its state (trigger, last timestamp, UI copies: none, only message lines are read) decides
    only kinds and timestamps, kept with the items: the texts come from each line alone.
    """

    def __init__(self) -> None:
        self.handles: dict[Path, IO[bytes]] = {}
        self.said = Said()
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
        event = parse(line, self.classifier.stats)  # as the first read parsed it (lone surrogates)
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
