"""Sub-commands ``plan``, ``dirty`` and ``fork``: the read-only engine and a hand fork.

None of them switches anything. ``fork`` writes a verified candidate session file next to
the source (or into ``--into``) and prints its id; the source is only ever read.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from runtime.agents.kind import AgentKind
from runtime.errors import BlockedError, NothingToCarryError, VerificationError

PROGRESS_MIN_BYTES = 50 * 1024 * 1024


def register(sub: Any, only: str | None = None) -> None:
    """Add the engine's sub-commands to ``sub``; with ``only``, that one alone."""
    for name, add in (("plan", _register_plan), ("dirty", _register_dirty),
                      ("fork", _register_fork), ("report", _register_report)):
        if only in (None, name):
            add(sub)


def _register_plan(sub: Any) -> None:
    from runtime.cli import add_command

    plan = add_command(sub, "plan", "what a rebuild would carry (read-only)", [
        "tl-rebuild plan --transcript ~/.claude/projects/-root-work/SESSION_ID.jsonl",
        "tl-rebuild plan --config /etc/threadline/config.toml --json   # newest session",
        "tl-rebuild plan --show --transcript ~/.codex/sessions/2026/12/05/rollout-….jsonl"])
    _common(plan, required=False)
    plan.add_argument("--show", action="store_true",
                      help="show the conversation as it will be carried, turn by turn, with what "
                           "is dropped between (paged on a terminal)")
    plan.set_defaults(func=run_plan)


def _register_dirty(sub: Any) -> None:
    from runtime.cli import add_command

    dirty = add_command(sub, "dirty", "runtime noise in the transcript, by category", [
        "tl-rebuild dirty --config /etc/threadline/config.toml",
        "tl-rebuild dirty --transcript ~/.codex/sessions/2026/12/05/rollout-….jsonl --json"])
    _common(dirty, required=False)
    dirty.set_defaults(func=run_dirty)


def _register_fork(sub: Any) -> None:
    from runtime.cli import add_command

    fork = add_command(sub, "fork", "write the candidate as a new session file (no switch)", [
        "tl-rebuild fork --transcript SESSION_ID.jsonl --into /tmp/forks",
        "tl-rebuild fork --transcript SESSION_ID.jsonl --manifest /tmp/forks/manifest.jsonl"])
    _common(fork, required=True)
    fork.add_argument("--into", metavar="DIR",
                      help="folder for the new session file (made, 0700, if missing)")
    fork.add_argument(
        "--manifest", metavar="PATH",
        help="also write the per-item manifest (JSONL, 0600) here (folders made if missing)"
    )
    fork.set_defaults(func=run_fork)


def _common(parser: argparse.ArgumentParser, required: bool) -> None:
    where = "" if required else " (default: newest in the config's project_dir)"
    parser.add_argument("--transcript", metavar="P", required=required, help="transcript" + where)
    parser.add_argument("--config", metavar="C", help="runtime config (else $THREADLINE_CONFIG)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument(
        "--agent", choices=("claude", "codex"), help="whose file it is (default: from line 0)"
    )


