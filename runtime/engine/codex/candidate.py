"""The rebuilt Codex rollout: ``session_meta`` with a new id, then only the carried messages.

``build`` reads the source once (parents inlined), groups speech into turns and applies the
same open-tail, carry-cap, poison and compaction-summary rules as the Claude engine
(``runtime.engine.candidate``). ``write`` puts ``rollout-<time>-<id>.jsonl`` on disk atomically,
mode
0600: line 0 is the source's ``session_meta`` with ``id`` = ``session_id`` = the file's uuid
and no ``history_base``/``forked_from_*``; then one ``response_item`` message per utterance,
text verbatim, ordinals renumbered, and the carry mark (``runtime.engine.speech.MARK_KEY``).
"""

from __future__ import annotations

import os
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, overload

from runtime.config import Config
from runtime.engine import candidate as claude
from runtime.engine.codex import rules
from runtime.engine.codex.readback import ReadBack
from runtime.engine.codex.rollout import SESSIONS, Classifier, scan, sessions_root
from runtime.engine.items import EPOCH, SUMMARY_MARK, Layout, ManifestEntry, sha256_text
from runtime.engine.located import Located, Where
from runtime.engine.speech import MARK_KEY, Utterance, carry_mark
from runtime.engine.transcript import Progress, ReadStats
from runtime.engine.turns import Turn, TurnBuilder

DROPPED_META = ("history_base", "forked_from_id", "forked_from_ordinal_exclusive")


class CodexBuild(claude.Build):
    """A Claude-shaped build plus what the rollout's line 0 needs."""

    meta: dict[str, Any]
    parents: tuple[str, ...]
    created: datetime

    @property
    def file_name(self) -> str:
        stamp = self.created.strftime("%Y-%m-%dT%H-%M-%S")
        return f"rollout-{stamp}-{self.new_session_id}.jsonl"

    @property
    def paginated(self) -> bool:
        return self.meta.get("history_mode") == "paginated"

    def stats(self) -> dict[str, Any]:
        return {**super().stats(), "agent": "codex", "parents": list(self.parents)}


class CodexLayout(Layout):
    """Carried utterances as Codex ``response_item`` message lines after line 0."""

    def __init__(self, session: str, meta: dict[str, Any]) -> None:
        super().__init__(session)
        self.meta = meta
        self.where: dict[int, Where] = {}  # by position: where a let-go text is read back

    def finish(self) -> tuple[RolloutLines, list[ManifestEntry]]:  # type: ignore[override]
        # the lines are made one at a time when written: holding them all doubled fork's memory
        paginated = self.meta.get("history_mode") == "paginated"
        last_ts = next((u.timestamp for u, _, _ in self.pending if u.timestamp), EPOCH)
        head_ts = self.meta.get("timestamp") if type(self.meta.get("timestamp")) is str else last_ts
        head: dict[str, Any] = {"timestamp": head_ts, "type": "session_meta", "payload": self.meta}
        stamps: list[str] = []
        known = self.digests
        for position, (utt, stamp, turn) in enumerate(self.pending):
            last_ts = utt.timestamp or last_ts
            stamps.append(last_ts)
            digest = known.get(id(utt)) or sha256_text(utt.text)  # let go: its first read's
            self.manifest.append(
                ManifestEntry(
                    position, utt.role, utt.kind, f"{self.session}:{position + 1}",
                    utt.source_uuid, utt.source_timestamp, turn, digest, digest, stamp,
                )
            )
        lines = RolloutLines(_ordered(head, 0, paginated), self.pending, stamps, paginated,
                             self.where)
        return lines, self.manifest


