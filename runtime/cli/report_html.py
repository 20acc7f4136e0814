"""``tl-rebuild report --html OUT``: one self-contained HTML page about one session.

The page shows the dirty ledger as a chart of noise by category over the session's time
(``runtime.engine.dirty_time`` books each line's bytes at its minute; the totals table is the
ledger ``plan`` reports) and beside it, on the same bars, the bytes of the carried
conversation (each utterance's UTF-8 text at its timestamp's minute), the conversation a
rebuild would carry (the candidate's utterances, verbatim, HTML-escaped), and the timeline of
the given operation, else the session's latest one. Inline CSS and SVG only: nothing is
fetched, no script runs. Written atomically, 0600 (it holds the conversation). Imported by
the ``report`` sub-command only.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

from runtime.agents.kind import AgentKind
from runtime.cli import render
from runtime.cli.report_chart import bucketed, legend, shared, svg
from runtime.config import Config
from runtime.engine.dirty_time import MALFORMED, UNDATED, minute_of
from runtime.errors import ConfigError, ProcError, TranscriptError
from runtime.paths import codex_rollout


@dataclass(frozen=True)
class Utterance:
    """One carried item as the page shows it."""

    role: str
    kind: str
    timestamp: str
    stamp: str | None
    turn: int | None
    text: str


@dataclass(frozen=True)
class Report:
    """Everything the page shows, gathered from the engine and the store."""

    transcript: str
    agent: AgentKind
    session_id: str
    dirty: dict[str, Any]
    minutes: dict[str, dict[str, int]]
    chart_totals: dict[str, int]
    utterances: list[Utterance]
    blocked_reason: str | None
    operation: dict[str, Any] | None
    operation_note: str


def gather(source: Path, config: Config, agent: AgentKind, op_id: str | None,
           progress: Any = None) -> Report:
    """Build the candidate of ``source`` (as ``plan`` and ``fork`` do), book its noise over
    time, and read the operation ``op_id`` (else the session's latest) from the store."""
    from runtime.engine.dirty_time import timed_ledger

    codex = agent is AgentKind.CODEX
    if codex:
        from runtime.engine.codex import candidate
    else:
        from runtime.engine import candidate  # type: ignore[no-redef]
    built = candidate.build(source, config, progress=progress)
    timed = timed_ledger(source, config.rebuild, codex)
    session = _session_id(source, codex)
    operation, note = _operation(config, op_id, session, source)
    return Report(
        transcript=str(source), agent=agent, session_id=session,
        dirty=built.ledger.report(config.rebuild.dirty_budget_bytes,
                                  config.rebuild.rebuild_on_image),
        minutes=timed.finish(), chart_totals=timed.totals(),
        utterances=_carried(built), blocked_reason=built.blocked_reason,
        operation=operation, operation_note=note)


def _carried(built: Any) -> list[Utterance]:
    """The candidate's items in order, each with its text exactly as it would be written."""
    pending = getattr(built.items, "pending", None)  # Codex: lines made lazily from these
    out = []
    for entry in built.manifest:
        if pending is not None:
            text = pending[entry.position][0].text
        else:
            item = built.items[entry.position]
            text = (item["content"] if entry.kind == "voice"  # a voice line's text
                    else item["message"]["content"][-1]["text"])
        out.append(Utterance(entry.role, entry.kind, str(entry.source_timestamp or ""),
                             entry.stamp, entry.turn, text))
    return out


def _session_id(source: Path, codex: bool) -> str:
    if codex:
        from runtime.engine.codex.rollout import first_line, session_meta

        meta = session_meta(first_line(source)) or {}
        return str(meta.get("id") or source.stem)
    return source.stem


def _operation(config: Config, op_id: str | None, session: str, source: Path
               ) -> tuple[dict[str, Any] | None, str]:
    """The operation ``op_id``, else the newest one that names this session; and a note."""
    from runtime.switch import ops
    from runtime.switch.store import Store

    if config.state_dir is None:
        if op_id:
            raise ConfigError("state_dir: required to read operation "
                              f"{op_id!r} (set it in the runtime config)")
        return None, "no operation (no state_dir configured)"
    if op_id:
        return ops.status(config, op_id), f"operation {op_id}"
    for op in reversed(Store(config.state_dir).all()):
        named = {op.bound_session_id, op.fact("old_session_id"), op.fact("new_session_id")}
        if session in named or op.fact("transcript_path") == str(source):
            return ops.status(config, op.operation_id), "the latest operation of this session"
    return None, f"no operation for session {session}"


def pick_source(args: argparse.Namespace, config: Config) -> tuple[Path, AgentKind]:
    """The transcript (``--transcript``, ``--session`` or the newest) and whose file it is."""
    from runtime.agents.detect import detect
    from runtime.engine.report import pick_transcript

    if args.session:
        path = _session_path(args.session, config, AgentKind.parse(args.agent or config.agent))
        source = pick_transcript(path, config)
    else:
        source = pick_transcript(args.transcript, config)
    return source, detect(source, args.agent)


def _session_path(session: str, config: Config, agent: AgentKind) -> Path:
    if "/" in session or session.startswith("."):
        raise TranscriptError(f"session id {session!r} is not an id")
    if agent is AgentKind.CODEX:
        root = (config.codex_home or Path("~/.codex")).expanduser() / "sessions"
        found = codex_rollout(root, session)
        if found is None:
            raise TranscriptError(f"no rollout of session {session!r} under {str(root)!r}")
        return found
    if config.project_dir is None:
        raise TranscriptError(f"--session {session!r} needs project_dir in the runtime config")
    return config.project_dir.expanduser() / f"{session}.jsonl"


def check_target(out: str) -> Path:
    """``out`` as an absolute path whose folder exists (checked before the long read)."""
    target = Path(out).expanduser().absolute()
    if target.is_dir():
        raise ProcError(f"cannot write report {str(target)!r}: it is a directory")
    if not target.parent.is_dir():
        raise ProcError(f"cannot write report {str(target)!r}: folder "
                        f"{str(target.parent)!r} does not exist")
    return target


CARRIED = "carried conversation"  # its series in the shared minutes (not a noise category)


def conversation_minutes(utterances: list[Utterance], first: str) -> dict[str, int]:
    """Minute -> UTF-8 bytes of the utterances said in it; an utterance without a usable
    timestamp counts at the previous one's minute (the first: at ``first``, the session's
    first minute)."""
    out: dict[str, int] = {}
    minute = first
    for utt in utterances:
        minute = minute_of(utt.timestamp) or minute
        out[minute] = out.get(minute, 0) + len(utt.text.encode("utf-8", "surrogatepass"))
    return out


def charted(report: Report) -> tuple[list[Any], int, str]:
    """The bars both charts share: noise by category and the carried conversation's bytes."""
    first = next(iter(report.minutes), UNDATED)
    return bucketed(shared(report.minutes, conversation_minutes(report.utterances, first),
                           CARRIED))


def carried_bytes(report: Report) -> int:
    return sum(len(u.text.encode("utf-8", "surrogatepass")) for u in report.utterances)


def order_of(report: Report) -> list[str]:
    """Categories with noise, biggest first (the chart stacks them bottom-up in this order)."""
    return [n for n, b in sorted(report.chart_totals.items(), key=lambda kv: -kv[1]) if b]


def summary(report: Report, path: Path) -> dict[str, Any]:
    """The ``--json`` result: where the page is and the totals it shows."""
    bars, seconds, _ = charted(report)
    dirty = report.dirty
    return {
        "path": str(path), "transcript": report.transcript, "agent": report.agent,
        "session_id": report.session_id, "utterances": len(report.utterances),
        "noise_bytes": dirty["noise_bytes"], "conversation_bytes": dirty["conversation_bytes"],
        "noise_ratio": dirty["noise_ratio"],
        "categories": {n: b for n, b in report.chart_totals.items() if b},
        "chart": {"bucket_seconds": seconds, "bars": len(bars),
                  "matches_ledger": _matches(report),
                  "carried_bytes": sum(bar.get(CARRIED, 0) for _, bar in bars)},
        "operation": (report.operation or {}).get("operation_id"),
    }


def _matches(report: Report) -> bool:
    want = {**report.dirty["categories"], MALFORMED: report.dirty["malformed_bytes"]}
    return {k: v for k, v in want.items() if v} == {
        k: v for k, v in report.chart_totals.items() if v}


STYLE = """
body{font:15px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1000px;padding:0 1em;
color:#222;background:#fff}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ddd}
.chart{width:100%;height:auto}.chart text{font-size:11px;fill:#555}.chart .grid{stroke:#eee}
.legend{list-style:none;padding:0;display:flex;flex-wrap:wrap;gap:.4em 1.2em}
.swatch{display:inline-block;width:.9em;height:.9em;margin-right:.35em;vertical-align:-.1em}
table{border-collapse:collapse}td,th{padding:.15em .8em .15em 0;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums}
.utt{border-left:4px solid #4e79a7;margin:.8em 0;padding:.2em .8em;background:#f7f9fc}
.utt.assistant{border-color:#59a14f;background:#f7fbf6}
.utt header{font-size:.8em;color:#666}
.utt pre{white-space:pre-wrap;overflow-wrap:anywhere;font:inherit;margin:.3em 0}
.warn{color:#b00}.muted{color:#777}
"""
CSP = "default-src 'none'; style-src 'unsafe-inline'"


def page(report: Report) -> str:
    """The whole HTML document: head, ledger, conversation, operation."""
    title = f"Threadline report: session {report.session_id}"
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        f'<p class="muted">{escape(report.agent)} file {escape(report.transcript)}</p>',
        f"<p>{escape(headline(report))}</p>",
        *ledger_section(report), *conversation_section(report), *operation_section(report),
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def headline(report: Report) -> str:
    """``carries 131 utterances; 2.1 MiB of noise (98.9 %) beside 24.0 KiB of conversation``."""
    dirty = report.dirty
    blocked = f" — blocked: {report.blocked_reason}" if report.blocked_reason else ""
    return (f"carries {len(report.utterances)} utterances; {render.size(dirty['noise_bytes'])} "
            f"of noise ({render.percent(dirty['noise_ratio'])}) beside "
            f"{render.size(dirty['conversation_bytes'])} of conversation{blocked}")


def ledger_section(report: Report) -> list[str]:
    """The chart, its legend and the totals per category."""
    bars, _, label = charted(report)
    order = order_of(report)
    noise = report.dirty["noise_bytes"] or 1
    rows = "".join(
        f'<tr><td>{escape(name)}</td><td class="n" data-bytes="{nbytes}">{nbytes}</td>'
        f'<td class="n">{render.size(nbytes)}</td>'
        f'<td class="n">{render.percent(nbytes / noise)}</td></tr>'
        for name, nbytes in ((n, report.chart_totals[n]) for n in order))
    out = [f'<section id="ledger"><h2>Noise over time ({escape(label)} bars, UTC)</h2>',
           svg(bars, order, render.size), legend(order),
           '<table id="totals"><tr><th>category</th><th>bytes</th><th>size</th>'
           f"<th>of the noise</th></tr>{rows}"
           f'<tr><th>noise</th><th class="n">{report.dirty["noise_bytes"]}</th>'
           f'<th class="n">{render.size(report.dirty["noise_bytes"])}</th><th></th></tr>'
           f'<tr><td>conversation (its transcript lines)</td><td class="n">'
           f'{report.dirty["conversation_bytes"]}</td>'
           f'<td class="n">{render.size(report.dirty["conversation_bytes"])}</td><td></td></tr>'
           "</table>"]
    if not _matches(report):
        out.append('<p class="warn">the chart\'s per-category totals differ from the ledger '
                   "that plan reports (the table shows the chart\'s)</p>")
    out.append("</section>")
    carried = carried_bytes(report)
    out += ['<section id="carried"><h2>Carried conversation over time '
            f"({escape(label)} bars, UTC)</h2>",
            svg(bars, [CARRIED], render.size, conversation=True) if report.utterances
            else '<p class="empty">nothing carried: nothing to chart</p>',
            f'<p>the utterances a rebuild carries: <span id="carried-bytes" data-bytes='
            f'"{carried}">{render.size(carried)}</span> of text ({carried} bytes, UTF-8) in '
            f"{len(report.utterances)} utterances (their lines in the transcript: "
            f"{render.size(report.dirty['conversation_bytes'])})</p>", "</section>"]
    return out


def conversation_section(report: Report) -> list[str]:
    """Every carried utterance in order, its text escaped and kept verbatim."""
    out = [f'<section id="conversation"><h2>Carried conversation '
           f"({len(report.utterances)} utterances)</h2>"]
    if not report.utterances:
        out.append('<p class="muted">nothing to carry</p>')
    for utt in report.utterances:
        where = f"turn {utt.turn + 1}" if utt.turn is not None else "outside the turns"
        stamp = f" · {escape(utt.stamp)}" if utt.stamp else ""
        out.append(f'<article class="utt {escape(utt.role)}"><header>{escape(utt.role)} · '
                   f"{escape(utt.kind)} · {where} · {escape(utt.timestamp)}{stamp}</header>"
                   f"<pre>\n{verbatim(utt.text)}</pre></article>")
    return out + ["</section>"]


def verbatim(text: str) -> str:
    """``text`` escaped so a browser's ``<pre>`` holds exactly it: the ``\n`` written after
    ``<pre>`` is the one newline HTML drops there (a leading one of the text survives), and a
    carriage return is a character reference (HTML turns a raw CR or CRLF into LF)."""
    return escape(text).replace("\r", "&#13;")


def operation_section(report: Report) -> list[str]:
    """The operation's state, failure and one row per recorded phase; or why there is none."""
    out = ['<section id="operation"><h2>Operation</h2>']
    op = report.operation
    if op is None:
        return out + [f'<p class="muted">{escape(report.operation_note)}</p></section>']
    failure = op.get("failure") or {}
    out.append(f"<p>{escape(str(op.get('operation_id')))}: <b>{escape(str(op.get('state')))}"
               f"</b> ({escape(report.operation_note)}), created "
               f"{escape(str(op.get('created_at')))}</p>")
    if failure:
        out.append(f'<p class="warn">failure: {escape(str(failure.get("code", "?")))} — '
                   f'{escape(str(failure.get("message", "")))}</p>')
    events = list(op.get("events") or [])
    start = render.when(op.get("created_at"))
    rows = []
    for event in events:
        at = render.when(event.get("at"))
        offset = f"+{render.span(max(0.0, (at - start).total_seconds()))}" if at and start \
            else ""
        note = event.get("reason") if event.get("ok") is False else event.get("code")
        rows.append(f"<tr><td>{escape(str(event.get('at', '')))}</td><td class=\"n\">{offset}"
                    f"</td><td>{escape(str(event.get('phase', '')))}</td>"
                    f"<td>{escape(str(event.get('state') or ''))}</td>"
                    f"<td>{escape(str(note or ''))}</td></tr>")
    out.append('<table id="timeline"><tr><th>at</th><th>since created</th><th>phase</th>'
               f"<th>state</th><th>note</th></tr>{''.join(rows)}</table>")
    return out + ["</section>"]


def run(args: argparse.Namespace, progress_for: Any) -> int:
    """The ``report`` sub-command: gather, write OUT atomically (0600), print the summary."""
    import sys

    from runtime import proc
    from runtime.config import config_path_from, load_config

    target = check_target(args.html)
    config = load_config(config_path_from(args.config))
    source, agent = pick_source(args, config)
    report = gather(source, config, agent, args.op, progress_for(str(source)))
    proc.atomic_write(target, page(report).encode("utf-8", "replace"), 0o600)
    result = summary(report, target)
    if args.json:
        from runtime.cli.output import SCHEMA_VERSION, emit_json

        emit_json({"schema_version": SCHEMA_VERSION, **result})
        return 0
    chart = result["chart"]
    print(f"wrote {target}: {_count(result['utterances'], 'utterance')}, "
          f"{render.size(result['noise_bytes'])} of noise in "
          f"{_count(len(result['categories']), 'category', 'categories')} over "
          f"{_count(chart['bars'], 'bar')}, "
          f"{result['operation'] or report.operation_note}", file=sys.stdout)
    return 0


def _count(n: int, one: str, many: str = "") -> str:
    """``1 bar``, ``3 bars``."""
    return f"{n} {one if n == 1 else many or one + 's'}"
