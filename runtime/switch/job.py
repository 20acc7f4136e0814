"""What every worker job shares: the record it moves, the door, the fault points, the logs.

``THREADLINE_WORKER_FAULT`` injects a crash or a pause at a phase for the recovery and race
tests (``kill:PHASE`` or ``pause:PHASE:FILE`` — waits until FILE exists, writes FILE.reached).
"""

from __future__ import annotations

import hashlib
import os
import signal
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from runtime import agents, logs, proc
from runtime import procfs as ident
from runtime.agents import claude
from runtime.config import Config
from runtime.doors.base import Door
from runtime.doors.kind import DoorKind
from runtime.paths import is_session_file
from runtime.switch import health
from runtime.switch.state import State
from runtime.switch.store import Operation, Store, now_iso

FAULT_ENV = "THREADLINE_WORKER_FAULT"


class Abort(Exception):
    """Stop the operation: ``code`` names why (``session_conflict``, ``source_changed`` …)."""

    def __init__(self, code: str, message: str, evidence: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.evidence = evidence or {}


LOG = logs.logger("worker")


def log(message: str) -> None:
    """One line of the worker log (stdout: the spawned worker's is ``worker.log``)."""
    LOG.info("%s", message)


def fault(phase: str) -> None:
    """Crash or pause here when the fault-injection variable names this phase."""
    spec = os.environ.get(FAULT_ENV, "")
    if not spec:
        return
    kind, _, rest = spec.partition(":")
    name, _, path = rest.partition(":")
    if name != phase:
        return
    if kind == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if kind == "pause" and path:
        proc.atomic_write(path + ".reached", phase.encode())
        deadline = time.monotonic() + 120
        while not os.path.exists(path) and time.monotonic() < deadline:
            time.sleep(0.02)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def counts_only(value: Any) -> Any:
    """Keep numbers, booleans and nested mappings of them: audit records carry no text."""
    if isinstance(value, bool | int | float) or value is None:
        return value
    if isinstance(value, dict):
        kept = {str(k): counts_only(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v is not None or value.get(k) is None}
    return None


def other_sessions(project_dir: Path, exclude: set[str]) -> dict[str, list[int]]:
    """``name → [size, mtime_ns]`` of top-level session files other than ``exclude``."""
    found: dict[str, list[int]] = {}
    for path in project_dir.glob("*.jsonl"):
        if path.name in exclude or not is_session_file(path):
            continue
        try:
            st = path.stat()
        except FileNotFoundError:
            continue
        found[path.name] = [st.st_size, st.st_mtime_ns]
    return found


ENV_PROGRAM = "/usr/bin/env"


class Job:
    """Shared plumbing of the rebuild and rollback runs: the record, the store, the door."""

    def __init__(self, config: Config, store: Store, op: Operation, door: Door) -> None:
        self.config = config
        self.store = store
        self.op = op
        self.door = door
        self.id = op.operation_id
        # The launch environment to carry (``switch.environment`` names → the running claude's
        # values); held in memory only: values never enter the record, the timeline or a log.
        self.carry: dict[str, str] = {}

    def capture_environment(self, pid: int | None) -> dict[str, Any]:
        """Read the carried variables from ``pid``'s environ; evidence holds names + digests.

        Abort (``environment_unknown``) when names are configured but the environ cannot be
        read: a resume without them can fail after the old process is gone ("No conversation
        found" in another ``CLAUDE_CONFIG_DIR``). A name the process does not have is carried
        as absent, like the launch had it.
        """
        names = self.config.switch.environment
        if not names or not self.door.name.carries_environment:
            return {}
        carry = carried_environment(names, pid)
        if carry is None:
            raise Abort("environment_unknown",
                        f"cannot read the environment of {self.door.name} process {pid} to "
                        f"carry {', '.join(names)}; run the worker as the claude user or root")
        self.carry = carry
        return {"environment": environment_digests(carry),
                "environment_absent": sorted(set(names) - set(carry))}

    def move(self, target: State, phase: str, evidence: dict[str, Any] | None = None,
             **changes: Any) -> None:
        self.op = self.store.transition(self.id, target, phase=phase, evidence=evidence,
                                        expect_revision=self.op.revision, **changes)
        self.store.heartbeat(self.id, phase)
        log(f"{self.id}: {phase} → {target.value}")

    def note(self, phase: str, evidence: dict[str, Any] | None = None, **changes: Any) -> None:
        if changes:
            self.op = self.store.update(self.id, phase=phase, evidence=evidence,
                                        expect_revision=self.op.revision, **changes)
        else:
            self.store.event(self.id, phase, state=self.op.state.value, **(evidence or {}))
        self.store.heartbeat(self.id, phase)
        log(f"{self.id}: {phase}")

    def resume_argv(self, session_id: str) -> tuple[str, ...]:
        return claude.format_argv(self.config.switch.resume_argv, session_id)

    def required_flags(self, old_argv: Sequence[str]) -> tuple[str, ...]:
        configured = claude.channel_flags(self.config.switch.channel_flags)
        return tuple(dict.fromkeys([*claude.channel_flags(old_argv), *configured]))

    def expectation(self, session_id: str, previous: str,
                    flags: Sequence[str]) -> health.Expectation:
        sw = self.config.switch
        return health.Expectation(
            session_id=session_id, previous_identity=previous, channel_flags=tuple(flags),
            workdir=self.config.workdir, channel_servers=sw.expected_channel_servers,
            project_dir=self.config.project_dir, window=sw.healthcheck_seconds,
            environment=tuple(sorted(environment_digests(self.carry).items())),
        )

    def old_resume_argv(self, session_id: str,
                        old_argv: Sequence[str]) -> tuple[tuple[str, ...], str]:
        """The argv that resumes the OLD session, and where it came from.

        Built from the old process's real argv (``--continue``/``--resume X`` → ``--resume
        session_id``, every channel flag kept), so a switch that failed because the configured
        resume argv lost a flag does not resume the old session deaf too. Falls back to the
        configured ``resume_argv`` when the old argv is unknown or cannot be rewritten
        unambiguously (a shell, two session choices …). Source: ``old_process`` | ``configured``.
        """
        from runtime.agents.claude import ResumeArgvError, resume_argv

        if old_argv:
            try:
                return tuple(resume_argv(old_argv, session_id)), "old_process"
            except ResumeArgvError as exc:
                log(f"{self.id}: old argv unusable for the resume ({exc}); using resume_argv")
        return self.resume_argv(session_id), "configured"

    def switch_to(self, session_id: str, argv: Sequence[str] | None = None) -> None:
        assert self.config.workdir is not None
        chosen = tuple(argv) if argv is not None else self.resume_argv(session_id)
        self.door.switch(session_id, self.with_environment(chosen), self.config.workdir)

    def with_environment(self, argv: tuple[str, ...]) -> tuple[str, ...]:
        """The argv the door starts: the tmux door respawns through a shell that does not have
        the launch's inline assignments, so they go in front (``env NAME=VALUE … claude``,
        the shape of a user's own ``VAR=x claude`` launch); a systemd unit and a runner loop
        start claude in their own environment already."""
        return with_environment(self.door.name, self.carry, argv)


def carried_environment(names: Sequence[str], pid: int | None) -> dict[str, str] | None:
    """``name → value`` of the launch variables ``names`` in the process running claude's
    command under ``pid`` (None when its environ cannot be read); absent names are left out."""
    env = ident.environ(ident.command_pid(pid)) if pid else None
    return None if env is None else agents.carried_environment(names, env)


def environment_digests(carry: dict[str, str]) -> dict[str, str]:
    """Names and digests of carried values: what records, timelines and checks may hold."""
    return {name: ident.value_digest(value) for name, value in sorted(carry.items())}


def with_environment(door: DoorKind, carry: dict[str, str],
                     argv: tuple[str, ...]) -> tuple[str, ...]:
    """The argv a door starts: the tmux door respawns through a shell without the launch's
    inline assignments, so they go in front (``env NAME=VALUE … claude``); a systemd unit and a
    runner loop start claude in their own environment already."""
    if not door.environment_in_argv or not carry:
        return argv
    return (ENV_PROGRAM, *(f"{k}={v}" for k, v in sorted(carry.items())), *argv)


def worker_info() -> dict[str, Any]:
    pid = os.getpid()
    return {"pid": pid, "start_time": ident.start_time(pid), "started_at": now_iso()}


def line_count(path: Path) -> int:
    with open(path, "rb") as handle:
        return sum(1 for _ in handle)


