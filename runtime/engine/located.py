"""Where a let-go text came from, for the read-backs of both agents' ``fork``.

A fork lets the texts of old turns go and reads each back from its source line while the
rebuilt file is written (bounded memory: ``runtime.engine.readback`` for Claude,
``runtime.engine.codex.readback`` for Codex). ``Located`` notes, for each utterance a sink is
given, its ``Where``: the source file (a Codex rollout inlines its parents' lines, so the
offset alone does not say where; Claude's reader leaves it unset), the line's offset and size,
and the utterance's place among those the line makes. ``Said`` is the sink a read-back's fresh
classifier makes one line's utterances into, counted as ``Located`` counts them.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from runtime.engine.speech import Utterance

# (source file, line offset, line size, place on that line)
Where = tuple[Path, int, int, int]


class Located:
    """Where each utterance a sink was given came from (``Where``).

    The reader sets ``line_file`` (Codex) and, through the sink, ``line_at`` and
    ``line_size`` before each line that may speak reaches the classifier.
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


class Said:
    """A sink that keeps, in order, the utterances a single line makes (human, slash and
    assistant speech, as ``Located`` counts them); everything else a classifier tells a sink
    is dropped."""

    def __init__(self) -> None:
        self.said: list[Utterance] = []
        self.uuidless: Counter[tuple[int, str]] = Counter()  # (the classifier counts there)

    def human(self, utt: Utterance) -> None:
        self.said.append(utt)

    slash = assistant = human

    def model_activity(self) -> None:
        pass

    def local_output(self) -> None:
        pass

    def compact_summary(self, utt: Utterance, covered: bool) -> None:
        pass

    def snapshot(self, utt: Utterance) -> None:
        pass
