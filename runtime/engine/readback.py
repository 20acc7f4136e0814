"""Texts read back from the source: what lets ``fork`` write a big transcript's speech
without holding all of it (issue 13: 70 MiB of text for a speech-heavy 100 MB file).

The reader notes, for each utterance it may let go, the offset of its source line and its
place among the utterances that line makes (``runtime.engine.located.Located``). When the
candidate is written, ``refill`` reads each such line again, has a fresh classifier make
that line's utterances, and puts the text in its item just for the time it is written. The
digest of every let-go text was taken from the original string, so ``verify_candidate``
proves each text read back equals what the first read saw.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson

from runtime.engine.classify import Classifier
from runtime.engine.dirty import Ledger
from runtime.engine.located import Said, Where
from runtime.engine.speech import SpeechRules
from runtime.engine.transcript import ReadStats, tolerant
from runtime.errors import TranscriptError


def text_at(
    handle: Any, rules: SpeechRules, offset: int, size: int, place: int,
    scratch: tuple[ReadStats, Ledger] | None = None,
) -> str:
    """The text of the ``place``-th utterance the ``size`` bytes line at ``offset`` makes.

    The line is read with one ``pread`` of its known size (a seek and ``readline`` through
    the 8 KiB buffer took 3x as long on 46 KB lines). ``scratch``: the counts the classifier
    adds to (it only ever adds; nothing here reads them), shared by the lines of one
    read-back instead of made for each line."""
    line = os.pread(handle.fileno(), size, offset)
    try:
        event = orjson.loads(line)
    except orjson.JSONDecodeError:
        event = tolerant(line, ReadStats(), javascript=True)
    said = Said()
    # a fresh reader's state decides only the start-up snapshot (never let go, not counted)
    # and timestamps (kept with the item): the texts are the first read's
    stats, ledger = scratch or (ReadStats(), Ledger())
    classifier = Classifier(rules, stats, ledger, said)  # type: ignore[arg-type]
    if type(event) is dict:
        classifier.event(event, len(line))
    if place >= len(said.said):
        raise TranscriptError(f"transcript line at byte {offset} no longer holds its speech")
    return said.said[place].text


def refill(
    items: Iterable[dict[str, Any]], source: Path, rules: SpeechRules,
    where: dict[int, Where],
) -> Iterator[dict[str, Any]]:
    """``items`` in order, each let-go text read back while its item is being written."""
    if not where:
        yield from items
        return
    scratch = (ReadStats(), Ledger())
    with open(source, "rb") as handle:
        for position, item in enumerate(items):
            found = where.get(position)
            if found is None:
                yield item
                continue
            _, offset, size, place = found  # one file: the transcript itself
            if "message" in item:  # the text is the message's last block
                holder, key = item["message"]["content"][-1], "text"
            else:  # a voice line's text is its content
                holder, key = item, "content"
            holder[key] = text_at(handle, rules, offset, size, place, scratch)
            yield item
            holder[key] = ""  # written: the string and orjson's UTF-8 copy of it go
