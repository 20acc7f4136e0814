"""Operator sub-commands: request, status, list, cancel, rollback, doctor, recover, gc."""

from __future__ import annotations

import argparse
from typing import Any

from runtime.cli.output import SCHEMA_VERSION, emit_json, flatten


def register(sub: Any) -> None:
    """Add the operations sub-commands to ``sub``."""
    p = _cmd(sub, "request", "register a rebuild that happens after the current turn", _request,
             "tl-rebuild request --reason 'context full of tool output' --confirm REBUILD")
    p.add_argument("--reason", required=True, help="why (kept in the audit record)")
    p.add_argument("--confirm", default=None, help="must be REBUILD")
    p.add_argument("--session", default=None, help="bind to this session id")
    p = _cmd(sub, "status", "show one operation with its timeline", _status,
             "tl-rebuild status", "tl-rebuild status --operation OPERATION_ID --manifest")
    p.add_argument("--operation", default=None, help="operation id (default: active, else latest)")
    p.add_argument("--manifest", action="store_true",
                   help="print the kept per-item manifest (digest checked)")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="also print the recorded facts and each event's fields")
    _cmd(sub, "list", "list operations, newest first", _list, "tl-rebuild list --json")
    p = _cmd(sub, "cancel", "cancel a pending operation or a pending rollback", _cancel,
             "tl-rebuild cancel --operation OPERATION_ID --confirm CANCEL")
    p.add_argument("--operation", required=True)
    p.add_argument("--confirm", default=None, help="must be CANCEL")
    p = _cmd(sub, "rollback", "resume the old session after the next Stop", _rollback,
             "tl-rebuild rollback --operation OPERATION_ID --confirm ROLLBACK")
    p.add_argument("--operation", required=True)
    p.add_argument("--confirm", default=None, help="must be ROLLBACK")
    _cmd(sub, "doctor", "check config, store and door (read-only)", _doctor,
         "tl-rebuild doctor --config /etc/threadline/config.toml")
    _cmd(sub, "recover", "settle an operation whose worker is gone", _recover,
         "tl-rebuild recover --json")
    p = _cmd(sub, "gc", "delete old finished operations and their artifacts", _gc,
             "tl-rebuild gc", "tl-rebuild gc --keep 5")
    p.add_argument("--keep", type=int, default=None, help="keep the newest N (default from config)")
    for name in ("request", "cancel", "rollback", "recover", "gc"):
        sub.choices[name].add_argument("-v", "--verbose", action="store_true",
                                       help="also print the recorded facts")


