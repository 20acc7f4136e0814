"""Turns (SPEC §3.4): human utterances, then everything the assistant said until the next one.

``TurnBuilder`` is the classifier's sink. It never drops speech: consecutive human messages
share a turn, assistant speech before the first human message joins the first turn, the last
turn may stay open. Slash commands wait until the model answers (then they are speech) or a
local command's output / the next human message shows they were local (then they are not).

(Plain classes and a NamedTuple rather than dataclasses: each dataclass costs ≈ 0.4 ms of
start-up to make its methods, and every ``plan``/``fork`` imports this module — issue 13.)
"""

from __future__ import annotations

from collections import Counter
from typing import NamedTuple

from runtime.engine.speech import Utterance


class Turn:
    """One turn: its utterances in source order."""

    # __weakref__: a test proves a build is freed by reference counting through a weakref
    __slots__ = ("index", "items", "humans", "replies", "__weakref__")

    def __init__(self, index: int, items: list[Utterance] | None = None, humans: int = 0,
                 replies: int = 0) -> None:
        self.index = index
        self.items: list[Utterance] = [] if items is None else items
        self.humans = humans
        self.replies = replies

    @property
    def open(self) -> bool:
        """A turn where a human spoke and the assistant has not (yet) said anything."""
        return self.humans > 0 and self.replies == 0


class CompactSummary(NamedTuple):
    """A compaction summary, where it sat (before turn ``anchor``) and whether turns cover it."""

    utterance: Utterance
    anchor: int
    covered: bool


class TurnBuilder:
    """Collects utterances into turns as the classifier reports them."""

    def __init__(self) -> None:
        self.turns: list[Turn] = []
        self.summaries: list[CompactSummary] = []
        self.startup: Utterance | None = None
        self.counts: Counter[str] = Counter()
        self.slash_local = 0
        self.slash_unanswered = 0
        # utterances made from a line without a uuid, by (line number, role): the audit
        # cannot match them to their line by uuid as it does every other
        self.uuidless: Counter[tuple[int, str]] = Counter()
        self._leading: list[Utterance] = []
        self._pending_slash: Utterance | None = None

    def human(self, utt: Utterance) -> None:
        if self._pending_slash is not None:  # (tested here: one call less per human message)
            self._drop_pending_slash()
        self._add_human(utt)

    def slash(self, utt: Utterance) -> None:
        self._drop_pending_slash()
        self._pending_slash = utt

    def model_activity(self) -> None:
        """The model answered: a waiting slash command was a prompt, so it is speech."""
        if self._pending_slash is not None:
            utt, self._pending_slash = self._pending_slash, None
            self._add_human(utt)

    def local_output(self) -> None:
        self._drop_pending_slash()

    def assistant(self, utt: Utterance) -> None:
        self.counts[utt.kind] += 1
        if not self.turns:
            self._leading.append(utt)
            return
        turn = self.turns[-1]
        turn.items.append(utt)
        turn.replies += 1

    def compact_summary(self, utt: Utterance, covered: bool) -> None:
        self.summaries.append(CompactSummary(utt, len(self.turns), covered and bool(self.turns)))

    def snapshot(self, utt: Utterance) -> None:
        if self.startup is None:
            self.startup = utt

    def finish(self) -> list[Turn]:
        """Close the stream: an unanswered slash command is dropped, leading speech kept."""
        if self._pending_slash is not None:
            self._pending_slash = None
            self.slash_unanswered += 1
        if self._leading and not self.turns:
            turn = Turn(0, list(self._leading), 0, len(self._leading))
            self._leading.clear()
            self.turns.append(turn)
        return self.turns

    def _add_human(self, utt: Utterance) -> None:
        self.counts[utt.kind] += 1
        if not self.turns or self.turns[-1].replies > 0:
            turn = Turn(len(self.turns))
            if self._leading:  # speech before the first human line belongs to the first turn
                turn.items.extend(self._leading)
                self._leading.clear()
            self.turns.append(turn)
        turn = self.turns[-1]
        turn.items.append(utt)
        turn.humans += 1

    def _drop_pending_slash(self) -> None:
        if self._pending_slash is not None:
            self._pending_slash = None
            self.slash_local += 1
