"""Turns (SPEC §3.4): human utterances, then everything the assistant said until the next one.

``TurnBuilder`` is the classifier's sink. It never drops speech: consecutive human messages
share a turn, assistant speech before the first human message joins the first turn, the last
turn may stay open. Slash commands wait until the model answers (then they are speech) or a
local command's output / the next human message shows they were local (then they are not).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from runtime.engine.speech import Utterance


@dataclass
class Turn:
    """One turn: its utterances in source order."""

    index: int
    items: list[Utterance] = field(default_factory=list)
    humans: int = 0
    replies: int = 0

    @property
    def open(self) -> bool:
        """A turn where a human spoke and the assistant has not (yet) said anything."""
        return self.humans > 0 and self.replies == 0


@dataclass(frozen=True)
class CompactSummary:
    """A compaction summary, where it sat (before turn ``anchor``) and whether turns cover it."""

    utterance: Utterance
    anchor: int
    covered: bool


@dataclass
class TurnBuilder:
    """Collects utterances into turns as the classifier reports them."""

    turns: list[Turn] = field(default_factory=list)
    summaries: list[CompactSummary] = field(default_factory=list)
    startup: Utterance | None = None
    counts: Counter[str] = field(default_factory=Counter)
    slash_local: int = 0
    slash_unanswered: int = 0
    _leading: list[Utterance] = field(default_factory=list)
    _pending_slash: Utterance | None = None

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
