"""The candidate session (SPEC §3.4–§3.7): what a rebuild carries, built in one read.

``build`` reads the source once, groups speech into turns, applies the open-tail, carry-cap
and poison rules, and lays out the new session's items: only ``user``/``assistant`` events,
a fresh ``sessionId``, deterministic item ids, a linear parent chain, text verbatim (a turn's
time stamp is a separate leading block). ``write`` puts it on disk atomically, mode 0600.
"""

from __future__ import annotations

import uuid
from collections import Counter, deque
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, Protocol, TypeVar

import orjson

from runtime.config import Config
from runtime.engine.dirty import Ledger
from runtime.engine.items import SUMMARY_MARK, Layout, ManifestEntry, sha256_text
from runtime.engine.speech import SPEECH_KINDS, SpeechRules, Utterance
from runtime.engine.tokens import apply_cap, estimate_tokens, poison_hits
from runtime.engine.transcript import Progress, ReadStats, no_cycle_collection, scan
from runtime.engine.turns import CompactSummary, Turn, TurnBuilder
from runtime.errors import BlockedError, NothingToCarryError
from runtime.record import Record

if TYPE_CHECKING:  # the audit and read-back are Claude's: imported where they run (Codex's
    # plan and fork never load them, nor the Claude classifier readback brings)
    from runtime.engine.audit import Hear, Recognised
    from runtime.engine.located import Where

# characters of speech a fork holds before it lets the oldest turns' texts go and reads them
# back from the source when writing (bounded memory; below it, no second read: tool-heavy
# files carry little text but from huge lines, 2.0x the scan when read back). Tests set 0.
HOLD_CHARS = 4_000_000


class Build(Record):
    """Everything one read of a transcript says about rebuilding it."""

    source: Path
    new_session_id: str
    turns: tuple[Turn, ...]
    selected: tuple[int, ...]
    items: tuple[dict[str, Any], ...]
    manifest: tuple[ManifestEntry, ...]
    read: ReadStats
    ledger: Ledger
    counts: dict[str, dict[str, int]]
    details: dict[str, Any]
    blocked_reason: str | None
    empty_reason: str | None
    item_count: int

    @property
    def startup_snapshot(self) -> str | None:
        """The frozen start-up injection carried as the first item (for the backup), or None."""
        if self.manifest and self.manifest[0].kind == "startup_snapshot":
            return str(self.items[0]["message"]["content"][-1]["text"])
        return None

    def stats(self) -> dict[str, Any]:
        """The build as plain JSON-able data (no conversation text)."""
        return {
            "source": str(self.source),
            "new_session_id": self.new_session_id,
            "items": self.item_count,
            **self.details,
            "speech": self.counts,
            "read": self.read.as_dict(),
            "blocked_reason": self.blocked_reason,
            "nothing_to_carry": self.empty_reason,
        }

B = TypeVar("B", bound=Build)
B_co = TypeVar("B_co", bound=Build, covariant=True)


class Builder(Protocol[B_co]):
    """An agent's ``build``: read ``source`` once and lay out its candidate (nothing written).

    ``lay_out=False`` (``plan``) decides and counts everything but skips building the items
    and manifest; such a build cannot be written.
    """

    def __call__(
        self, source: Path, config: Config, *, new_session_id: str | None = None,
        progress: Progress | None = None, lay_out: bool = True,
    ) -> B_co: ...


def builder(make: Callable[[Path, Config, str | None, Progress | None, bool], B]) -> Builder[B]:
    """``make`` as an agent's public ``build``: keyword options, and the read made with the
    cyclic GC paused (``no_cycle_collection``) — the one entry both agents share."""

    def build(source: Path, config: Config, *, new_session_id: str | None = None,
              progress: Progress | None = None, lay_out: bool = True) -> B:
        with no_cycle_collection():
            return make(Path(source), config, new_session_id, progress, lay_out)

    build.__doc__ = make.__doc__
    return build