def _one_shot(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """``run`` with the cyclic GC paused for the whole command, not just the read.

    ``plan``/``dirty``/``fork`` read one file in a process of their own: after the build the
    collector would walk every utterance, turn and UI copy the read kept (acyclic: reference
    counting frees them) once more — ≈ 27 ms of a 0.44 s ``plan`` on a 100 MB rollout. The
    library's callers (the MCP server, the switch) keep their collector; the read pauses it
    alone (``no_cycle_collection``). msgspec is imported first, without typing_extensions."""

    @functools.wraps(run)
    def paused(args: argparse.Namespace) -> int:
        from runtime.engine.transcript import no_cycle_collection

        _import_msgspec_alone()
        with no_cycle_collection():
            return run(args)

    return paused


def _import_msgspec_alone() -> None:
    """Import msgspec with typing_extensions hidden, unless either is already imported.

    msgspec then takes ``get_type_hints`` from ``typing`` (its own fallback when
    typing_extensions is missing; the same hints for the engine's structs) and the command
    skips typing_extensions' import, ≈ 2 ms of every plan/dirty/fork (issue 13). Only these
    one-shot commands do it; the hiding ends with the import, so a later ``import
    typing_extensions`` works as ever."""
    if "msgspec" in sys.modules or "typing_extensions" in sys.modules:
        return
    sys.modules["typing_extensions"] = None  # type: ignore[assignment]  # its import now fails
    try:
        import msgspec  # noqa: F401 - imported for its side effect: loaded, hints from typing
    finally:
        del sys.modules["typing_extensions"]


def _config(args: argparse.Namespace) -> Any:
    from runtime.config import config_path_from, load_config

    return load_config(config_path_from(args.config))


def _report(args: argparse.Namespace, build: Any, show: Any) -> int:
    """Pick the transcript, build one read-only report, print it as JSON or with ``show``."""
    from runtime.engine.report import pick_transcript

    config = _config(args)
    source = pick_transcript(args.transcript, config)
    report = build(source, config, progress=_progress_for(str(source)), agent=args.agent)
    if args.json:
        from runtime.cli.output import SCHEMA_VERSION

        _emit_json({"schema_version": SCHEMA_VERSION, **report})
    else:
        show(report)
    return 0


@_one_shot
def run_plan(args: argparse.Namespace) -> int:
    from runtime.engine.report import plan_report

    if args.show:
        return _show(args)
    return _report(args, plan_report, _print_plan)


def _show(args: argparse.Namespace) -> int:
    """``plan --show``: the carried conversation for a person (runtime.cli.show)."""
    from runtime.errors import ThreadlineError

    if args.json:
        raise ThreadlineError("plan: --show renders the conversation for a person and cannot "
                              "be combined with --json")
    from runtime.cli import show
    from runtime.engine.report import pick_transcript

    config = _config(args)
    source = pick_transcript(args.transcript, config)
    return show.run(args, config, source, _progress_for(str(source)))


@_one_shot
def run_dirty(args: argparse.Namespace) -> int:
    from runtime.engine.report import dirty_report

    return _report(args, dirty_report, _print_dirty)


@_one_shot
def run_fork(args: argparse.Namespace) -> int:
    from runtime import proc
    from runtime.agents.detect import detect
    from runtime.engine.transcript import resolve_transcript

    config = _config(args)
    source = resolve_transcript(args.transcript, config)
    codex = detect(source, args.agent) is AgentKind.CODEX
    if codex:
        from runtime.engine.codex import candidate
        from runtime.engine.codex.verify import verify_rollout as verify_candidate
    else:
        from runtime.engine import candidate  # type: ignore[no-redef]
        from runtime.engine.verify import verify_candidate  # type: ignore[assignment]
    built = candidate.build(source, config, progress=_progress_for(args.transcript))
    if built.empty_reason is not None:
        raise NothingToCarryError(f"nothing to carry from {str(source)!r}: {built.empty_reason}")
    if built.blocked_reason is not None:
        raise BlockedError(f"fork of {str(source)!r} refused: {built.blocked_reason}")
    directory = Path(args.into).expanduser() if args.into else source.parent
    if codex and not args.into:
        directory = candidate.default_folder(source, built.created)
    path = candidate.write(built, directory)
    try:
        checked = verify_candidate(path, built)
    except VerificationError:
        proc.remove(path)
        raise
    resume = candidate.resume_command(
        path, built.new_session_id, source, config.codex_home
    ) if codex else f"claude --resume {built.new_session_id}"
    workdir = built.meta.get("cwd") if codex else None
    result: dict[str, Any] = {
        "new_session_id": built.new_session_id,
        "candidate_path": str(path),
        "source": str(source),
        "stats": built.stats(),
        "verify": checked.as_dict(),
        "resume": resume,
    }
    if type(workdir) is str and workdir:
        result["workdir"] = workdir
    if args.manifest:
        manifest = Path(args.manifest).expanduser().absolute()
        try:
            digest = candidate.write_manifest(built, manifest)
        except BaseException:
            # a fork that fails leaves no session behind: the stray one would be the newest
            # in the live project folder, read by plan/dirty and by claude --continue
            proc.remove(path)
            raise
        result["manifest"] = {"path": str(manifest), "sha256": digest,
                              "entries": len(built.manifest)}
    if args.json:
        _emit_json(result)
    else:
        stats = result["stats"]
        _print_rows(
            [
                ("new_session_id", built.new_session_id),
                ("candidate_path", str(path)),
                ("turns carried", f"{stats['turns']['selected']} of {stats['turns']['source']}"),
                ("items", stats["items"]),
                ("verified", ", ".join(checked.checks)),
                *(
                    [("manifest", "{path} sha256 {sha256}".format(**result["manifest"]))]
                    if "manifest" in result
                    else []
                ),
                ("resume", f"cd {_workdir(result)} && {result['resume']}"),
            ]
        )
    return 0


def _workdir(result: dict[str, Any]) -> str:
    """The recorded working folder, shell-quoted (Codex rollouts record it), else a placeholder."""
    import shlex  # only for this line of fork's table: no start-up cost

    return shlex.quote(result["workdir"]) if "workdir" in result else "<workdir>"


def _emit_json(obj: Any) -> None:
    from runtime.cli.output import emit_json

    emit_json(obj)


def _print_rows(rows: list[tuple[str, Any]]) -> None:
    from runtime.cli.output import table

    table(rows)


def _print_plan(report: dict[str, Any]) -> None:
    from runtime.cli import render

    render.write(plan_lines(report))


def _print_dirty(report: dict[str, Any]) -> None:
    from runtime.cli import render

    render.write(dirty_lines(report))


def plan_summary(report: dict[str, Any]) -> str:
    """``carries 131 utterances in 42 turns, drops 2.1 MiB of noise (98.9 %) — blocked: no``."""
    from runtime.cli import render

    dirty = report["dirty"]
    if report["nothing_to_carry"]:
        head = f"nothing to carry ({report['nothing_to_carry']})"
    else:
        head = f"carries {report['items']} utterances in {report['turns']['selected']} turns"
    return (f"{head}, drops {render.size(dirty['noise_bytes'])} of noise "
            f"({render.percent(dirty['noise_ratio'])}) — blocked: "
            f"{'yes' if report['blocked_reason'] else 'no'}")


def plan_lines(report: dict[str, Any]) -> list[str]:
    """The plan for a person: the summary, what is carried, the noise dropped, the next step."""
    from runtime.cli import render

    turns, speech, tokens = report["turns"], report["speech"], report["tokens"]
    snapshot, poison = report["startup_snapshot"], report["poison"]
    rows: list[tuple[str, Any]] = [
        ("transcript", report["transcript"]),
        ("turns", f"{turns['selected']} of {turns['source']} carried"
                  f"{f', {n} oldest dropped' if (n := turns['dropped_oldest_turns']) else ''}"),
        ("open tail", render.yes_no(turns["open_tail"])
         + (" (excluded)" if turns["excluded_open_tail"] else "")),
        ("token estimate", f"{tokens['estimate']}" + (
            f" ({tokens['estimate_with_overhead']} with fixed overhead)"
            if "estimate_with_overhead" in tokens else "")),
        ("slash commands", "{carried} carried, {local_dropped} local dropped".format(
            **report["slash_commands"])),
        ("compaction summaries", "{summaries} seen, {carried} carried".format(
            **report["compaction"])),
        ("startup snapshot", snapshot.get("sha256", "yes") if snapshot["present"] else "no"),
        ("poison hits", f"{poison['hits']} (blocks at {poison['threshold']})"),
        ("timestamps replaced", _fallbacks(report["timestamp_fallbacks"])),
        ("malformed lines", report["malformed"]["lines"]),
        ("rewound, not carried", _rewound(report.get("rewound"))),
        ("ignored events", render.counts(report["ignored"]["types"])),
        ("unrecognised speech", render.counts(report["recognition_audit"]["unrecognised"])),
        ("blocked", report["blocked_reason"] or "no"),
    ]
    lines = [plan_summary(report), ""]
    lines += render.aligned(rows)
    lines += ["", "speech:"]
    lines += render.aligned(
        [("kind", "in source", "carried")]
        + [(kind, count, speech["candidate"].get(kind, 0))
           for kind, count in speech["source"].items()], indent="  ")
    lines += ["", "noise dropped:"]
    lines += _noise_rows(report["dirty"])
    lines += ["", plan_next(report)]
    return lines


def plan_next(report: dict[str, Any]) -> str:
    if report["blocked_reason"]:
        return f"next: a rebuild is refused until this is fixed: {report['blocked_reason']}"
    if report["nothing_to_carry"]:
        return "next: nothing to rebuild"
    return "next: run `tl-rebuild request --reason '…' --confirm REBUILD` (the rebuild happens " \
           "after the current turn)"


def dirty_lines(report: dict[str, Any]) -> list[str]:
    """The dirty ledger for a person: the summary, noise by category, the verdict's reasons."""
    from runtime.cli import render

    verdict = render.yes_no(report["should_rebuild"])
    lines = [f"{render.size(report['noise_bytes'])} of noise "
             f"({render.percent(report['noise_ratio'])}) beside "
             f"{render.size(report['conversation_bytes'])} of conversation — rebuild advised: "
             f"{verdict}", ""]
    rows: list[tuple[str, Any]] = []
    if "transcript" in report:
        rows.append(("transcript", report["transcript"]))
    if "lines" in report:
        rows.append(("read", f"{report['lines']} lines, {render.size(report['bytes'])}, "
                             f"{report['malformed_lines']} malformed"))
    rows += [
        ("dirty budget", render.size(report["dirty_budget_bytes"])),
        ("image seen", render.yes_no(report["image_seen"])),
        ("reasons", "; ".join(report["reasons"]) or "-"),
    ]
    lines += render.aligned(rows)
    lines += ["", "noise by category:"]
    lines += _noise_rows(report)
    lines += ["", "next: run `tl-rebuild plan` to see what a rebuild would carry"
              if report["should_rebuild"] else "next: nothing to do (below the dirty budget)"]
    return lines


def _noise_rows(dirty: dict[str, Any]) -> list[str]:
    """One aligned line per non-empty noise category: its size and its share of the noise."""
    from runtime.cli import render

    total = dirty["noise_bytes"] + dirty["conversation_bytes"] or 1
    rows: list[tuple[str, str, str]] = [("category", "size", "of the transcript")]
    rows += [(name, render.size(n), render.percent(n / total))
            for name, n in sorted(dirty["categories"].items(), key=lambda kv: -kv[1]) if n]
    if dirty.get("malformed_bytes"):
        rows.append(("malformed", render.size(dirty["malformed_bytes"]),
                     render.percent(dirty["malformed_bytes"] / total)))
    lines = render.aligned(rows, indent="  ") if len(rows) > 1 else ["  none"]
    if dirty["other_by_type"]:
        lines.append(f"  (other: {render.counts(dirty['other_by_type'])})")
    return lines


def _rewound(rewound: dict[str, Any] | None) -> str:
    """What a branch the human rewound past said (not carried), or "none"."""
    from runtime.cli import render

    if not rewound or not rewound["lines"]:
        return "none"
    return f"{rewound['lines']} line(s): {render.counts(rewound['speech'])}"


def _fallbacks(fallbacks: dict[str, Any]) -> str:
    if not fallbacks["replaced"]:
        return "0"
    return "{replaced} (earlier={earlier}, later={later}, epoch={epoch}; rule: {rule})".format(
        **fallbacks
    )


def _progress_for(transcript: str) -> Any:
    """A stderr progress printer for big files on a terminal, else None."""
    if not sys.stderr.isatty():
        return None
    try:
        size = os.path.getsize(transcript)
    except OSError:
        return None
    if size <= PROGRESS_MIN_BYTES:
        return None
    name = Path(transcript).name

    def show(done: int, total: int) -> None:
        percent = 100 * done // total if total else 100
        end = "\n" if done >= total else ""
        sys.stderr.write(f"\rtl-rebuild: reading {name} {percent:3d}%{end}")
        sys.stderr.flush()

    return show


# -- report: one self-contained HTML page (runtime.cli.report_html, imported only when run) --
def _register_report(sub: Any) -> None:
    from runtime.cli import add_command

    report = add_command(
        sub, "report", "write one self-contained HTML page: noise over time, the carried "
        "conversation, the operation timeline", [
            "tl-rebuild report --html /tmp/session.html --transcript SESSION_ID.jsonl",
            "tl-rebuild report --html report.html --session SESSION_ID --op OPERATION_ID "
            "--config /etc/threadline/config.toml"])
    report.add_argument("--html", metavar="OUT", required=True, help="the page to write (0600)")
    which = report.add_mutually_exclusive_group()
    which.add_argument("--transcript", metavar="P",
                       help="transcript (default: newest in the config's project_dir)")
    which.add_argument("--session", metavar="ID", help="the session id (its file in "
                       "project_dir, or its rollout under codex_home/sessions)")
    report.add_argument("--op", metavar="OP_ID",
                        help="operation to show (default: the session's latest)")
    report.add_argument("--config", metavar="C", help="runtime config (else $THREADLINE_CONFIG)")
    report.add_argument("--json", action="store_true", help="print JSON")
    report.add_argument("--agent", choices=("claude", "codex"),
                        help="whose file it is (default: from line 0)")
    report.set_defaults(func=_run_report)


def _run_report(args: argparse.Namespace) -> int:
    from runtime.cli import report_html

    return report_html.run(args, _progress_for)
