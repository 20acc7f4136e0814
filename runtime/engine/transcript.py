"""Reading a Claude Code transcript: the input checks and a streaming line reader.

``resolve_transcript`` refuses anything that is not a readable ``.jsonl`` file (inside
``project_dir`` when one is configured). ``scan`` reads the file once, line by line (memory
bounded by the largest line), lets ``runtime.engine.prefilter`` settle the lines that cannot carry
speech, parses every other line with orjson, counts malformed and partial lines, and hands
each parsed event to ``runtime.engine.classify.Classifier``, the speech allowlist.
"""

from __future__ import annotations

import gc
import json
import os
import re
import stat
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol

import orjson

from runtime.config import Config, RebuildConfig
from runtime.engine.dirty import Ledger
from runtime.engine.speech import SpeechRules
from runtime.errors import OutsideProjectError, TranscriptError

if TYPE_CHECKING:
    from runtime.engine.turns import TurnBuilder as Sink

MALFORMED_SAMPLE = 20
# a 1 MiB read buffer: line iteration over 100 MB of multi-100-KB lines (images, tool
# results) takes 0.02 s with it against 0.05 s with the 8 KiB default (issue 13)
READ_BUFFER = 1 << 20
# the reader's fast path (runtime.engine.prefilter); tests turn it off for the reference
FAST = True
Progress = Callable[[int, int], None]


class Observer(Protocol):
    """A second reader of the same pass (runtime.engine.audit.SecondReading)."""

    # the ``type`` of every settled line ``wants`` may say yes to; others are not asked
    wanted: frozenset[str]

    def event(self, event: dict[str, Any], line: int) -> None: ...

    def wants(self, line: bytes, kind: str, content: Any) -> bool:
        """Whether a line of ``type`` ``kind`` the fast path settled may matter to this reader
        (``content``: an assistant line's message content as the fast path decoded it)."""
        ...


class ReadStats:
    """What the reader saw: lines, bytes, malformed lines, ignored events by type and reason."""

    def __init__(self) -> None:
        self.lines = 0
        self.bytes = 0
        self.blank_lines = 0
        self.malformed = 0
        self.malformed_non_utf8 = 0
        self.malformed_lines: list[int] = []
        self.partial_tail = False
        self.last_malformed = 0  # the sample list is capped; the partial tail needs the last
        self.types: Counter[str] = Counter()
        self.spoke: Counter[str] = Counter()  # events, by type, that carried speech
        self.ignored_reasons: Counter[str] = Counter()
        self.speech: Counter[str] = Counter()
        self.timestamps_replaced = 0
        # lines the full parse read as JSON.parse does, U+FFFD or inf in place (a noise line
        # the fast path settles is not parsed, so not counted here)
        self.lone_surrogate_lines = 0  # parsed by the tolerant fallback, U+FFFD in place
        self.invalid_utf8_lines = 0  # bytes not UTF-8 read as U+FFFD, as Claude Code does
        self.wide_number_lines = 0  # a number beyond the double range read as inf, as JS does
        # (parent uuid, line) of each human speech line that rewound the conversation (the
        # classifier's ``_rewind``) and, once read again with them muted, what the lines of
        # those abandoned branches said, by kind (not carried: Claude Code never sends them)
        self.rewinds: list[tuple[str, int]] = []
        self.rewound_lines = 0
        self.rewound: Counter[str] = Counter()

    @property
    def events(self) -> int:
        return sum(self.types.values())

    @property
    def ignored_types(self) -> Counter[str]:
        """Events, by type, that carried no speech (derived: one counter less per line)."""
        return Counter({t: n - self.spoke[t] for t, n in self.types.items() if n > self.spoke[t]})

    def as_dict(self) -> dict[str, Any]:
        return {
            "lines": self.lines,
            "bytes": self.bytes,
            "events": self.events,
            "blank_lines": self.blank_lines,
            "malformed": self.malformed,
            "malformed_non_utf8": self.malformed_non_utf8,
            "malformed_sample_lines": list(self.malformed_lines),
            "partial_tail": self.partial_tail,
            "lone_surrogate_lines": self.lone_surrogate_lines,
            "invalid_utf8_lines": self.invalid_utf8_lines,
            "rewound_lines": self.rewound_lines,
            "rewound_speech": dict(self.rewound),
            "wide_number_lines": self.wide_number_lines,
            "types": dict(self.types.most_common()),
            "ignored_types": dict(self.ignored_types.most_common()),
            "ignored_reasons": dict(self.ignored_reasons.most_common()),
        }