def _cmd(sub: Any, name: str, help_text: str, func: Any,
         *examples: str) -> argparse.ArgumentParser:
    from runtime.cli import add_command

    parser = add_command(sub, name, help_text, examples)
    parser.add_argument("--config", default=None, help="runtime config (TOML)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(func=func)
    return parser


def _config(args: argparse.Namespace) -> Any:
    from runtime.config import config_path_from, load_config

    config = load_config(config_path_from(args.config))
    act_as_state_owner(config.state_dir)
    return config


def act_as_state_owner(state_dir: Any) -> None:
    """Run as the owner of ``state_dir`` when root runs an operator command on another user's
    deployment (``sudo tl-rebuild status``).

    Everything an operation touches belongs to the agent's user: its tmux server (``-L`` looks
    in the caller's own socket folder, so as root ``doctor`` failed the door check), the
    records the user's hook must update (a root-owned one kept the next switch from being
    recorded), the worker and the agent it respawns. So root drops to that user — groups, gid,
    uid, and HOME/USER/LOGNAME from its passwd entry — says so on stderr, and goes on. Nothing
    changes when the caller is not root, the state dir is root's or does not exist yet.
    """
    import os

    if os.geteuid() != 0 or state_dir is None:  # no state dir: the command says so itself
        return
    try:
        owner = os.stat(state_dir).st_uid
    except OSError:
        return
    if owner == 0:
        return
    import pwd
    import sys

    from runtime.errors import ThreadlineError

    try:
        entry = pwd.getpwuid(owner)
    except KeyError:
        raise ThreadlineError(
            f"state dir {str(state_dir)!r} belongs to uid {owner}, which has no passwd entry; "
            "run tl-rebuild as that user") from None
    os.initgroups(entry.pw_name, entry.pw_gid)
    os.setgid(entry.pw_gid)
    os.setuid(owner)
    os.environ.update(HOME=entry.pw_dir, USER=entry.pw_name, LOGNAME=entry.pw_name)
    print(f"tl-rebuild: acting as {entry.pw_name} (uid {owner}), the owner of the state dir "
          f"{str(state_dir)!r}", file=sys.stderr)


def _ops() -> Any:
    from runtime.switch import ops

    return ops


def _show(args: argparse.Namespace, result: dict[str, Any], lines: Any) -> int:
    """``result`` as JSON (``schema_version`` first), else ``lines(result, command)``: one
    summary line, the facts with ``-v``, the next step last."""
    if args.json:
        emit_json({"schema_version": SCHEMA_VERSION, **result})
        return 0
    from runtime.cli import render

    body = lines(result, _again(args))
    rows = [(k, "; ".join(map(str, v)) or "-" if isinstance(v, list) else v)
            for k, v in flatten(result) if k != "message"]
    facts = render.aligned(rows, indent="  ") if args.verbose else []
    render.write([body[0], *(["", "facts:", *facts, ""] if facts else []), *body[1:]])
    return 0


def _again(args: argparse.Namespace) -> str:
    """``tl-rebuild`` with the ``--config`` of this call, for the next-step lines."""
    import shlex

    return "tl-rebuild" + (f" --config {shlex.quote(args.config)}" if args.config else "")


def _cli(command: str, prog: str) -> str:
    """``prog`` with the sub-command put first (``tl-rebuild status --config C …``)."""
    name, _, rest = command.partition(" ")
    head, _, config = prog.partition(" ")
    return " ".join(p for p in (head, name, config, rest) if p)


def _request(args: argparse.Namespace) -> int:
    result = _ops().request(_config(args), args.reason, args.confirm, session_id=args.session,
                            source="cli")
    return _show(args, result, request_lines)


def request_lines(result: dict[str, Any], prog: str = "tl-rebuild") -> list[str]:
    """``requested rebuild OP of session S; it runs after the current turn ends`` … next."""
    op, message = result["operation_id"], str(result.get("message", ""))
    session = result.get("bound_session_id")
    whose = f"session {session}" if session else "the session whose turn ends next"
    if message.startswith("coalesced"):
        n = len(result.get("reasons") or [])
        head = (f"added your reason to the pending rebuild {op} of {whose} ({n} requests); "
                "it runs after the current turn ends")
    else:
        superseding = " (superseding a pending request of another session)" if (
            "superseding" in message) else ""
        head = (f"requested rebuild {op} of {whose}{superseding}; it runs after the current "
                "turn ends")
    return [head, f"watch it: {_cli(f'status --operation {op}', prog)}"]


def cancel_lines(result: dict[str, Any], prog: str = "tl-rebuild") -> list[str]:
    op = result["operation_id"]
    if result.get("state") == "activated":
        return [f"cancelled the rollback of {op}; the new session stays",
                f"watch it: {_cli(f'status --operation {op}', prog)}"]
    return [f"cancelled rebuild {op}; nothing was switched",
            f"next: request a new one when needed: {_cli('request', prog)} --reason '…' "
            "--confirm REBUILD"]


def rollback_lines(result: dict[str, Any], prog: str = "tl-rebuild") -> list[str]:
    op, turns = result["operation_id"], result.get("turns_since_switch")
    lost = ("nothing was said in the new session since the switch" if turns == 0 else
            "the turns said in the new session since the switch are not counted" if turns is None
            else f"{turns} turn{'' if turns == 1 else 's'} said in the new session since the "
                 "switch will not be in the old one")
    return [f"requested the rollback of {op} to the old session; it runs after the current "
            "turn ends", lost,
            f"watch it: {_cli(f'status --operation {op}', prog)}  (undo: "
            f"{_cli(f'cancel --operation {op}', prog)} --confirm CANCEL)"]


def recover_lines(result: dict[str, Any], prog: str = "tl-rebuild") -> list[str]:
    op = result.get("recovered")
    if op is None and result.get("operation_id") is None:
        return ["nothing to recover: no active operation", "next: nothing to do"]
    if op is None:
        op = result["operation_id"]
        return [f"nothing to recover: {op} is {result['state']}, its worker alive or not yet "
                "needed", f"watch it: {_cli(f'status --operation {op}', prog)}"]
    lines = [f"recovered {op}: {result['from']} → {result['state']}"]
    failure = result.get("failure")
    if failure:
        lines.append(f"failure: {failure.get('code', '?')} — {failure.get('message', '')}")
    return [*lines, f"see what happened: {_cli(f'status --operation {op}', prog)}"]


def gc_lines(result: dict[str, Any], prog: str = "tl-rebuild") -> list[str]:
    deleted, kept = len(result["deleted"]), result["kept"]
    plural = "" if deleted == 1 else "s"
    return [f"deleted {deleted} finished operation{plural} and their artifacts, kept {kept}",
            f"see what is kept: {_cli('list', prog)}"]


def _status(args: argparse.Namespace) -> int:
    result = _ops().status(_config(args), args.operation, manifest=args.manifest)
    if args.json:
        emit_json({"schema_version": SCHEMA_VERSION, **result})
        return 0
    from datetime import UTC, datetime

    from runtime.cli import render

    render.write(status_lines(result, datetime.now(UTC), args.verbose, _again(args)))
    manifest = result.get("manifest")
    if manifest is not None:
        print()
        _print_manifest(manifest)
    return 0


def status_lines(full: dict[str, Any], now: Any, verbose: bool = False,
                 prog: str = "tl-rebuild") -> list[str]:
    """``full`` (``ops.status``) for a person: state, age and failure first, then who and what,
    then one line per phase with its duration; the facts and event fields only ``verbose``."""
    from runtime.cli import render
    from runtime.cli.render import span, timeline_lines, when

    if full.get("operation_id") is None:
        return [str(full.get("message", "no operations yet"))]
    created = when(full.get("created_at"))
    age = f", created {span((now - created).total_seconds())} ago" if created else ""
    state = str(full["state"])
    colour = {"activated": "green", "failed": "red", "rolled_back": "red",
              "cancelled": "cyan"}.get(state, "yellow")
    lines = [f"{render.paint(state, colour)}{age}  (operation {full['operation_id']})"]
    failure = full.get("failure")
    if failure:
        lines.append(f"failure: {failure.get('code', '?')} — {failure.get('message', '')}")
    facts = full.get("facts") or {}
    reasons = full.get("reasons") or []
    rows: list[tuple[str, Any]] = [
        ("door", full.get("door")),
        ("worker", full.get("worker_status")),
        ("bound session", full.get("bound_session_id")),
        ("new session", facts.get("new_session_id")),
        ("reason", str(reasons[-1].get("reason", "")) + (
            f" ({len(reasons)} requests)" if len(reasons) > 1 else "") if reasons else None),
    ]
    if full.get("request_age_s") is not None:
        rows.append(("request age", span(float(full["request_age_s"]))))
    if full.get("request_expires_in_s") is not None:
        rows.append(("request expires in", span(max(0.0, float(full["request_expires_in_s"])))))
    rows += [("updated", full.get("updated_at")), ("state dir", full.get("state_dir_size"))]
    lines += render.aligned([(k, v) for k, v in rows if v not in (None, "")])
    events = list(full.get("events") or [])
    if events:
        lines += ["", f"timeline ({len(events)} phase{'' if len(events) == 1 else 's'}):"]
        durations = _durations(events)
        lines += [f"  {line}{f'  ({span(d)})' if d is not None else ''}"
                  for line, d in zip(timeline_lines(events, full.get("created_at")), durations,
                                     strict=True)]
    if verbose:
        if facts:
            lines += ["", "facts:"]
            lines += render.aligned(flatten(facts, "facts."), indent="  ")
        if events:
            lines += ["", "events:"]
            for event in events:
                extra = ", ".join(f"{k}={v}" for k, v in event.items()
                                  if k not in ("at", "phase") and v not in (None, ""))
                lines.append(f"  {event.get('at', '')}  {event.get('phase', '')}  {extra}")
    else:
        lines += ["", "(-v for the recorded facts, --json for the whole record)"]
    return [*lines, status_next(state, str(full["operation_id"]), prog)]


def status_next(state: str, op: str, prog: str = "tl-rebuild") -> str:
    """The last line of ``status``: what the operator can do next in ``state``."""
    if state in ("pending", "rollback_pending"):
        return (f"next: it runs after the current turn ends (call it off: "
                f"{_cli(f'cancel --operation {op}', prog)} --confirm CANCEL)")
    if state == "activated":
        return (f"next: nothing to do (back to the old session: "
                f"{_cli(f'rollback --operation {op}', prog)} --confirm ROLLBACK)")
    if state in ("failed", "rolled_back"):
        resumed = "the old session was resumed; " if state == "rolled_back" else ""
        return (f"next: {resumed}read the failure above and check with {_cli('doctor', prog)} "
                "before requesting again")
    if state == "cancelled":
        return f"next: nothing to do; request a new one when needed: {_cli('request', prog)}"
    return f"next: it is under way; watch it: {_cli(f'status --operation {op}', prog)}"


def _durations(events: list[dict[str, Any]]) -> list[float | None]:
    """How long each phase lasted: until the next one was recorded (the last: unknown)."""
    from runtime.cli.render import when

    stamps = [when(e.get("at")) for e in events]
    out: list[float | None] = []
    for here, there in zip(stamps, [*stamps[1:], None], strict=True):
        out.append(max(0.0, (there - here).total_seconds()) if here and there else None)
    return out


MANIFEST_COLUMNS = ("position", "role", "kind", "item_id", "source_uuid", "source_timestamp",
                    "candidate_sha256")


def _print_manifest(entries: list[dict[str, Any]]) -> None:
    """One line per carried item: where it came from and the digest of its text."""
    rows = [[str(e.get(c) if e.get(c) is not None else "-") for c in MANIFEST_COLUMNS]
            for e in entries]
    widths = [max(len(c), *(len(r[i]) for r in rows)) if rows else len(c)
              for i, c in enumerate(MANIFEST_COLUMNS)]
    print("  ".join(c.ljust(w) for c, w in zip(MANIFEST_COLUMNS, widths, strict=True)))
    for row in rows:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)))