def _build(
    source: Path, config: Config, new_session_id: str | None, progress: Progress | None,
    lay_out: bool,
) -> Build:
    """Read ``source`` once and lay out the candidate session (nothing is written)."""
    from runtime.engine.audit import SecondReading
    from runtime.engine.located import Located

    knobs = config.rebuild
    rewound: dict[str, int] | None = None
    while True:
        reading = SecondReading(frozenset(knobs.reply_chat_ids))
        sink = (
            _Shedding(config, reading.hear, Located(), HOLD_CHARS) if lay_out
            else _Shedding(config, reading.hear)
        )
        read, ledger = scan(Path(source), knobs, sink, progress, reading, rewound=rewound)
        if rewound is not None or not read.rewinds:
            break
        # the human rewound: read again with the abandoned branches muted (Claude Code's
        # resume walks the parent chain back from the leaf and never sends them)
        rewound = {}
        for parent, line in read.rewinds:
            rewound[parent] = max(rewound.get(parent, 0), line)
    turns = sink.finish()
    session = new_session_id or str(uuid.uuid4())
    stamps = [_turn_stamp(turn) if knobs.stamp_turns else None for turn in turns]
    plan = _select(sink, turns, stamps, config)
    recognised = _recognised(sink, turns)
    if isinstance(sink, _Shedding) and sink.tokens:
        recognised.replay = partial(_replay, Path(source), config, read.bytes)
    second = reading.compare(recognised)
    if plan.blocked is None and second.reason() is not None and (
        knobs.unrecognised_speech == "block"
    ):
        plan = plan._replace(blocked=second.reason())
    layout = Layout(session)
    if isinstance(sink, _Shedding):
        layout.digests = sink.digests
    _lay_out(layout, sink.startup, turns, stamps, plan)
    items, manifest = layout.finish() if lay_out else ([], [])
    carried: tuple[dict[str, Any], ...] = tuple(items)
    if isinstance(sink, _Shedding) and sink.digests:
        where = {at: sink.where[id(utt)] for at, (utt, _, _) in enumerate(layout.pending)
                 if id(utt) in sink.digests}
        carried = _ReadBack.of(items, Path(source), SpeechRules.from_config(knobs), where)
    return _assemble(
        Build, Path(source), session, (read, ledger), sink, turns, plan, layout, config,
        items=carried, manifest=manifest, counts=_counts(sink, turns, plan.keep, read),
        audit=second.as_dict(),
    )


build = builder(_build)


class _ReadBack(tuple[dict[str, Any], ...]):
    """A big fork's items: the texts of turns its reader let go are read back when written."""

    source: Path
    rules: SpeechRules
    where: dict[int, Where]  # item position -> (file, line offset, size, place)

    @classmethod
    def of(
        cls, items: list[dict[str, Any]], source: Path, rules: SpeechRules,
        where: dict[int, Where],
    ) -> _ReadBack:
        made = cls(items)
        made.source, made.rules, made.where = source, rules, where
        return made


def _assemble(
    kind: type[B], source: Path, session: str, scanned: tuple[ReadStats, Ledger],
    sink: TurnBuilder, turns: list[Turn], plan: _Selection, layout: Layout, config: Config,
    *, items: Any, manifest: list[ManifestEntry], counts: dict[str, dict[str, int]],
    audit: dict[str, Any], **extra: Any,
) -> B:
    """A ``kind`` build from one read, its plan and layout: the fields every agent fills alike.

    ``items`` is a tuple of Claude events, or Codex's lazy ``RolloutLines`` (made when written).
    """
    read, ledger = scanned
    return kind(
        source=source,
        new_session_id=session,
        turns=tuple(turns),
        selected=tuple(plan.keep),
        items=items,
        manifest=tuple(manifest),
        read=read,
        ledger=ledger,
        counts=counts,
        details={**_details(sink, turns, plan, layout, config), "recognition_audit": audit},
        blocked_reason=plan.blocked,
        empty_reason=_empty_reason(read, turns, plan.keep, layout.count),
        item_count=layout.count,
        **extra,
    )


class _Selection(NamedTuple):
    """Which turns and summaries are carried, what that costs, and what blocks it."""

    keep: list[int]
    excluded_tail: int
    dropped: int
    summaries: list[CompactSummary]
    tokens: float
    poison_hits: int
    blocked: str | None


