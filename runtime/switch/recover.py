"""Recovery: an operation whose worker is gone is reconciled with what really runs.

A worker records its pid and start time and heartbeats. When it is gone (dead, a zombie, a
reused pid, never recorded within the grace period, or silent far past every timeout), the
operation is settled by looking at the door: nothing switched → ``failed``; the new session
runs → the worker's own health check (SPEC §4.4: argv, channel flags, cwd, channel servers),
then ``activated`` when it passes, else the old session is resumed (``rolled_back``, or
``failed`` when that fails) — never ``activated`` on argv alone; the old one runs →
``rolled_back``; anything else → ``failed``. Called
by ``tl-rebuild recover`` and automatically by the next request or Stop, so no operation
blocks future requests forever.

A request does not wait forever either: a ``pending`` rebuild (or a ``rollback_pending``
rollback) whose request is older than ``switch.request_max_age_hours`` is not carried out at
some later, unexpected Stop. The next Stop or request ends it — ``cancelled`` (a rollback:
back to ``activated``) with the timeline phase ``expired`` and ``reason: expired``.
"""

from __future__ import annotations

import os
import signal
import time
from datetime import datetime
from typing import Any

from runtime import proc
from runtime import procfs as ident
from runtime.agents import claude, codex
from runtime.agents.kind import AgentKind
from runtime.config import Config
from runtime.doors.base import open_door
from runtime.errors import IdentityConflictError, ThreadlineError
from runtime.switch.state import WORKER_STATES, State
from runtime.switch.store import Operation, Store, clock_age, now_iso

SPAWN_GRACE_SECONDS = 15.0


def stuck_after(config: Config) -> float:
    """Heartbeat silence after which a live worker counts as hung."""
    sw = config.switch
    return max(300.0, 2 * (sw.stable_timeout_seconds + sw.activation_timeout_seconds
                           + sw.healthcheck_seconds) + 120.0)


def worker_state(config: Config, store: Store, op: Operation) -> str:
    """``alive`` | ``gone`` | ``hung`` | ``none`` (no worker expected) for ``op``."""
    if op.state not in WORKER_STATES:
        return "none"
    worker = op.worker or {}
    pid = int(worker.get("pid") or 0)
    if not pid:  # scheduled, the worker not recorded yet: given SPAWN_GRACE_SECONDS
        try:
            age = clock_age(worker, store.record_path(op.operation_id).stat().st_mtime)
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


def request_age(op: Operation, now: float | None = None) -> float | None:
    """Seconds since the request ``op`` waits on (None: it waits on none, or no readable stamp).

    A pending rebuild waits on its creation (a later request into an expired one starts a new
    operation, so ``created_at`` is the oldest unanswered yes); a pending rollback on
    ``rollback_requested_at``.
    """
    if op.state == State.PENDING:
        stamp = op.created_at
    elif op.state == State.ROLLBACK_PENDING:
        stamp = op.fact("rollback_requested_at")
    else:
        return None
    try:
        then = datetime.fromisoformat(str(stamp)).timestamp()
    except ValueError:
        return None
    return max(0.0, (time.time() if now is None else now) - then)


def expire_if_stale(config: Config, store: Store, op: Operation, *, by: str,
                    session_id: str | None = None, now: float | None = None) -> Operation | None:
    """End ``op`` when its request is older than ``switch.request_max_age_hours``.

    Returns the active operation after (None once the expired request is cancelled). ``by``
    names the caller (``stop``, ``request``…) in the timeline.
    """
    age = request_age(op, now)
    limit = config.switch.request_max_age_hours * 3600.0
    if age is None or age <= limit:
        return op
    evidence = {"reason": "expired", "age_s": round(age, 1), "max_age_s": limit, "by": by,
                "session_id": session_id or None}
    with store.lock():
        if op.state == State.PENDING:
            store.transition(op.operation_id, State.CANCELLED, phase="expired",
                             expect_revision=op.revision, evidence=evidence,
                             facts={"cancel_reason": "expired", "expired_at": now_iso(),
                                    "expired_age_s": round(age, 1)})
        else:
            store.transition(op.operation_id, State.ACTIVATED, phase="rollback_expired",
                             expect_revision=op.revision, evidence=evidence,
                             facts={"rollback_cancel_reason": "expired",
                                    "rollback_expired_at": now_iso()})
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
            return _judge_new(config, store, op, evidence, facts, why)
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


def _judge_new(config: Config, store: Store, op: Operation, evidence: dict[str, Any],
               facts: dict[str, Any], why: str) -> Operation:
    """The new session runs: activated only if it passes the worker's health check."""
    from runtime.switch import health
    from runtime.switch.worker import job_classes

    job_cls = job_classes(config.agent)[0]
    job = job_cls(config, store, op, open_door(config))
    old_argv = list(op.fact("old_argv", []) or [])
    before = str(op.fact("identity_before", ""))
    with _worker_log(config):
        want = job.expectation(str(op.fact("new_session_id")), before,
                               job.required_flags(old_argv))
        report = (job._activate(want, old_argv) if config.agent is AgentKind.CODEX
                  else health.check(job.door, want))
        job.note("recovered_health", {"ok": report.ok, "reason": report.reason,
                                      **report.evidence})
        if report.ok:
            facts["identity_after"] = report.evidence.get("identity") or evidence["identity"]
            return _settle(store, job.op, State.ACTIVATED, evidence, facts)
        job.op = store.update(op.operation_id, phase="recovered",
                              expect_revision=job.op.revision, facts=facts,
                              evidence={**evidence, "result": "resuming the old session"})
        job._resume_old(before, old_argv, f"{why} after the switch; the new session is not "
                                          f"healthy: {report.reason}")
    return store.read(op.operation_id)


def _worker_log(config: Config) -> Any:
    """Send the job's log lines to the worker log (stdout is the CLI's JSON)."""
    import contextlib

    path = config.worker_log_path
    try:
        handle = open(path, "a", encoding="utf-8") if path else open(os.devnull, "w")  # noqa: SIM115
    except OSError:
        handle = open(os.devnull, "w")  # noqa: SIM115
    stack = contextlib.ExitStack()
    stack.enter_context(handle)
    stack.enter_context(contextlib.redirect_stdout(handle))
    return stack


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
    if door.name.identity_is_session:
        return identity, identity
    pid = door.process_pid(identity)
    if config.agent is AgentKind.CODEX and config.codex_home is not None:
        # the thread whose writer lock it holds; while it starts and holds none yet, the
        # thread its argv resumes (the health check then waits for the lock)
        threads = ident.codex_writer_locks(config.codex_home, pid) if pid else ()
        if not threads and pid:
            return codex.resumed_session(ident.cmdline(ident.command_pid(pid)) or ()), identity
        return (threads[0] if len(threads) == 1 else None), identity
    argv = ident.cmdline(pid) if pid else None
    running = claude.resumed_session(argv) if argv else None
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
