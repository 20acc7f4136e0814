"""The Operations API used by the CLI and the MCP server (SPEC §4.1–§4.5).

Writing calls need their exact confirmation word (``REBUILD``, ``CANCEL``, ``ROLLBACK``) and
check it before anything is read or written. A request only records a durable ``pending``
operation (coalescing reasons into one already pending); the switch happens after the turn,
from the Stop hook. Writing calls first reconcile an active operation whose worker is gone
and end a request older than ``switch.request_max_age_hours`` (runtime.switch.recover);
``status``, ``list`` and ``doctor`` only read (``worker_status: gone`` says ``recover`` is due).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from runtime.agents import claude
from runtime.agents.kind import AgentKind
from runtime.config import Config, RebuildConfig
from runtime.errors import (
    BusyError,
    ConfigError,
    ConfirmationError,
    IllegalTransitionError,
    StoreError,
    TranscriptError,
)
from runtime.switch.housekeeping import beyond, prune_artifacts, read_manifest, state_size
from runtime.switch.recover import expire_if_stale, reconcile_if_lost, request_age, worker_state
from runtime.switch.state import State
from runtime.switch.store import Operation, Store, now_iso

MAX_REASON_CHARS = 300
WORDS = {"request": "REBUILD", "cancel": "CANCEL", "rollback": "ROLLBACK"}


def _confirm(action: str, confirmation: str | None) -> None:
    word = WORDS[action]
    if confirmation != word:
        raise ConfirmationError(
            f"{action} needs the confirmation word {word!r}, got {confirmation!r}; nothing written"
        )


def _store(config: Config) -> Store:
    if config.state_dir is None:
        raise ConfigError("state_dir: required for operations (set it in the runtime config)")
    return Store(config.state_dir)


def _settled_active(config: Config, store: Store, by: str,
                    session_id: str | None = None) -> Operation | None:
    op = store.active()
    if op is not None:
        op = reconcile_if_lost(config, store, op)
    if op is not None:
        op = expire_if_stale(config, store, op, by=by, session_id=session_id)
    return op


def request(config: Config, reason: str, confirmation: str, session_id: str | None = None,
            source: str = "cli") -> dict[str, Any]:
    """Register a rebuild for after this turn (coalesces into a pending one)."""
    _confirm("request", confirmation)
    if not reason or not reason.strip():
        raise ConfirmationError("request needs a non-empty reason; nothing written")
    if len(reason.strip()) > MAX_REASON_CHARS:
        raise ConfirmationError(
            f"request reason is {len(reason.strip())} characters, at most {MAX_REASON_CHARS}: "
            "say why in a sentence (audit records never hold conversation text); nothing written"
        )
    from runtime.agents.claude import SESSION_ID

    if session_id and not SESSION_ID.fullmatch(session_id):
        raise ConfirmationError(
            f"{session_id!r} is not a session id (letters, digits, '-' and '_'); nothing written"
        )
    store = _store(config)
    entry = {"reason": reason.strip(), "source": source, "at": now_iso()}
    if session_id:
        entry["session_id"] = session_id
    with store.lock():
        op = _settled_active(config, store, "request", session_id)
        if op is None:
            op = store.create(reason=entry, bound_session_id=session_id or None,
                              door=config.switch.door)
            message = "registered; reply normally — the switch happens after this turn ends"
        elif (op.state == State.PENDING and session_id and op.bound_session_id
              and session_id != op.bound_session_id):
            # The earlier session may be gone for good (/clear, restart): a pending operation
            # has done nothing yet, so the live requester supersedes it instead of waiting.
            store.transition(op.operation_id, State.CANCELLED, phase="superseded",
                             expect_revision=op.revision,
                             evidence={"by_session": session_id, "source": source})
            op = store.create(reason=entry, bound_session_id=session_id,
                              door=config.switch.door)
            message = ("registered (superseding a pending request of another session); "
                       "the switch happens after this turn ends")
        elif op.state == State.PENDING:
            op = store.update(op.operation_id, phase="coalesced", expect_revision=op.revision,
                              evidence={"source": source, "session_id": session_id},
                              reasons=[*op.reasons, entry],
                              bound_session_id=op.bound_session_id or session_id or None)
            message = "coalesced into the pending operation; the switch happens after this turn"
        else:
            raise BusyError(
                f"operation {op.operation_id!r} is already {op.state.value!r}; "
                "wait for it to finish or check `tl-rebuild status`"
            )
    return {
        "operation_id": op.operation_id,
        "state": op.state.value,
        "reasons": [r["reason"] for r in op.reasons],
        "bound_session_id": op.bound_session_id,
        "message": message,
    }


def _summary(store: Store, op: Operation) -> dict[str, Any]:
    return {
        "operation_id": op.operation_id,
        "state": op.state.value,
        "created_at": op.created_at,
        "updated_at": op.updated_at,
        "door": op.door,
        "bound_session_id": op.bound_session_id,
        "new_session_id": op.fact("new_session_id"),
        "reasons": len(op.reasons),
        "failure": op.failure.get("code") if op.failure else None,
    }


def status(config: Config, operation_id: str | None = None,
           manifest: bool = False) -> dict[str, Any]:
    """The full record and timeline of one operation (default: the active, else the latest).

    With ``manifest`` the operation's kept per-item manifest is added, after its digest was
    checked against the record.
    """
    store = _store(config)
    op: Operation | None
    if operation_id:
        op = store.read(operation_id)
    else:
        op = store.active() or store.latest()  # read-only: `recover` settles a lost worker
    if op is None:
        return {"operation_id": None, "state": None, "message": "no operations yet"}
    out = op.to_dict()
    out["worker_status"] = worker_state(config, store, op)
    out["state_dir_size"] = state_size(config, store)["shown"]
    out["heartbeat_age_s"] = _round(store.heartbeat_age(op.operation_id))
    age = request_age(op)
    out["request_age_s"] = _round(age)
    out["request_expires_in_s"] = _round(
        None if age is None else config.switch.request_max_age_hours * 3600.0 - age)
    out["events"] = store.events(op.operation_id)
    if manifest:
        out["manifest"] = read_manifest(op)
    return out


def list_operations(config: Config) -> list[dict[str, Any]]:
    """A one-line summary of every operation, newest first."""
    store = _store(config)
    found, broken = store.scan()
    rows = [_summary(store, op) for op in found]
    rows += [{"operation_id": operation_id, "state": "unreadable", "created_at": None,
              "updated_at": None, "door": None, "bound_session_id": None,
              "new_session_id": None, "reasons": None, "failure": None, "error": why}
             for operation_id, why in broken]
    return sorted(rows, key=lambda row: str(row["operation_id"]), reverse=True)


def cancel(config: Config, operation_id: str, confirmation: str) -> dict[str, Any]:
    """Cancel a pending operation (or a pending rollback, which keeps the new session)."""
    _confirm("cancel", confirmation)
    store = _store(config)
    with store.lock():
        op = store.read(operation_id)
        if op.state == State.PENDING:
            op = store.transition(operation_id, State.CANCELLED, phase="cancelled",
                                  expect_revision=op.revision)
            message = "cancelled; nothing was switched"
        elif op.state == State.ROLLBACK_PENDING:
            op = store.transition(operation_id, State.ACTIVATED, phase="rollback_cancelled",
                                  expect_revision=op.revision)
            message = "rollback cancelled; the new session stays"
        else:
            raise IllegalTransitionError(
                f"operation {operation_id!r} is {op.state.value!r}; only a pending operation "
                "or a pending rollback can be cancelled"
            )
    return {"operation_id": operation_id, "state": op.state.value, "message": message}


def rollback_request(config: Config, operation_id: str, confirmation: str) -> dict[str, Any]:
    """Ask the next Stop of the new session to resume the old one (CAS on its identity)."""
    _confirm("rollback", confirmation)
    store = _store(config)
    with store.lock():
        active = _settled_active(config, store, "rollback_request")
        if active is not None:
            raise BusyError(f"operation {active.operation_id!r} is {active.state.value!r}; "
                            "a rollback waits until it has finished")
        op = store.read(operation_id)
        if op.state != State.ACTIVATED:
            raise IllegalTransitionError(
                f"operation {operation_id!r} is {op.state.value!r}; only an activated "
                "operation can be rolled back"
            )
        later = [o for o in store.all() if o.operation_id > operation_id
                 and o.state == State.ACTIVATED]
        if later:
            raise IllegalTransitionError(
                f"operation {later[-1].operation_id!r} activated after {operation_id!r}; "
                "roll that one back first"
            )
        from runtime.switch.rollback import old_session_gone

        gone = old_session_gone(config, str(op.fact("old_session_id") or ""),
                                str(op.fact("backup") or ""))
        if gone:
            raise TranscriptError(f"rollback of {operation_id!r} refused: {gone}")
        turns = turns_since_switch(op, config.rebuild)
        op = store.transition(operation_id, State.ROLLBACK_PENDING, phase="rollback_pending",
                              expect_revision=op.revision, evidence={"turns_lost": turns},
                              facts={"rollback_requested_at": now_iso(),
                                     "turns_since_switch": turns})
    lost = "nothing was said" if not turns else f"{turns} turn(s) said"
    return {
        "operation_id": operation_id,
        "state": op.state.value,
        "turns_since_switch": turns,
        "message": (f"rollback registered; {lost} in the new session since the switch — the old "
                    "session will not have it; the switch back happens after this turn"),
    }


def turns_since_switch(op: Operation, rules: RebuildConfig | None = None) -> int | None:
    """Turns a human started in the new session since the switch (None: unknown).

    The lines after the carried items go through the rebuild's own speech allowlist, so
    queued prompts, channel messages and slash commands count and injected-only or
    tool-result lines do not — the same judgement that decides what a rebuild carries.
    """
    path, carried = op.fact("candidate_path"), op.fact("candidate_lines")
    if not path or carried is None:
        return None
    from runtime.engine.classify import Classifier
    from runtime.engine.dirty import Ledger
    from runtime.engine.speech import SpeechRules
    from runtime.engine.transcript import ReadStats
    from runtime.engine.turns import TurnBuilder

    sink = TurnBuilder()
    classifier = Classifier(SpeechRules.from_config(rules or RebuildConfig()), ReadStats(),
                            Ledger(), sink)
    classifier.snapshot_taken = True  # the new session's start-up context is not history
    try:
        with open(path, "rb") as handle:
            for number, line in enumerate(handle):
                if number < carried:
                    continue
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if isinstance(event, dict):
                    classifier.event(event, len(line))
    except OSError:
        return None
    classifier.finish()
    return sum(1 for turn in sink.finish() if turn.humans)


def _can_be_folder(path: Path) -> bool:
    """``path`` is a folder, or its nearest existing ancestor is one (a request creates it)."""
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return probe.is_dir()


def doctor(config: Config) -> dict[str, Any]:
    """Read-only checks of the runtime config, store and door."""
    checks: dict[str, dict[str, Any]] = {}

    def add(name: str, ok: bool, detail: Any) -> None:
        checks[name] = {"ok": bool(ok), "detail": detail}

    add("config", config.source is not None, str(config.source) if config.source else
        "no config file (--config or THREADLINE_CONFIG): defaults only")
    add("project_dir", bool(config.project_dir and config.project_dir.is_dir()),
        str(config.project_dir))
    add("workdir", bool(config.workdir and config.workdir.is_dir()), str(config.workdir))
    add("state_dir", config.state_dir is not None and _can_be_folder(config.state_dir),
        str(config.state_dir))
    sw = config.switch
    if sw.door.worker_builds_argv:
        add("resume_argv", any("{session_id}" in t for t in sw.resume_argv), list(sw.resume_argv))
        flags = claude.channel_flags(sw.channel_flags)
        have = claude.channel_flags(sw.resume_argv)
        add("resume_argv_channels", all(f in have for f in flags),
            {"required": list(flags), "missing": [f for f in flags if f not in have]})
    try:
        from runtime.doors.base import open_door
        from runtime.doors.tmux import TmuxDoor

        door = open_door(config)
        dead = door.dead() if isinstance(door, TmuxDoor) else None
        if dead is not None:  # the agent exited and tmux kept its pane (remain-on-exit)
            again = ("; tl-rebuild restart [--session ID] starts claude there again"
                     if config.agent is AgentKind.CLAUDE else "")
            add("door", False, {"door": door.name, "error": (
                f"tmux pane {sw.tmux.target!r} is dead (pid {dead.pid} exited){again}")})
        else:
            add("door", True, {"door": door.name, "identity": door.identity()})
    except Exception as exc:  # noqa: BLE001 - doctor reports, never raises
        add("door", False, {"door": sw.door, "error": str(exc)})
    active = None
    if config.state_dir is not None:
        try:
            store = Store(config.state_dir)
            op = store.active()
            if op is not None:
                active = {"operation_id": op.operation_id, "state": op.state.value,
                          "worker": worker_state(config, store, op)}
            strays = store.strays()  # the one place a non-conforming record name is reported
            broken = [why for _, why in store.unreadable()]
            add("store", not strays and not broken,
                {"operations": len(store.ids()), "active": active,
                 **({"not_operation_ids": strays} if strays else {}),
                 **({"unreadable": broken} if broken else {})})
            add("state_dir_size", True, state_size(config, store))
        except StoreError as exc:
            add("store", False, str(exc))
    return {"ok": all(c["ok"] for c in checks.values()), "checks": checks, "active": active}


def recover(config: Config) -> dict[str, Any]:
    """Reconcile an active operation whose worker is gone; report what was done."""
    store = _store(config)
    with store.lock():
        op = store.active() or store.adopt_unhinted()
        if op is None:
            return {"recovered": None, "state": None, "message": "no active operation"}
        before = op.state.value
        after = reconcile_if_lost(config, store, op)
        final = store.read(op.operation_id)
    if after is not None and after.operation_id == op.operation_id and final.state.value == before:
        return {"recovered": None, "operation_id": op.operation_id, "state": before,
                "message": f"operation is {before!r} with a live worker (or none needed)"}
    if not final.active:
        prune_artifacts(config, store, final.operation_id)
    return {"recovered": op.operation_id, "from": before, "state": final.state.value,
            "failure": dict(final.failure) if final.failure else None,
            "message": f"{op.operation_id}: {before} → {final.state.value}"}


def gc(config: Config, keep: int | None = None) -> dict[str, Any]:
    """Delete finished operations beyond the newest ``keep`` (active ones are never touched)."""
    store = _store(config)
    keep = config.switch.keep_operations if keep is None else keep
    if keep < 0:
        raise ConfigError(f"gc --keep must be ≥ 0, got {keep}")
    deleted = []
    with store.lock():
        ops = store.all()
        for op in beyond(ops, keep):
            store.delete(op.operation_id)
            deleted.append(op.operation_id)
    return {"deleted": deleted, "kept": len(ops) - len(deleted)}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def artifacts_of(config: Config, operation_id: str) -> Path:
    """The artifact folder of ``operation_id`` (for tests and the operator)."""
    return _store(config).artifacts_dir / operation_id
