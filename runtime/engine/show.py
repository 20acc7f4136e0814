"""What ``tl-rebuild plan --show`` displays: the carried conversation, item by item, and what
the rebuild drops between two carried items (noise by category, speech not carried).

The carried items are the build's own: its manifest and laid-out items, in the candidate's
order, the text as the candidate holds it. Where each one sat in the source, and which noise
lies between two of them, takes one more read of the file with the engine's own classifier
(every line parsed, the reference path) and its ledger compared line by line; summed over
all gaps, the noise per category is the dirty ledger's.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from runtime.agents.kind import AgentKind
from runtime.config import Config
from runtime.engine.dirty import Ledger

MALFORMED = "malformed"


@dataclass(frozen=True)
class Said:
    """One carried item: who, when, which turn, its text verbatim and the block Threadline adds
    before it (a turn's time stamp or the compaction-summary mark), if any."""

    role: str
    kind: str
    text: str
    timestamp: str | None
    turn: int | None
    lead: str | None
    origin: Any = None


@dataclass
class Gap:
    """What the rebuild drops at one place: ``noise`` maps a category to [lines, bytes]."""

    noise: dict[str, list[int]] = field(default_factory=dict)
    not_carried: int = 0

    def add(self, category: str, nbytes: int) -> None:
        entry = self.noise.setdefault(category, [0, 0])
        entry[0] += 1
        entry[1] += nbytes

    @property
    def empty(self) -> bool:
        return not self.noise and not self.not_carried


@dataclass(frozen=True)
class View:
    """The conversation as carried: ``gaps[0]`` lies before ``items[0]``, ``gaps[i + 1]``
    after ``items[i]``. ``build`` is the build both come from (its stats, its ledger)."""

    items: list[Said]
    gaps: list[Gap]
    build: Any
    agent: AgentKind

    def noise_totals(self) -> dict[str, int]:
        """Bytes per category over all gaps (equal to the ledger's categories)."""
        totals: dict[str, int] = {}
        for gap in self.gaps:
            for category, (_, nbytes) in gap.noise.items():
                totals[category] = totals.get(category, 0) + nbytes
        return totals


def view(source: Path, config: Config, agent: str | None = None, progress: Any = None) -> View:
    """Build ``source``'s candidate (as ``plan`` does, laid out) and place what it drops."""
    from runtime.agents.detect import detect

    who = detect(source, agent)
    if who is AgentKind.CODEX:
        from runtime.engine.codex import candidate

        built: Any = candidate.build(source, config, progress=progress)
        keys, noise = _codex_lines(source)
        lines = list(built.items)[1:]  # line 0 is the new session_meta
    else:
        from runtime.engine import candidate  # type: ignore[no-redef]

        built = candidate.build(source, config, progress=progress)
        keys, noise = _claude_lines(source, config)
        lines = list(built.items)
    items = [_said(entry, line) for entry, line in zip(built.manifest, lines, strict=True)]
    place = _Placer(keys, who)
    positions = [place(entry.source_uuid) for entry in built.manifest]
    gaps = [Gap() for _ in range(len(items) + 1)]
    order = sorted((pos, index) for index, pos in enumerate(positions))
    starts = [pos for pos, _ in order]

    def gap_at(position: int) -> Gap:
        k = bisect_right(starts, position) - 1
        return gaps[order[k][1] + 1] if k >= 0 else gaps[0]

    for position, category, nbytes in noise:
        gap_at(position).add(category, nbytes)
    selected = set(built.selected)
    place = _Placer(keys, who)  # the turns left out, in source order like the carried ones
    for turn in built.turns:
        if turn.index not in selected:
            for utt in turn.items:
                gap_at(place(utt.source_uuid)).not_carried += 1
    return View(items, gaps, built, who)


def _said(entry: Any, line: dict[str, Any]) -> Said:
    """A carried item from its manifest entry and its candidate line (Claude or Codex)."""
    if entry.kind == "voice":  # a voice line's text is its content
        body: Any = {"content": [{"text": line.get("content")}]}
    else:
        body = line.get("message") if "message" in line else line.get("payload")
    blocks = body.get("content") if type(body) is dict else None
    texts = [b.get("text") for b in blocks or [] if type(b) is dict]
    text = texts[-1] if texts and type(texts[-1]) is str else ""
    lead = texts[0] if len(texts) > 1 and type(texts[0]) is str else None
    stamp = line.get("timestamp")
    return Said(entry.role, entry.kind, text, stamp if type(stamp) is str else None,
                entry.turn, lead, line.get("origin"))


class _Placer:
    """A source position for a carried item's ``source_uuid``: the first line with that key at
    or after the previous item's position (ids can repeat); unknown keys stay where we are."""

    def __init__(self, keys: dict[str, list[int]], agent: AgentKind) -> None:
        self.keys = keys
        self.codex = agent.session_suffix_in_uuid
        self.last = 0

    def __call__(self, source_uuid: str) -> int:
        key = source_uuid.rpartition("#")[0] if self.codex else source_uuid
        found = self.keys.get(key)
        if found:
            k = bisect_left(found, self.last)
            self.last = found[k] if k < len(found) else found[-1]
        return self.last


def _claude_lines(
    path: Path, config: Config
) -> tuple[dict[str, list[int]], list[tuple[int, str, int]]]:
    """Line numbers by event ``uuid``, and the noise each line adds to the ledger."""
    from runtime.engine.classify import Classifier
    from runtime.engine.speech import SpeechRules
    from runtime.engine.transcript import READ_BUFFER, ReadStats, tolerant

    stats = ReadStats()
    ledger = Ledger()
    classifier = Classifier(SpeechRules.from_config(config.rebuild), stats, ledger, None)
    keys: dict[str, list[int]] = {}
    noise: list[tuple[int, str, int]] = []
    tally = _Tally(ledger)
    with open(path, "rb", buffering=READ_BUFFER) as handle:
        for lineno, line in enumerate(handle, 1):
            try:
                event = orjson.loads(line)
            except orjson.JSONDecodeError:
                if not line.strip():
                    continue
                event = tolerant(line, stats, javascript=True)
            if type(event) is not dict:
                noise.append((lineno, MALFORMED, len(line)))
                continue
            uuid = event.get("uuid")
            if type(uuid) is str and uuid:
                keys.setdefault(uuid, []).append(lineno)
            classifier.event(event, len(line))
            noise.extend(tally.take(lineno))
    return keys, noise


def _codex_lines(path: Path) -> tuple[dict[str, list[int]], list[tuple[int, str, int]]]:
    """Read positions by ``file:line`` and message id (parents inlined), and each read line's
    noise (a malformed line counts where the next good one is)."""
    from runtime.engine.codex import rules
    from runtime.engine.codex.rollout import Classifier, Lines
    from runtime.engine.transcript import ReadStats

    stats = ReadStats()
    ledger = Ledger(rules.NOISE_CATEGORIES)
    classifier = Classifier(stats, ledger, None)
    keys: dict[str, list[int]] = {}
    noise: list[tuple[int, str, int]] = []
    tally = _Tally(ledger)
    position = 0
    for position, (event, size, where) in enumerate(Lines(path, stats, ledger)):
        keys.setdefault(where, []).append(position)
        payload = event.get("payload")
        ident = payload.get("id") if type(payload) is dict else None
        if type(ident) is str and ident:
            keys.setdefault(ident, []).append(position)
        classifier.event(event, size, where)
        noise.extend(tally.take(position))
    noise.extend(tally.take(position))  # malformed lines after the last good one
    return keys, noise


class _Tally:
    """What the ledger gained since the last ``take``, by category (malformed apart)."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.noise = dict(ledger.noise)
        self.malformed = ledger.malformed_bytes

    def take(self, position: int) -> list[tuple[int, str, int]]:
        now = self.ledger.noise
        added = [(position, category, nbytes - self.noise[category])
                 for category, nbytes in now.items() if nbytes != self.noise[category]]
        if added:
            self.noise = dict(now)
        if self.ledger.malformed_bytes != self.malformed:
            added.append((position, MALFORMED, self.ledger.malformed_bytes - self.malformed))
            self.malformed = self.ledger.malformed_bytes
        return added