def _select(
    sink: TurnBuilder, turns: list[Turn], stamps: list[str | None], config: Config
) -> _Selection:
    """Open tail, carry cap and poison check (SPEC §3.4, §3.6, §3.7)."""
    knobs = config.rebuild
    sealed = sink.tokens if isinstance(sink, _Shedding) else {}
    turn_tokens = [
        sealed[turn.index] if turn.index in sealed else _turn_tokens(turn, stamp, config)
        for turn, stamp in zip(turns, stamps, strict=True)
    ]
    keep = list(range(len(turns)))
    excluded_tail = 0
    if keep and turns[-1].open and not knobs.include_open_tail:
        keep.pop()
        excluded_tail = 1
    fixed = estimate_tokens(sink.startup.text, knobs) if sink.startup else 0.0
    keep, dropped, summaries, total, blocked = apply_cap(
        keep, turn_tokens, sink.summaries, fixed, config
    )
    window = turns[-knobs.poison_window_turns :]
    hits = poison_hits([u.text for turn in window for u in turn.items], knobs)
    if blocked is None and hits >= knobs.poison_threshold:
        blocked = (
            f"poison check: {hits} hit(s) in the last {knobs.poison_window_turns} turn(s) "
            f">= poison_threshold {knobs.poison_threshold}; rebuild from durable memory instead"
        )
    return _Selection(keep, excluded_tail, dropped, summaries, total, hits, blocked)


def _recognised(sink: TurnBuilder, turns: list[Turn]) -> Recognised:
    """What the classifier produced, per source line, for the independent audit."""
    from runtime.engine.audit import Recognised

    seen = Recognised(slash_seen=sink.counts["slash"] + sink.slash_local + sink.slash_unanswered)
    seen.by_line = sink.uuidless  # made, not only kept in turns: the lines have no other key
    extra = [s.utterance for s in sink.summaries] + ([sink.startup] if sink.startup else [])
    shed = sink.tokens if isinstance(sink, _Shedding) else {}
    for turn in turns:
        for utt in turn.items:
            seen.per_line[(utt.source_uuid, utt.role)] += 1
            if utt.role == "user" and turn.index not in shed:
                seen.human_texts.append(utt.text)
    for utt in extra:
        seen.per_line[(utt.source_uuid, utt.role)] += 1
        if utt.role == "user":
            seen.human_texts.append(utt.text)
    return seen


W = TypeVar("W")  # where a let-go text's source line is: an agent's read-back says


class Locating(Protocol[W]):
    """Notes where each utterance came from (``readback.Located``, Codex's own): the reader
    sets the sink's ``line_at``/``line_size``, which ``_Shedding`` hands on before ``note``."""

    line_at: int
    line_size: int
    where: dict[int, W]

    def note(self, utt: Utterance) -> None: ...


class _Shedding(TurnBuilder, Generic[W]):
    """Turns whose texts are let go once they lie outside the poison window and more than
    ``hold`` characters are held (oldest first; the token estimate stays in ``tokens``, by turn
    index); every human text is told to ``hear`` (the audit's enqueued-prompt match) as it is
    made. ``plan`` never writes the texts (``hold`` 0); ``fork`` notes where each came from
    (``located``) and keeps its digest, to read it back when writing.

    Peak memory is then bounded by the window and ``hold``, not by the transcript's speech
    (issue 13: a speech-heavy 100 MB file held 70 MiB of text to the end).
    """

    def __init__(
        self, config: Config, hear: Hear | None, located: Locating[W] | None = None,
        hold: int = 0,
    ) -> None:
        super().__init__()
        self.config = config
        self.hear = hear
        self.window = config.rebuild.poison_window_turns
        self.tokens: dict[int, float] = {}
        self.hold = hold  # characters held before turns past the window are let go
        self.held = 0
        self.past: deque[Turn] = deque()  # turns past the window still holding their texts
        # fork: where each let-go text came from and its digest, by id of what stands for it
        self.located = located
        self.where: dict[int, W] = {}
        self.digests: dict[int, str] = {}
        if located is not None:
            self.line_at = -1  # set by scan for each parsed line (see ``Located``)
            self.line_size = 0

    def human(self, utt: Utterance) -> None:
        self._note(utt)
        super().human(utt)

    def slash(self, utt: Utterance) -> None:
        self._note(utt)
        super().slash(utt)

    def assistant(self, utt: Utterance) -> None:
        self._note(utt)
        self.held += len(utt.text)
        super().assistant(utt)

    def _note(self, utt: Utterance) -> None:
        if self.located is not None:
            self.located.line_at = self.line_at
            self.located.line_size = self.line_size
            self.located.note(utt)

    def _add_human(self, utt: Utterance) -> None:
        if self.hear is not None:
            self.hear(utt.text)
        self.held += len(utt.text)
        count = len(self.turns)
        super()._add_human(utt)
        old = len(self.turns) - 1 - self.window  # no later turn reaches back to it
        if len(self.turns) > count and self.window > 0 and old >= 0:
            self.past.append(self.turns[old])
        while self.past and self.held > self.hold:
            self._shed(self.past.popleft())

    def _shed(self, turn: Turn) -> None:
        knobs = self.config.rebuild
        stamp = _turn_stamp(turn) if knobs.stamp_turns else None
        self.held -= sum(len(u.text) for u in turn.items)
        items = [Utterance(u[0], u[1], "", *u[3:]) for u in turn.items]  # _replace: 4x
        if self.located is None:
            self.tokens[turn.index] = _turn_tokens(turn, stamp, self.config)
        else:  # each text encoded once, for its digest and its token estimate
            made = self.located.where
            tokens = 0.0  # summed in _turn_tokens' order: the same float
            for utt, gone in zip(turn.items, items, strict=True):
                encoded = utt.text.encode("utf-8", "surrogatepass")
                tokens += estimate_tokens(utt.text, knobs, encoded)
                self.where[id(gone)] = made.pop(id(utt))
                self.digests[id(gone)] = sha256_text(utt.text, encoded)
            self.tokens[turn.index] = tokens + (estimate_tokens(stamp, knobs) if stamp else 0.0)
        turn.items = items


