"""The dirty ledger over the session's time: each line's noise bytes at the line's timestamp.

``timed_ledger`` reads the file once more on the engine's reference path (every line parsed,
no fast path) with the engine's own classifier (``runtime.engine.classify`` for Claude Code,
``runtime.engine.codex.rollout`` for Codex) and a plain ``Ledger``; after each line it books
what that line added to each noise category under the line's minute. Nothing is re-derived:
the categories and byte counts are the classifier's, so the per-minute counts sum to the
ledger ``dirty`` prints. A line without a usable timestamp (malformed, or none recorded) takes
the last one seen; lines before the first dated line take the first one.

Only ``tl-rebuild report`` reads this; the hot path (plan, dirty, fork, the hook) never does.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

import orjson

from runtime.config import RebuildConfig
from runtime.engine.dirty import Ledger
from runtime.engine.transcript import READ_BUFFER, ReadStats
from runtime.errors import TranscriptError

MALFORMED = "malformed"
UNDATED = ""  # the minute key of bytes seen before any dated line


class TimedLedger:
    """Noise bytes per category per UTC minute (``YYYY-MM-DDTHH:MM``), and the ledger itself.

    The first and the latest minute of the file are always keys (maybe with no bytes), so the
    minutes span the session's time, not only its noisy part."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.minutes: dict[str, dict[str, int]] = defaultdict(dict)
        self.minute = UNDATED
        self.first = UNDATED  # the first dated line's minute
        self.last = UNDATED  # the latest minute of any line
        self._before = self._state()

    def _state(self) -> tuple[int, ...]:
        return (*self.ledger.noise.values(), self.ledger.malformed_bytes)

    def at(self, stamp: Any) -> None:
        """The lines that follow happened at ``stamp`` (ignored when it is not a timestamp)."""
        minute = minute_of(stamp)
        if minute is not None:
            self.minute = minute
            self.first = self.first or minute
            self.last = max(self.last, minute)

    def book(self) -> None:
        """Book what the ledger gained since the last call under the current minute."""
        now = self._state()
        if now == self._before:
            return
        bucket = self.minutes[self.minute]
        names = (*self.ledger.noise, MALFORMED)
        for name, after, before in zip(names, now, self._before, strict=True):
            if after != before:
                bucket[name] = bucket.get(name, 0) + after - before
        self._before = now

    def finish(self) -> dict[str, dict[str, int]]:
        """Minute -> category -> bytes, oldest first; bytes before the first dated line count
        at its minute (with no dated line at all, everything stays under ``UNDATED``)."""
        self.book()
        undated = self.minutes.pop(UNDATED, {})
        merged = self.minutes.setdefault(self.first, {}) if undated else {}
        for name, nbytes in undated.items():
            merged[name] = merged.get(name, 0) + nbytes
        if self.first:  # the session's span, even where its ends carry no noise
            self.minutes.setdefault(self.first, {})
            self.minutes.setdefault(self.last, {})
        return dict(sorted(self.minutes.items()))

    def totals(self) -> dict[str, int]:
        """Noise bytes per category over the whole file (the ledger's, plus ``malformed``)."""
        return {**self.ledger.noise, MALFORMED: self.ledger.malformed_bytes}


def minute_of(stamp: Any) -> str | None:
    """``2026-04-26T21:55`` for an ISO-8601 timestamp (converted to UTC), else None."""
    if type(stamp) is not str or len(stamp) < 16 or stamp[10] != "T":
        return None
    if stamp.endswith("Z") and stamp[4] == "-" and stamp[13] == ":":
        return _checked_minute(stamp[:16])  # the common shape: one parse per minute
    try:
        moment = datetime.fromisoformat(stamp)
    except ValueError:
        return None
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M")


@lru_cache(maxsize=4096)
def _checked_minute(minute: str) -> str | None:
    try:
        datetime.strptime(minute, "%Y-%m-%dT%H:%M")
    except ValueError:
        return None
    return minute


def timed_ledger(path: Path, rules: RebuildConfig, codex: bool) -> TimedLedger:
    """Read ``path`` (a Claude Code transcript, or a Codex rollout when ``codex``) line by line
    and return its noise per minute."""
    if codex:
        return _codex(path)
    return _claude(path, rules)


def _claude(path: Path, rules: RebuildConfig) -> TimedLedger:
    from runtime.engine.classify import Classifier
    from runtime.engine.speech import SpeechRules
    from runtime.engine.transcript import book_malformed, tolerant  # the reference path's own rules

    stats = ReadStats()
    timed = TimedLedger(Ledger())
    classifier = Classifier(SpeechRules.from_config(rules), stats, timed.ledger, None)
    try:
        handle = open(path, "rb", buffering=READ_BUFFER)
    except OSError as exc:
        raise TranscriptError(f"transcript {str(path)!r} cannot be read: {exc.strerror}") from exc
    with handle:
        for lineno, line in enumerate(handle, 1):
            try:
                event = orjson.loads(line)
            except orjson.JSONDecodeError:
                event = None if not line.strip() else tolerant(line, stats, True)
                if event is None and line.strip():
                    book_malformed(stats, timed.ledger, lineno, line)
            if type(event) is dict:
                timed.at(event.get("timestamp"))
                classifier.event(event, len(line))
            elif event is not None:
                book_malformed(stats, timed.ledger, lineno, line)
            timed.book()
    classifier.finish()
    return timed


def _codex(path: Path) -> TimedLedger:
    from runtime.engine.codex import rules as codex_rules
    from runtime.engine.codex.rollout import Classifier, Lines

    stats = ReadStats()
    timed = TimedLedger(Ledger(codex_rules.NOISE_CATEGORIES))
    classifier = Classifier(stats, timed.ledger, None)
    for event, size, where in Lines(path, stats, timed.ledger):
        timed.book()  # malformed lines skipped since the last event: at the last known time
        timed.at(event.get("timestamp"))
        classifier.event(event, size, where)
        timed.book()
    return timed