def resolve_transcript(path: str | os.PathLike[str], config: Config) -> Path:
    """Check ``path`` is a readable .jsonl file (inside ``project_dir`` when configured)."""
    given = Path(path).expanduser().absolute()
    shown = str(given)
    if not given.name.endswith(".jsonl"):
        raise TranscriptError(f"transcript {shown!r} is not a .jsonl file")
    try:
        real = given.resolve(strict=True)
    except FileNotFoundError as exc:
        what = "is a dangling symlink" if given.is_symlink() else "not found"
        raise TranscriptError(f"transcript {shown!r} {what}") from exc
    except OSError as exc:
        raise TranscriptError(f"transcript {shown!r} cannot be resolved: {exc.strerror}") from exc
    except RuntimeError as exc:  # Python 3.11's resolve(strict=True) on a symlink loop
        raise TranscriptError(f"transcript {shown!r} cannot be resolved: symlink loop") from exc
    if config.project_dir is not None:
        project = config.project_dir.expanduser().resolve()
        if not real.is_relative_to(project):
            plain = Path(os.path.normpath(given))  # `..` alone is no symlink
            how = f"is a symlink to {str(real)!r}" if real != plain else "is"
            raise OutsideProjectError(
                f"transcript {shown!r} {how} outside project_dir {str(project)!r}"
            )
    try:
        mode = real.stat().st_mode
    except OSError as exc:
        raise TranscriptError(f"transcript {shown!r} cannot be read: {exc.strerror}") from exc
    if stat.S_ISDIR(mode):
        raise TranscriptError(f"transcript {shown!r} is a directory")
    if not stat.S_ISREG(mode):
        raise TranscriptError(f"transcript {shown!r} is not a regular file")
    if not real.name.endswith(".jsonl"):
        raise TranscriptError(f"transcript {shown!r} points to {str(real)!r}, not a .jsonl file")
    try:
        with open(real, "rb"):
            pass
    except OSError as exc:
        raise TranscriptError(f"transcript {shown!r} cannot be read: {exc.strerror}") from exc
    return real