def _list(args: argparse.Namespace) -> int:
    rows = _ops().list_operations(_config(args))
    if args.json:
        emit_json(rows)
        return 0
    if not rows:
        print("no operations")
        return 0
    cols = ("operation_id", "state", "updated_at", "door", "bound_session_id", "failure")
    widths = [max(len(c), *(len(str(r[c] or "")) for r in rows)) for c in cols]
    print("  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)))
    for row in rows:
        cells = (str(row[c] or "") for c in cols)
        print("  ".join(v.ljust(w) for v, w in zip(cells, widths, strict=True)))
    for row in rows:
        if row.get("error"):
            print(row["error"])
    return 0


def _cancel(args: argparse.Namespace) -> int:
    return _show(args, _ops().cancel(_config(args), args.operation, args.confirm), cancel_lines)


def _rollback(args: argparse.Namespace) -> int:
    return _show(args, _ops().rollback_request(_config(args), args.operation, args.confirm),
                 rollback_lines)


def _doctor(args: argparse.Namespace) -> int:
    result = _ops().doctor(_config(args))
    if args.json:
        emit_json({"schema_version": SCHEMA_VERSION, **result})
    else:
        from runtime.cli import render

        render.write(doctor_lines(result))
    return 0 if result["ok"] else 1


def doctor_lines(result: dict[str, Any]) -> list[str]:
    """A PASS/FAIL checklist, one line per check with its detail, then the counts."""
    from runtime.cli import render

    rows = []
    for name, check in result["checks"].items():
        word = "PASS" if check["ok"] else "FAIL"
        rows.append((render.paint(word, "green" if check["ok"] else "red"), name,
                     _detail(name, check["detail"])))
    lines = render.aligned(rows)
    active = result.get("active")
    if active:
        lines.append(f"active operation: {active['operation_id']} ({active['state']}, "
                     f"worker {active['worker']})")
    passed = sum(1 for c in result["checks"].values() if c["ok"])
    failed = len(result["checks"]) - passed
    lines.append(f"doctor: pass={passed} fail={failed}"
                 + (" — ready" if result["ok"] else " — fix the FAIL lines first"))
    return lines


def _detail(name: str, detail: Any) -> str:
    """One check's detail as words: argv as a command line, sizes with units, dicts as pairs."""
    import shlex

    from runtime.cli import render

    if name == "state_dir_size" and isinstance(detail, dict):
        extra = (f", worker log {render.size(detail['worker_log_bytes'])}"
                 if "worker_log_bytes" in detail else "")
        return f"{render.size(detail.get('bytes'))} in {detail.get('files')} files{extra}"
    if name == "store" and isinstance(detail, dict):
        active = detail.get("active")
        text = f"{detail.get('operations')} operations, active: " + (
            f"{active['operation_id']} ({active['state']})" if active else "none")
        strays = detail.get("not_operation_ids")
        broken = detail.get("unreadable")
        return (text + (f"; not operation ids: {', '.join(map(str, strays))}" if strays else "")
                + (f"; unreadable: {'; '.join(map(str, broken))}" if broken else ""))
    if name == "resume_argv_channels" and isinstance(detail, dict):
        required = " ".join(detail.get("required") or []) or "none"
        missing = " ".join(detail.get("missing") or []) or "none"
        return f"required {required}; missing {missing}"
    if isinstance(detail, list):
        return shlex.join(str(t) for t in detail) if detail else "(empty)"
    if isinstance(detail, dict):
        return ", ".join(f"{k} {_detail(k, v)}" for k, v in detail.items() if v not in (None, ""))
    if isinstance(detail, bool):
        return render.yes_no(detail)
    return "(not set)" if detail in (None, "None") else str(detail)


def _recover(args: argparse.Namespace) -> int:
    return _show(args, _ops().recover(_config(args)), recover_lines)


def _gc(args: argparse.Namespace) -> int:
    return _show(args, _ops().gc(_config(args), args.keep), gc_lines)