def _replay(source: Path, config: Config, size: int, hear: Hear) -> None:
    """Read ``source`` again, as far as it was read first (``size`` bytes), and tell every
    human text the turns hold to ``hear``."""
    scan(source, config.rebuild, _Shedding(config, hear), limit=size)


def _lay_out(
    layout: Layout,
    startup: Utterance | None,
    turns: list[Turn],
    stamps: list[str | None],
    plan: _Selection,
) -> Layout:
    """Queue the carried utterances in order: snapshot, then turns with summaries in place."""
    if startup is not None:
        layout.add(startup, None, None)
    summaries = list(plan.summaries)
    for index in plan.keep:
        while summaries and summaries[0].anchor <= index:
            layout.add(summaries.pop(0).utterance, SUMMARY_MARK, None)
        first_human = True
        for utt in turns[index].items:
            stamp = None
            if utt.role == "user" and first_human:
                stamp, first_human = stamps[index], False
            layout.add(utt, stamp, index)
    for summary in summaries:
        layout.add(summary.utterance, SUMMARY_MARK, None)
    return layout


def _details(
    sink: TurnBuilder, turns: list[Turn], plan: _Selection, layout: Layout, config: Config
) -> dict[str, Any]:
    knobs = config.rebuild
    return {
        "turns": {
            "source": len(turns),
            "selected": len(plan.keep),
            "open_tail": bool(turns and turns[-1].open),
            "excluded_open_tail": plan.excluded_tail,
            "dropped_oldest_turns": plan.dropped,
        },
        "slash_commands": {
            "carried": sink.counts["slash"],
            "local_dropped": sink.slash_local,
            "unanswered_dropped": sink.slash_unanswered,
        },
        "tokens": _token_report(plan.tokens, config),
        "startup_snapshot": _snapshot_report(sink.startup),
        "compaction": {"summaries": len(sink.summaries), "carried": len(plan.summaries)},
        "poison": {
            "hits": plan.poison_hits,
            "window_turns": knobs.poison_window_turns,
            "threshold": knobs.poison_threshold,
            "blocked": plan.poison_hits >= knobs.poison_threshold,
        },
        "timestamps_replaced": layout.timestamps_replaced(),
        "timestamp_fallbacks": layout.timestamp_fallbacks(),
        "versions_filled": layout.versions_filled(),
    }


def write(build: Build, directory: Path) -> Path:
    """Write the candidate as ``<directory>/<new_session_id>.jsonl`` (atomic, 0600)."""
    refuse_unwritable(build, build.item_count)
    target = Path(directory) / f"{build.new_session_id}.jsonl"
    items: Iterable[dict[str, Any]] = build.items
    if isinstance(items, _ReadBack):
        from runtime.engine.readback import refill

        items = refill(items, items.source, items.rules, items.where)
    write_lines(target, items)
    return target


def refuse_unwritable(build: Build, lines: int) -> None:
    """Raise unless ``build`` carries something, is not blocked and was laid out (``lines``)."""
    if build.empty_reason is not None:
        raise NothingToCarryError(
            f"nothing to carry from {str(build.source)!r}: {build.empty_reason}"
        )
    if build.blocked_reason is not None:
        raise BlockedError(f"rebuild of {str(build.source)!r} is blocked: {build.blocked_reason}")
    if len(build.items) != lines:
        raise ValueError("a build made with lay_out=False cannot be written")


