"""What a Stop does to the active operation: schedule it and start its worker.

Called by the Stop hook only when an operation is active. Under the store lock it first
reconciles an operation whose worker is gone and ends a request older than
``switch.request_max_age_hours`` (``cancelled``, phase ``expired``), then ignores a Stop from
a session other than the one the operation is bound to, or from a claude of another companion
sharing this claude user (timeline entries), else moves
``pending → scheduled`` or ``rollback_pending → rollback_scheduled`` and starts the worker.

Pointer door (SPEC §4.3: the trigger is the runner calling ``tl-rebuild hook-stop`` between
calls): the runner's payload-less call runs the worker in the foreground (nothing is killed,
so its next call already reads the new pointer) and the pointer names the session. A Stop
carrying Claude Code's payload comes from inside a running ``claude -p``, which waits for the
hook: running the worker there would deadlock (the worker waits for claude to finish, claude
for the hook). That Stop only records a ``stop_deferred`` timeline line and returns; when no
pointer exists yet (the runner started with its launch argv) it adopts the stopping session
as the pointer, so the runner's call knows which session to switch.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from runtime import proc
from runtime import procfs as ident
from runtime.agents.kind import AgentKind
from runtime.config import Config
from runtime.doors.base import open_door
from runtime.doors.kind import DoorKind
from runtime.doors.systemd import EscapePlan, escape_prefix
from runtime.errors import StoreError, ThreadlineError
from runtime.paths import codex_rollout, codex_thread_of
from runtime.switch.recover import expire_if_stale, reconcile_if_lost
from runtime.switch.state import State
from runtime.switch.store import Operation, Store, clock_stamp


def on_stop(config: Config, payload: dict[str, Any], *, wait: bool = False) -> str | None:
    """Handle one Stop; return the id of the operation a worker was started for, or None."""
    if config.state_dir is None:
        return None
    store = Store(config.state_dir)
    session_id = str(payload.get("session_id") or "")
    if config.switch.door is DoorKind.POINTER:
        if from_claude(payload):
            _defer_to_runner(config, store, payload, session_id)
            return None
        # The runner's call between two claude calls, with no payload: the pointer names the
        # session. Nothing is killed by this door, so the worker runs in the foreground and
        # the runner's next call already reads the new pointer.
        wait = True
        session_id = session_id or _pointer_session(config)
    with store.lock():
        op = _settled(config, store, session_id)
        if op is None or op.state not in (State.PENDING, State.ROLLBACK_PENDING):
            return None
        expected = (op.bound_session_id if op.state == State.PENDING
                    else op.fact("new_session_id"))
        if expected and session_id != expected:
            store.event(op.operation_id, "stop_ignored", state=op.state.value,
                        session_id=session_id or None, bound_session_id=expected,
                        reason="Stop from another session")
            return None
        elsewhere = _other_companion(config)
        if elsewhere:
            store.event(op.operation_id, "stop_ignored", state=op.state.value,
                        session_id=session_id or None, reason=elsewhere)
            return None
        if op.state == State.PENDING:
            op = _schedule_rebuild(config, store, op, payload, session_id)
        else:
            op = store.transition(op.operation_id, State.ROLLBACK_SCHEDULED,
                                  phase="rollback_scheduled", expect_revision=op.revision,
                                  evidence={"session_id": session_id},
                                  worker=clock_stamp())  # no worker yet: when it was asked for
        if op is None or op.state not in (State.SCHEDULED, State.ROLLBACK_SCHEDULED):
            return None
        if not wait:
            _start_worker(config, store, op)
            return op.operation_id
    from runtime.switch.worker import run

    run(config, op.operation_id)
    return op.operation_id


def on_turn_end(config: Config, thread_id: str, *, wait: bool = False) -> str | None:
    """Handle the end of a Codex turn of ``thread_id`` (its ``notify``) like a Stop: the
    rollout of that thread is the transcript; a thread with none (the TUI's ephemeral
    title-generation thread) or another than the bound one is ignored."""
    rollout = codex_rollout(config.project_dir, thread_id) if config.project_dir else None
    return on_stop(config, {"session_id": thread_id,
                            "transcript_path": str(rollout) if rollout else ""}, wait=wait)


def session_of(config: Config, transcript: Path) -> str:
    """The session a transcript holds: its stem (claude) or the thread id its name ends in
    (a revision ``…-<thread>_<revision>.jsonl`` holds ``<thread>``)."""
    if config.agent is AgentKind.CODEX:
        return codex_thread_of(transcript) or transcript.stem[-36:]
    return transcript.stem


def _settled(config: Config, store: Store, session_id: str) -> Operation | None:
    """The active operation once a lost worker is reconciled and an expired request ended."""
    op = store.active()
    if op is not None:
        op = reconcile_if_lost(config, store, op)
    if op is not None:
        op = expire_if_stale(config, store, op, by="stop", session_id=session_id)
    return op


def _other_companion(config: Config) -> str:
    """Why this Stop comes from a claude that is not this companion's ('' when it is ours).

    Several companions can share one claude user, so every claude of that user runs every
    companion's Stop hook. A hook whose ancestors include a claude (a live process with a
    session record in this config's claude dir) but not the process behind this companion's
    door comes from another companion: its Stop must never schedule this one's operation.
    Run by hand, by a runner, or where the door's process is unknown, nothing is refused.
    """
    if (not config.switch.door.runs_process or config.project_dir is None
            or not config.agent.hook_has_agent_ancestor):
        return ""  # codex runs its notify detached: no ancestor to tell companions apart
    claude_dir = config.project_dir.parent.parent
    chain = _ancestors(os.getpid())
    claudes = [pid for pid in chain if ident.claude_session_record(claude_dir, pid)]
    if not claudes:
        return ""
    try:
        door = open_door(config)
        door_pid = door.process_pid(door.identity())
    except ThreadlineError:
        return ""
    if door_pid is None or door_pid in chain:
        return ""
    return (f"Stop from claude pid {claudes[0]}, which does not run under this companion's "
            f"{door.name} door (pid {door_pid}): another companion")


def _ancestors(pid: int) -> list[int]:
    """``pid``'s parent, grandparent, … up to (not including) pid 1."""
    chain: list[int] = []
    while pid > 1 and len(chain) < 64:
        try:
            stat = ident.parse_stat(Path(f"/proc/{pid}/stat").read_text())
        except OSError:
            break
        if stat is None:
            break
        pid = stat[1]
        if pid > 1:
            chain.append(pid)
    return chain