def scan(
    path: Path,
    rules: RebuildConfig,
    sink: Sink | None = None,
    progress: Progress | None = None,
    observer: Observer | None = None,
    *,
    fast: bool | None = None,
    limit: int | None = None,
    rewound: dict[str, int] | None = None,
) -> tuple[ReadStats, Ledger]:
    """Read ``path`` once, classify every event, and return what was seen and the ledger.

    ``observer`` (the independent audit, runtime.engine.audit) sees every parsed event with its line
    number before the classifier does, so it needs no second read of the file; a line the fast
    path settles is parsed for it only when ``observer.wants`` the raw line.
    ``fast`` (default ``FAST``) lets ``runtime.engine.prefilter`` settle the lines that cannot carry
    speech without parsing them whole; False parses every line, the plain reference path the
    tests hold the fast one to.
    ``limit`` (default: the file's size when it is opened) is how many bytes are read: a
    transcript Claude Code appends to meanwhile is read as it was, its last line cut where
    the limit falls (a partial tail), never split in two where a read met a half-written line.
    ``rewound`` (parent uuid -> line of the human line that rewound to it, from a first read's
    ``stats.rewinds``): the lines after that parent and before that line are read with the
    sink muted (``Rewound``) and unseen by the observer — counted, never carried. Such a read
    parses every line (rare: only a transcript with a rewind is read twice).
    """
    # the Claude classifier and prefilter, imported here: the Codex reader uses this module's
    # helpers (ReadStats, READ_BUFFER, ...) and never them
    from runtime.engine.classify import Classifier
    from runtime.engine.prefilter import Prefilter

    stats = ReadStats()
    ledger = Ledger()
    classifier = Classifier(SpeechRules.from_config(rules), stats, ledger, sink)
    handle_event = classifier.event
    prefilter = Prefilter(classifier)
    take = prefilter.take if (FAST if fast is None else fast) and rewound is None else None
    muted = Rewound(stats) if rewound is not None else None
    skip_until = 0  # lines before this one (after a rewind's parent) are muted
    loads = orjson.loads
    wanted = observer.wanted if observer is not None else frozenset()
    # a sink that reads its texts back later wants the offset of the line each one came from
    locate = sink is not None and hasattr(sink, "line_at")
    try:
        handle = open(path, "rb", buffering=READ_BUFFER)
        total = os.fstat(handle.fileno()).st_size if limit is None else limit
    except OSError as exc:
        raise TranscriptError(f"transcript {str(path)!r} cannot be read: {exc.strerror}") from exc
    step = max(total // 100, 1 << 20)
    next_mark = step
    lineno = 0
    position = 0
    last = b""
    with handle:
        for line in as_opened(handle, total):
            lineno += 1
            size = len(line)
            position += size
            last = line
            if progress is not None and position >= next_mark:
                progress(position, total)
                next_mark = position + step
            if take is not None and take(line, size):
                if observer is not None and prefilter.kind in wanted and observer.wants(
                    line, prefilter.kind, prefilter.content
                ):
                    _observe_settled(observer, line, lineno)
                continue
            try:
                event = loads(line)
            except orjson.JSONDecodeError:
                if not line.strip():
                    stats.blank_lines += 1
                    continue
                event = tolerant(line, stats, javascript=True)
                if event is None:
                    book_malformed(stats, ledger, lineno, line)
                    continue
            if type(event) is not dict:
                book_malformed(stats, ledger, lineno, line)
                continue
            if muted is not None and rewound is not None:
                if lineno < skip_until:
                    stats.rewound_lines += 1
                    classifier.sink = muted  # type: ignore[assignment]
                    classifier.line = lineno
                    handle_event(event, size)
                    classifier.sink = sink
                    continue
                uuid = event.get("uuid")
                if type(uuid) is str and rewound.get(uuid, 0) > lineno + 1:
                    skip_until = max(skip_until, rewound[uuid])
            if observer is not None:
                observer.event(event, lineno)
            if locate:
                sink.line_at = position - size  # type: ignore[union-attr]
                sink.line_size = size  # type: ignore[union-attr]
            classifier.line = lineno
            handle_event(event, size)
    prefilter.flush()
    stats.lines = lineno
    stats.bytes = position
    if last and not last.endswith(b"\n") and stats.last_malformed == lineno:
        stats.partial_tail = True
    classifier.finish()
    if progress is not None:
        progress(position, total)
    if stats.events == 0 and stats.malformed > 0:
        raise TranscriptError(
            f"transcript {str(path)!r} is not a JSONL transcript: "
            f"{stats.malformed} malformed line(s) and no valid event"
        )
    return stats, ledger


class Rewound:
    """The sink of the lines on a branch the human rewound past: what they say is counted in
    ``stats.rewound`` by kind (and taken out of the reader's speech counts), never kept."""

    def __init__(self, stats: ReadStats) -> None:
        self.stats = stats
        self.uuidless: Counter[tuple[int, str]] = Counter()

    def _drop(self, utt: Any) -> None:
        self.stats.rewound[utt.kind] += 1
        if utt.kind != "slash":  # (a slash command is not in the reader's counts)
            self.stats.speech[utt.kind] -= 1

    human = assistant = slash = _drop

    def compact_summary(self, utt: Any, covered: bool) -> None:
        pass

    def snapshot(self, utt: Any) -> None:
        pass

    def model_activity(self) -> None:
        pass

    def local_output(self) -> None:
        pass


def as_opened(handle: BinaryIO, size: int | None = None) -> Iterator[bytes]:
    """The lines of ``handle``'s first ``size`` bytes (default: the file's size now).

    Claude Code and Codex append to the file being read: iterating it past that size met a
    half-written line at the end and then its rest, two lines where there is one. Read this
    way, what was written after the read began is left for the next read, and a last line
    cut at ``size`` is the partial tail.
    """
    left = os.fstat(handle.fileno()).st_size if size is None else size
    for line in handle:
        if len(line) >= left:
            if left:
                yield line[:left]
            return
        left -= len(line)
        yield line


def tolerant(line: bytes | str, stats: ReadStats, javascript: bool = False) -> Any:
    """The event of a line orjson refuses but JSON allows: lone UTF-16 surrogate escapes
    (``"\\ud83d"``, what JavaScript writes for a split emoji). Each lone surrogate becomes
    U+FFFD so the words around it are carried and the candidate stays valid UTF-8 JSON.

    ``javascript`` (the Claude reader): read what Claude Code's ``JSON.parse`` reads too (tested
    with the real CLI: the model is sent those lines' words). A line holding bytes that are
    not UTF-8 — Node decodes the file with U+FFFD for each maximal invalid sequence, as
    Python's ``"replace"`` does; a number beyond the double range — ``Infinity`` to
    JavaScript, ``inf`` here (written back as ``null`` by orjson, as ``JSON.stringify``
    would). Codex 0.169 (serde_json) skips both; its reader leaves them malformed."""
    if javascript and type(line) is bytes and not line.isascii():
        try:
            line.decode("utf-8")
        except UnicodeDecodeError:
            return _replaced(line, stats)
    surrogates = (b"\\u" in line) if isinstance(line, bytes) else ("\\u" in line)
    if not (surrogates or javascript and _wide_number(line)):
        return None
    try:
        event = json.loads(line, parse_constant=_refuse)
    except (ValueError, RecursionError):
        return None
    if not surrogates:
        stats.wide_number_lines += 1
        return event
    stats.lone_surrogate_lines += 1
    return _repair(event)


# an exponent of three or more digits: the only way JSON writes a number beyond the double range
# (an integer of any length is read by orjson, as a float where it must)
_WIDE_BYTES = re.compile(rb"[0-9][eE][+-]?[0-9]{3}").search
_WIDE_STR = re.compile(r"[0-9][eE][+-]?[0-9]{3}").search


def _wide_number(line: bytes | str) -> bool:
    return (_WIDE_BYTES(line) if isinstance(line, bytes) else _WIDE_STR(line)) is not None


def _replaced(line: bytes, stats: ReadStats) -> Any:
    """The event of ``line`` decoded with U+FFFD for its bytes that are not UTF-8 (None when
    it is not JSON even so: a cut line stays malformed)."""
    text = line.decode("utf-8", "replace")
    try:
        event = orjson.loads(text)
    except orjson.JSONDecodeError:
        event = tolerant(text, stats, javascript=True)
    if type(event) is dict:
        stats.invalid_utf8_lines += 1
    return event


def _refuse(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def _repair(value: Any) -> Any:
    if type(value) is str:
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if type(value) is list:
        return [_repair(v) for v in value]
    if type(value) is dict:
        return {_repair(k): _repair(v) for k, v in value.items()}
    return value


def _observe_settled(observer: Observer, line: bytes, lineno: int) -> None:
    """Show the observer a line the fast path settled for the classifier (already counted)."""
    try:
        event = orjson.loads(line)
    except orjson.JSONDecodeError:  # msgspec took it, orjson does not: a wide number, read
        event = tolerant(line, ReadStats(), javascript=True)  # as JSON.parse does, not counted
    if type(event) is dict:
        observer.event(event, lineno)


def book_malformed(stats: ReadStats, ledger: Ledger, lineno: int, line: bytes) -> None:
    stats.malformed += 1
    stats.last_malformed = lineno
    ledger.malformed_bytes += len(line)
    if len(stats.malformed_lines) < MALFORMED_SAMPLE:
        stats.malformed_lines.append(lineno)
    try:
        line.decode("utf-8")
    except UnicodeDecodeError:
        stats.malformed_non_utf8 += 1


@contextmanager
def no_cycle_collection() -> Iterator[None]:
    """Pause the cyclic garbage collector (as it was before, after).

    Reading a transcript or rollout allocates tens of thousands of acyclic containers
    (utterances, parts, UI copies, turns) that live to the end; each automatic collection
    walks all of them again (a third of ``plan``'s time on a 100 MB rollout, 3 % on a
    Claude transcript). Reference counting frees everything else as before.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
