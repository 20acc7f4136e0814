"""Recovery: an operation whose worker is gone is reconciled with what really runs.

A worker records its pid and start time and heartbeats. When it is gone (dead, a zombie, a
reused pid, never recorded within the grace period, or silent far past every timeout), the
operation is settled by looking at the door: nothing switched → ``failed``; the new session
runs → ``activated``; the old one runs → ``rolled_back``; anything else → ``failed``. Called
by ``tl-rebuild recover`` and automatically by the next request or Stop, so no operation
blocks future requests forever.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

from runtime import identity as ident
from runtime import proc
from runtime.config import Config
from runtime.doors.base import open_door
from runtime.errors import IdentityConflictError, ThreadlineError
from runtime.state import WORKER_STATES, State
from runtime.store import Operation, Store, now_iso

SPAWN_GRACE_SECONDS = 15.0


def stuck_after(config: Config) -> float:
    """Heartbeat silence after which a live worker counts as hung."""
    sw = config.switch
    return max(300.0, 2 * (sw.stable_timeout_seconds + sw.healthcheck_seconds) + 120.0)


def worker_state(config: Config, store: Store, op: Operation) -> str:
    """``alive`` | ``gone`` | ``hung`` | ``none`` (no worker expected) for ``op``."""
    if op.state not in WORKER_STATES:
        return "none"
    worker = op.worker or {}
    pid = int(worker.get("pid") or 0)
    if not pid:
        try:
            age = time.time() - store.record_path(op.operation_id).stat().st_mtime
        except OSError:
            age = SPAWN_GRACE_SECONDS + 1
        return "gone" if age > SPAWN_GRACE_SECONDS else "alive"
    if not ident.alive(pid, worker.get("start_time")):
        return "gone"
    beat = store.heartbeat_age(op.operation_id)
    return "hung" if beat is not None and beat > stuck_after(config) else "alive"


def reconcile_if_lost(config: Config, store: Store, op: Operation) -> Operation | None:
    """Reconcile ``op`` when its worker is gone or hung; return the active operation after."""
    status = worker_state(config, store, op)
    if status not in ("gone", "hung"):
        return op
    with store.lock():
        if status == "hung":
            _kill(op)
        reconcile(config, store, op, why=f"worker {status}")
    give_back(config)
    return store.active()


def _kill(op: Operation) -> None:
    worker = op.worker or {}
    pid = int(worker.get("pid") or 0)
    if pid and ident.alive(pid, worker.get("start_time")):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def reconcile(config: Config, store: Store, op: Operation, why: str) -> Operation:
    """Settle ``op`` (in a worker state) from what the door shows now."""
    facts: dict[str, Any] = {"recovered_at": now_iso(),
                             "recovered_because": why}
    running, identity = _running_session(config, op)
    evidence = {"why": why, "interrupted_in": op.state.value, "identity": identity,
                "running_session": running}
    old_id, new_id = op.fact("old_session_id"), op.fact("new_session_id")
    if op.state in (State.SCHEDULED, State.RUNNING, State.VERIFYING) or (
        op.state == State.ACTIVATING and identity and identity == op.fact("identity_before")
    ):
        _remove_unused_candidate(store, op)
        return _settle(store, op, State.FAILED, evidence, facts, "worker_lost",
                       f"{why} in phase {op.state.value!r}; nothing was switched")
    if op.state == State.ACTIVATING:
        if running and running == new_id:
            facts["identity_after"] = identity
            return _settle(store, op, State.ACTIVATED, evidence, facts)
        if running and running == old_id:
            return _settle(store, op, State.ROLLED_BACK, evidence, facts, "worker_lost",
                           f"{why} during activation; the old session {old_id!r} runs")
    if op.state == State.ROLLBACK_SCHEDULED:
        if running and running == old_id:
            return _settle(store, op, State.ROLLED_BACK, evidence, facts)
        if running and running == new_id:
            return _settle(store, op, State.ACTIVATED, evidence, facts, "rollback_lost",
                           f"{why} before the rollback; the new session {new_id!r} still runs")
    return _settle(store, op, State.FAILED, evidence, facts, "worker_lost",
                   f"{why} in phase {op.state.value!r}; the target runs "
                   f"{running or 'nothing recognisable'!r}")


def _settle(store: Store, op: Operation, target: State, evidence: dict[str, Any],
            facts: dict[str, Any], code: str = "", message: str = "") -> Operation:
    failure = {"code": code, "message": message} if code else None
    changes: dict[str, Any] = {"facts": facts}
    if failure:
        changes["failure"] = failure
    return store.transition(op.operation_id, target, phase="recovered",
                            expect_revision=op.revision,
                            evidence={**evidence, "result": target.value, **(failure or {})},
                            **changes)


def _running_session(config: Config, op: Operation) -> tuple[str | None, str | None]:
    """(session id the target runs, door identity) — None where unknowable."""
    try:
        door = open_door(config)
        identity = door.identity()
    except (IdentityConflictError, ThreadlineError):
        return None, None
    if door.name == "pointer":
        return identity, identity
    pid = door.process_pid(identity)
    argv = ident.cmdline(pid) if pid else None
    running = ident.resumed_session(argv) if argv else None
    if running is None and pid and config.project_dir is not None:
        said = ident.claude_session_record(config.project_dir.parent.parent, pid)
        running = str(said["sessionId"]) if said and said.get("sessionId") else None
    return running, identity


def _remove_unused_candidate(store: Store, op: Operation) -> None:
    path = op.fact("candidate_path")
    if path and os.path.isfile(path) and proc.remove(path):
        store.event(op.operation_id, "candidate_removed", path=path)


def give_back(config: Config) -> None:
    """Restore what the lost worker's switch borrowed from the target (tmux remain-on-exit)."""
    try:
        open_door(config).settle()
    except ThreadlineError:
        pass  # the target is gone or unreadable: nothing to give back to