def from_claude(payload: dict[str, Any]) -> bool:
    """True when the hook input is Claude Code's own Stop payload (a claude is running)."""
    return bool(payload.get("session_id") or payload.get("hook_event_name"))


DEFERRED = "pointer door: the runner's hook-stop between calls switches"


def _defer_to_runner(config: Config, store: Store, payload: dict[str, Any],
                     session_id: str) -> None:
    """Record that a Stop from inside ``claude -p`` leaves the switch to the runner's call."""
    with store.lock():
        op = _settled(config, store, session_id)
        if op is None or op.state not in (State.PENDING, State.ROLLBACK_PENDING):
            return
        adopted = op.state == State.PENDING and _adopt_pointer(config, op, payload, session_id)
        store.event(op.operation_id, "stop_deferred", state=op.state.value,
                    session_id=session_id or None, pointer_adopted=adopted, reason=DEFERRED)


def _adopt_pointer(config: Config, op: Operation, payload: dict[str, Any],
                   session_id: str) -> bool:
    """Write the stopping session into a missing pointer; True when written."""
    from runtime.doors.pointer import PointerDoor, write_pointer

    try:
        door = PointerDoor.from_config(config)
    except ThreadlineError:
        return False
    if door.path.exists():
        return False  # whatever it names, the runner's call and the worker judge it
    problem, transcript = _transcript(config, payload, session_id)
    if problem or transcript is None:
        return False
    if op.bound_session_id and session_of(config, transcript) != op.bound_session_id:
        return False  # a Stop from another session: the runner's call ignores it
    write_pointer(door.path, transcript.stem)
    return True


def _pointer_session(config: Config) -> str:
    from runtime.doors.pointer import PointerDoor

    try:
        return PointerDoor.from_config(config).identity()
    except ThreadlineError:
        return ""


def _schedule_rebuild(config: Config, store: Store, op: Operation, payload: dict[str, Any],
                      session_id: str) -> Operation | None:
    problem, transcript = _transcript(config, payload, session_id)
    if problem:
        if not op.bound_session_id:  # unbound: wait for a Stop that names a usable session
            store.event(op.operation_id, "stop_ignored", state=op.state.value, reason=problem)
            return None
        return _fail(store, op, "bad_stop_payload", problem)
    assert transcript is not None
    return store.transition(
        op.operation_id, State.SCHEDULED, phase="scheduled", expect_revision=op.revision,
        evidence={"session_id": session_id, "transcript": str(transcript)},
        worker=clock_stamp(),  # no worker yet: when it was asked for (recover's spawn grace)
        bound_session_id=op.bound_session_id or session_of(config, transcript),
        facts={"transcript_path": str(transcript),
               "old_session_id": session_of(config, transcript),
               "stop_session_id": session_id or None},
    )