def write_lines(target: Path, lines: Iterable[dict[str, Any]]) -> None:
    """Write ``lines`` as JSONL at ``target`` (atomic, 0600), one line in memory at a time;
    missing folders above it are made (0700), as ``fork --into`` promises."""
    from runtime import proc  # only writing needs the machine door

    proc.make_parents(target)
    # line by line: joined, a speech-heavy candidate doubled fork's peak memory; orjson
    # appends the newline itself (no second copy of a 46 KB line)
    dumps, newline = orjson.dumps, orjson.OPT_APPEND_NEWLINE
    proc.atomic_write_chunks(target, (dumps(line, option=newline) for line in lines), mode=0o600)


def write_manifest(build: Build, path: Path) -> str:
    """Write ``build``'s manifest as JSONL at ``path`` (atomic, 0600; missing folders made,
    0700); return its SHA-256."""
    import hashlib

    from runtime import proc
    from runtime.engine.items import manifest_jsonl

    if len(build.manifest) != build.item_count:
        raise ValueError("a build made with lay_out=False has no manifest")
    data = manifest_jsonl(build.manifest)
    proc.make_parents(path)
    proc.atomic_write(Path(path), data, mode=0o600)
    return hashlib.sha256(data).hexdigest()


def _turn_stamp(turn: Turn) -> str | None:
    """The time stamp the turn's first human item opens with; none when that item is a
    voice line (its content is carried as Claude Code stored it, nothing added)."""
    for utt in turn.items:
        if utt.role == "user" and utt.kind == "voice":
            return None
        if utt.role == "user" and utt.timestamp:
            moment = datetime.fromisoformat(utt.timestamp).astimezone(UTC)
            return moment.strftime("[%Y-%m-%d %H:%M UTC]")
    return None


def _turn_tokens(turn: Turn, stamp: str | None, config: Config) -> float:
    total = sum(estimate_tokens(u.text, config.rebuild) for u in turn.items)
    return total + (estimate_tokens(stamp, config.rebuild) if stamp else 0.0)


def _counts(
    sink: TurnBuilder, turns: list[Turn], keep: list[int], read: ReadStats,
    kinds: tuple[str, ...] = SPEECH_KINDS,
) -> dict[str, dict[str, int]]:
    """Speech per kind (the agent's ``kinds``) in the source, the candidate and the reader."""
    carried = Counter(u.kind for index in keep for u in turns[index].items)  # one update
    source = {kind: sink.counts[kind] for kind in kinds}
    candidate = {kind: carried[kind] for kind in kinds}
    return {
        "source": source,
        "candidate": candidate,
        "not_carried": {kind: source[kind] - candidate[kind] for kind in kinds},
        # the reader does not count slash commands (the turns do); Codex has none
        "reader": {kind: read.speech[kind] for kind in kinds if kind != "slash"},
    }


def _token_report(total: float, config: Config) -> dict[str, Any]:
    knobs = config.rebuild
    report: dict[str, Any] = {
        "estimate": round(total),
        "cjk_factor": knobs.token_cjk_factor,
        "other_divisor": knobs.token_other_divisor,
        "carry_max_tokens": knobs.carry_max_tokens,
        "carry_overflow": knobs.carry_overflow,
    }
    if knobs.fixed_overhead_tokens > 0:
        report["fixed_overhead_tokens"] = knobs.fixed_overhead_tokens
        report["estimate_with_overhead"] = round(total) + knobs.fixed_overhead_tokens
    return report


def _snapshot_report(startup: Utterance | None) -> dict[str, Any]:
    if startup is None:
        return {
            "present": False,
            "note": "no start-up environment/memory injection in the transcript (newer Claude "
            "Code keeps it in attachment events); nothing frozen",
        }
    return {
        "present": True,
        "sha256": sha256_text(startup.text),
        "source_uuid": startup.source_uuid,
    }


def _empty_reason(
    read: ReadStats, turns: list[Turn], keep: list[int], item_count: int
) -> str | None:
    if keep and item_count:
        return None
    if read.bytes == 0 or read.events == 0:
        return "the transcript is empty"
    if turns:
        return "only an open last turn, and include_open_tail is false"
    if read.ignored_reasons["sidechain"]:
        return "the transcript holds only subagent (sidechain) speech"
    if set(read.types) == {"summary"}:
        return "the transcript holds only summary lines"
    return "the transcript holds no human or assistant speech"