class RolloutLines(Sequence[dict[str, Any]]):
    """The rebuilt rollout's lines as JSON-able dicts, each made when it is read; a text the
    reader let go is read back from its source line (``back``) for just that time."""

    def __init__(
        self, head: dict[str, Any], pending: list[tuple[Utterance, str | None, int | None]],
        stamps: list[str], paginated: bool, back: dict[int, Where],
    ) -> None:
        self.head = head
        self.pending = pending
        self.stamps = stamps  # each line's timestamp: its own, else the nearest earlier one
        self.paginated = paginated
        self.back = back  # by position in ``pending``

    def __len__(self) -> int:
        return 1 + len(self.pending)

    @overload
    def __getitem__(self, index: int) -> dict[str, Any]: ...

    @overload
    def __getitem__(self, index: slice) -> list[dict[str, Any]]: ...

    def __getitem__(self, index: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        return self.head if index == 0 else self._line(index)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        yield self.head
        if not self.back:
            for index in range(1, len(self)):
                yield self._line(index)
            return
        with ReadBack() as back:
            for index in range(1, len(self)):
                yield self._line(index, back)

    def _line(self, index: int, back: ReadBack | None = None) -> dict[str, Any]:
        utt, stamp, _ = self.pending[index - 1]
        text = utt.text
        found = self.back.get(index - 1) if self.back else None
        if found is not None:
            if back is None:
                with ReadBack() as back:
                    text = back.text(found)
            else:
                text = back.text(found)
        part = "output_text" if utt.role == "assistant" else "input_text"
        texts = [stamp, text] if stamp else [text]
        line: dict[str, Any] = {"timestamp": self.stamps[index - 1]}
        if self.paginated:
            line["ordinal"] = index
        line["type"] = "response_item"
        line["payload"] = {
            "type": "message",
            "role": utt.role,
            "content": [{"type": part, "text": text} for text in texts],
        }
        line[MARK_KEY] = carry_mark(utt.kind, stamp)
        return line


def _ordered(line: dict[str, Any], ordinal: int, paginated: bool) -> dict[str, Any]:
    if not paginated:
        return line
    return {"timestamp": line.pop("timestamp"), "ordinal": ordinal, **line}


def _build(
    source: Path, config: Config, new_session_id: str | None, progress: Progress | None,
    lay_out: bool,
) -> CodexBuild:
    """Read ``source`` once and lay out the rebuilt rollout (nothing is written).

    The texts of the turns past the poison window are let go once more than
    ``claude.HOLD_CHARS`` characters are held (``claude._Shedding``, their token estimates
    kept); a fork (``lay_out``) notes where each came from and its digest, and reads it back
    from its source line when writing (``readback``). The UI copies are only paired and
    counted, not kept: the audit reads the file again in the rare case a copy met no text
    beside it.
    """
    # Codex items carry no turn stamp, so none enters the token estimate
    knobs = config.rebuild.replace(stamp_turns=False)
    sink = claude._Shedding(config.replace(rebuild=knobs), None,
                            Located() if lay_out else None, claude.HOLD_CHARS)
    read, ledger, classifier, lines = scan(Path(source), sink, progress, hold_copies=False)
    turns = sink.finish()
    session = new_session_id or str(uuid.uuid4())
    stamps: list[str | None] = [None] * len(turns)  # Codex items stay text-only, verbatim
    plan = claude._select(sink, turns, stamps, config)
    audit = _audit(classifier, turns, sink) if not classifier.unpaired else _reread(
        Path(source))
    if plan.blocked is None and audit["unrecognised"] and (
        config.rebuild.unrecognised_speech == "block"
    ):
        plan = plan._replace(blocked=_audit_reason(audit, read))
    meta = _new_meta(lines.meta or {}, session)
    layout = CodexLayout(session, meta)
    layout.digests = sink.digests
    claude._lay_out(layout, None, turns, stamps, plan)
    layout.where = {at: sink.where[id(utt)] for at, (utt, _, _) in enumerate(layout.pending)
                    if id(utt) in sink.digests}
    items, manifest = layout.finish() if lay_out else ((), [])
    return claude._assemble(
        CodexBuild, Path(source), session, (read, ledger), sink, turns, plan, layout, config,
        items=items,  # RolloutLines: a lazy sequence, each line made when it is written
        manifest=manifest, audit=audit,
        counts=claude._counts(sink, turns, plan.keep, read, rules.SPEECH_KINDS),
        meta=meta, parents=tuple(lines.parents), created=datetime.now(UTC),
    )


def _new_meta(source: dict[str, Any], session: str) -> dict[str, Any]:
    """The source's line 0 payload as the new thread's: new id, no fork/revision base."""
    meta = {k: v for k, v in source.items() if k not in DROPPED_META}
    meta["id"] = session
    meta["session_id"] = session
    return {"session_id": session, "id": session, **meta}


build = claude.builder(_build)


def _reread(source: Path) -> dict[str, Any]:
    """The audit of ``source`` read again with every text and copy kept."""
    sink = TurnBuilder()
    _, _, classifier, _ = scan(source, sink)
    return _audit(classifier, sink.finish(), sink)


def _audit(classifier: Classifier, turns: list[Turn], sink: TurnBuilder) -> dict[str, Any]:
    """The UI copies Codex wrote (``event_msg``) as a second witness: each must be recognised.

    Every ``UserMessage``/``user_message`` copy must equal a recognised human text, every
    ``AgentMessage``/``agent_message`` copy a recognised assistant text or the compaction
    summary; whatever is left over is speech the allowlist did not recognise.

    Codex writes each copy next to its message, so the copies usually come in the order of
    the texts: when each copy of a role equals a text later than the last one matched, every
    copy is recognised (a multiset match cannot fail then), without hashing each text.
    """
    candidates = {"user ui copy": classifier.copy_counts["user"],
                  "assistant ui copy": classifier.copy_counts["assistant"]}
    if not classifier.unpaired:  # each copy met its message's text (rollout.keep_copy)
        return {"candidates": candidates, "unrecognised": {}, "first_lines": []}
    spoken: dict[str, list[str]] = {"user": [], "assistant": []}
    for turn in turns:
        for utt in turn.items:
            spoken.setdefault(utt.role, []).append(utt.text)
    spoken["assistant"] += [summary.utterance.text for summary in sink.summaries]
    if _in_order(classifier.ui_user, spoken["user"]) and _in_order(
        classifier.ui_assistant, spoken["assistant"]
    ):
        return {"candidates": candidates, "unrecognised": {}, "first_lines": []}
    said: Counter[tuple[str, str]] = Counter()
    for turn in turns:
        for utt in turn.items:
            said[(utt.role, utt.text)] += 1
    said.update(_joined(turns))
    for summary in sink.summaries:
        said[("assistant", summary.utterance.text)] += 1
    unrecognised: Counter[str] = Counter()
    first: list[dict[str, Any]] = []
    for role, copies in (("user", classifier.ui_user), ("assistant", classifier.ui_assistant)):
        for text in copies:
            if not text.strip():
                continue
            if said[(role, text)] > 0:
                said[(role, text)] -= 1
            elif not _within(role, text, said):
                unrecognised[f"{role} ui copy"] += 1
                if len(first) < 20:
                    first.append({"shape": f"{role} ui copy", "chars": len(text)})
    return {"candidates": candidates, "unrecognised": dict(unrecognised), "first_lines": first}


def _joined(turns: list[Turn]) -> Iterator[tuple[str, str]]:
    """``(role, text)`` of each message that spoke in more than one text part: its UI copy
    holds a part per text part, read joined (``rollout.Classifier.keep_copy``), while each
    part is an utterance of its own (named ``<message>#<part>``)."""
    message: str | None = None
    role = ""
    parts: list[str] = []
    for turn in turns:
        for utt in turn.items:
            at = utt.source_uuid.rpartition("#")[0]
            if at != message:
                if len(parts) > 1:
                    yield role, "".join(parts)
                message, role, parts = at, utt.role, []
            parts.append(utt.text)
    if len(parts) > 1:
        yield role, "".join(parts)


def _in_order(copies: list[str], texts: list[str]) -> bool:
    """Each non-blank copy equals one of ``texts``, each later than the one before."""
    at, end = 0, len(texts)
    for copy in copies:
        if not copy or copy.isspace():  # = not copy.strip(), as the match below skips it
            continue
        while at < end and texts[at] != copy:
            at += 1
        if at == end:
            return False
        at += 1
    return True


def _within(role: str, text: str, said: Counter[tuple[str, str]]) -> bool:
    """A UI copy that shows only part of a recognised text (the typed part of a wrapped one)."""
    return any(r == role and text.strip() in t for r, t in said)


def _audit_reason(audit: dict[str, Any], read: ReadStats) -> str:
    """Why the audit blocks: copies the rules did not recognise — or, when the rollout ends in
    a line cut mid-write, the message that line held (Codex writes the assistant's UI copy
    before its message, so a cut message leaves its copy alone)."""
    count = sum(audit["unrecognised"].values())
    if read.partial_tail:
        return (f"partial tail: the last line ({read.last_malformed}) is cut mid-write, so "
                f"{count} UI cop(ies) have no message to match and a rebuild would lose that "
                "message; retry once Codex has written the whole line (a write cut for good: "
                "remove the cut line)")
    return (f"unrecognised speech: {count} UI cop(ies) of messages the speech rules did not "
            "recognise; a rebuild would lose them")


def default_folder(source: Path, created: datetime) -> Path:
    """``sessions/YYYY/MM/DD`` of the source's sessions folder, else the source's folder."""
    root = sessions_root(source)
    if root.name != "sessions":
        return source.parent
    return root / created.strftime("%Y") / created.strftime("%m") / created.strftime("%d")


def resume_command(path: Path, session: str, source: Path, codex_home: Path | None) -> str:
    """A command that resumes the rebuilt rollout at ``path``.

    ``codex resume <id>`` finds a thread only under ``$CODEX_HOME/sessions`` (any folder
    there): 0.169.0 reads a path argument as a thread name, finds none and starts a new thread
    (measured), and has no option that names a file. A rollout written elsewhere (``fork
    --into``) is moved first into the ``sessions`` folder of the source's ``CODEX_HOME``
    (else ``codex_home``, ``$CODEX_HOME``, ``~/.codex``)."""
    import shlex  # only here: no start-up cost for the readers

    resume = f"codex resume {session}"
    if any(parent.name == SESSIONS for parent in path.parents):
        return resume
    sessions = sessions_root(source)
    if sessions.name != SESSIONS:
        from runtime.agents.codex import HOME_VAR  # here: it imports dataclasses (≈ 10 ms)

        home = codex_home or Path(os.environ.get(HOME_VAR) or "~/.codex")
        sessions = home.expanduser() / SESSIONS
    return f"mv {shlex.quote(str(path))} {shlex.quote(str(sessions))}/ && {resume}"


def write(built: CodexBuild, directory: Path) -> Path:
    """Write the rollout as ``<directory>/rollout-<time>-<id>.jsonl`` (atomic, 0600)."""
    claude.refuse_unwritable(built, built.item_count + 1)  # + line 0, the session_meta
    target = Path(directory) / built.file_name
    claude.write_lines(target, built.items)
    return target


write_manifest = claude.write_manifest  # the manifest format is the same for both agents

__all__ = ["SUMMARY_MARK", "CodexBuild", "build", "default_folder", "resume_command", "write",
           "write_manifest"]