def _transcript(config: Config, payload: dict[str, Any],
                session_id: str) -> tuple[str, Path | None]:
    if config.project_dir is None:
        return "config lacks project_dir", None
    raw = payload.get("transcript_path") or (
        str(config.project_dir / f"{session_id}.jsonl") if session_id else "")
    if not raw:
        return "the Stop payload names no session_id or transcript_path", None
    path = Path(str(raw)).expanduser()
    try:
        resolved = path.resolve(strict=True)
        project = config.project_dir.resolve(strict=True)
    except (OSError, RuntimeError):  # RuntimeError: a symlink loop on Python < 3.13
        return f"transcript {str(path)!r} or project_dir does not exist", None
    nested = config.agent.sessions_nested  # rollouts live in dated folders below sessions/
    inside = resolved.is_relative_to(project) if nested else resolved.parent == project
    if not inside or resolved.suffix != ".jsonl":
        return (f"transcript {str(path)!r} is not a session file of project_dir "
                f"{str(config.project_dir)!r}"), None
    if session_id and session_of(config, resolved) != session_id:
        return f"transcript {str(path)!r} is not the file of session {session_id!r}", None
    return "", resolved


def _fail(store: Store, op: Operation, code: str, message: str) -> Operation:
    return store.transition(op.operation_id, State.FAILED, phase="failed",
                            expect_revision=op.revision,
                            evidence={"code": code, "message": message},
                            failure={"code": code, "message": message})


def worker_argv(config: Config, operation_id: str) -> list[str]:
    """The command line of the worker for ``operation_id`` (``--scheduled`` instead of the id
    under sudo: the sudoers rule allows one exact command, no wildcard)."""
    if config.source is None:
        raise StoreError("the worker needs a config file (--config or THREADLINE_CONFIG)")
    which = ["--scheduled"] if config.switch.systemd.sudo_user else [operation_id]
    return [sys.executable, "-m", "runtime.switch.worker", *which,
            "--config", str(Path(config.source).resolve())]


def _start_worker(config: Config, store: Store, op: Operation) -> None:
    sudo_user = config.switch.systemd.sudo_user
    plan = (escape_prefix(config.switch.systemd.unit if sudo_user else op.operation_id,
                          sudo_user=sudo_user)
            if config.switch.door.restarts_unit else EscapePlan((), None))
    unit = plan.unit if plan.prefix else None
    if not plan.ok:
        _fail(store, op, "cgroup_escape_failed", str(plan.reason))
        return
    try:
        argv = [*plan.prefix, *worker_argv(config, op.operation_id)]
        log_path = config.worker_log_path or (Path(store.root) / "worker.log")
        pid = proc.spawn_detached(argv, log_path=log_path, env=os.environ,
                                  cwd=str(store.root), watch=plan.prefix[:1] == ("sudo",))
    except ThreadlineError as exc:
        _fail(store, op, "worker_spawn_failed", str(exc))
        return
    # Read now, while the child is ours and unreaped: a worker that dies before it records
    # itself must not make a later process with its pid look like it (recover: "gone").
    started = ident.start_time(pid, exited=True)
    store.event(op.operation_id, "worker_spawned", state=op.state.value, pid=pid,
                escaped_unit=unit, argv=argv)
    try:
        store.update(op.operation_id, expect_state=op.state,
                     worker={"pid": pid, "start_time": started, "spawned_by": "hook"})
    except StoreError:
        pass  # the worker already recorded itself (or finished): its record wins
    if plan.prefix[:1] == ("sudo",):
        _check_sudo(store, op.operation_id, pid, log_path)


SUDO_WAIT = 10.0  # sudo returns once the --scheduled worker has forked (well under a second)


def _check_sudo(store: Store, op_id: str, pid: int, log_path: Path) -> None:
    """sudo exits as soon as the worker has forked; a non-zero exit means no worker runs
    (a refused or missing sudoers rule): fail the operation now instead of leaving it
    ``scheduled`` until recover. Bounded; an exit we cannot observe is left to recover."""
    rc = proc.wait_spawned(pid, SUDO_WAIT)
    if rc is None or rc == 0:
        return
    current = store.read(op_id)
    if current.state is State.SCHEDULED:
        lines = Path(log_path).read_text(errors="replace").strip().splitlines()
        _fail(store, current, "worker_spawn_failed",
              f"sudo did not start the worker (rc={rc}): "
              f"{lines[-1] if lines else 'no output'}; see {log_path}")
