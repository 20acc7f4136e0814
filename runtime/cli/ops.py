"""Operator sub-commands: request, status, list, cancel, rollback, doctor, recover, gc."""

from __future__ import annotations

import argparse
from typing import Any

from runtime.cli.output import emit_json, flatten, table


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

    return load_config(config_path_from(args.config))


def _ops() -> Any:
    from runtime.switch import ops

    return ops


def _show(args: argparse.Namespace, result: dict[str, Any]) -> int:
    if args.json:
        emit_json(result)
    else:
        table(flatten(result))
    return 0


def _request(args: argparse.Namespace) -> int:
    result = _ops().request(_config(args), args.reason, args.confirm, session_id=args.session,
                            source="cli")
    return _show(args, result)


def _status(args: argparse.Namespace) -> int:
    result = _ops().status(_config(args), args.operation, manifest=args.manifest)
    if args.json:
        emit_json(result)
        return 0
    events = result.pop("events", [])
    manifest = result.pop("manifest", None)
    table(flatten(result))
    if events:
        print()
        for event in events:
            extra = ", ".join(f"{k}={v}" for k, v in event.items()
                              if k not in ("at", "phase", "argv") and v not in (None, ""))
            print(f"{event.get('at', '')}  {event.get('phase', ''):<20} {extra}")
    if manifest is not None:
        print()
        _print_manifest(manifest)
    return 0


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
    return 0


def _cancel(args: argparse.Namespace) -> int:
    return _show(args, _ops().cancel(_config(args), args.operation, args.confirm))


def _rollback(args: argparse.Namespace) -> int:
    return _show(args, _ops().rollback_request(_config(args), args.operation, args.confirm))


def _doctor(args: argparse.Namespace) -> int:
    result = _ops().doctor(_config(args))
    _show(args, result)
    return 0 if result["ok"] else 1


def _recover(args: argparse.Namespace) -> int:
    return _show(args, _ops().recover(_config(args)))


def _gc(args: argparse.Namespace) -> int:
    return _show(args, _ops().gc(_config(args), args.keep))
