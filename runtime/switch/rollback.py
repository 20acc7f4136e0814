"""The rollback job (SPEC §4.5): rollback_scheduled → rolled_back | failed, CAS on identity;
back to activated (``rollback_refused``) when the old session's transcript is gone.

The old session is resumed with the old process's recorded argv (``facts.old_argv``, session
choice replaced by ``--resume OLD``), so it keeps every channel flag it had; the configured
``resume_argv`` is the fallback when that argv is unknown or unusable.
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Sequence
from typing import Any

from runtime.agents import claude
from runtime.agents.kind import AgentKind
from runtime.config import Config
from runtime.errors import IdentityConflictError
from runtime.switch import restart
from runtime.switch.job import Abort, Job, fault, log, worker_info
from runtime.switch.state import State
from runtime.switch.store import now_iso


def old_session_gone(config: Config, session_id: str, backup: str = "") -> str:
    """Why the old session ``session_id`` can no longer be resumed ('' when it can): its
    transcript is gone — deleted by hand, or by Claude Code's own clean-up of sessions older
    than ``cleanupPeriodDays`` (30 by default) — so a resume would end with "No conversation
    found" after the running new session had been stopped."""
    project = config.project_dir
    if project is None or not session_id:
        return ""
    if config.agent is AgentKind.CODEX:
        from runtime.paths import codex_rollout

        if codex_rollout(project, session_id) is not None:
            return ""
        where = f"rollout of thread {session_id} under {str(project)!r}"
    else:
        path = project / f"{session_id}.jsonl"
        if path.is_file():
            return ""
        where = f"transcript {str(path)!r}"
    kept = (f" (the switch froze a copy of it: {backup!r}; copy that back to resume it)"
            if backup and os.path.isfile(backup) else "")
    return (f"the old session's {where} is gone{kept}, so resuming it would stop the running "
            f"new session for nothing; the new session keeps running")


class Rollback(Job):
    """rollback_scheduled → rolled_back | activated (refused) | failed (CAS on identity)."""

    def run(self) -> None:
        try:
            self._run()
        except Exception as exc:  # noqa: BLE001 - every path must end in a terminal state
            log(traceback.format_exc())
            self._finish_failed("worker_error", f"{type(exc).__name__}: {exc}")

    def _run(self) -> None:
        self.op = self.store.update(self.id, phase="rollback_started",
                                    expect_state=State.ROLLBACK_SCHEDULED, worker=worker_info(),
                                    evidence={"pid": os.getpid()})
        self.store.heartbeat(self.id, "rollback_started")
        recorded = str(self.op.fact("identity_after", ""))
        try:
            current = self.door.identity()
        except IdentityConflictError as exc:
            self._finish_failed("session_conflict", str(exc))
            return
        if not recorded or current != recorded:
            self._finish_failed("session_conflict",
                                f"{self.door.name} identity is {current!r}, "
                                f"recorded after activation {recorded!r}")
            return
        try:
            self._check_running(current)
        except Abort as abort:
            self._finish_failed(abort.code, abort.message)
            return
        old_id = str(self.op.fact("old_session_id"))
        gone = old_session_gone(self.config, old_id, str(self.op.fact("backup") or ""))
        if gone:  # checked again here: the transcript may have gone since the request
            self.move(State.ACTIVATED, "rollback_refused", {"reason": gone},
                      facts={"rollback_refused": gone, "rollback_refused_at": now_iso()})
            return
        old_argv = self.op.fact("old_argv", [])
        argv, argv_source = self.old_resume_argv(old_id, old_argv)
        try:  # the running (new) session was started with the carried environment
            carried = self.capture_environment(self.door.process_pid(current))
        except Abort as abort:
            self._finish_failed(abort.code, abort.message)
            return
        if carried:
            self.note("environment", carried)
        self.switch_to(old_id, argv)
        self.note("switched", {"session_id": old_id, "argv": list(argv),
                               "argv_source": argv_source})
        fault("rollback_switched")
        report = self._ready(old_id, current, old_argv)
        self.note("health", {"ok": report.ok, "reason": report.reason, **report.evidence})
        if not report.ok:
            self._finish_failed("rollback_unhealthy", report.reason)
            return
        self.move(State.ROLLED_BACK, "rolled_back", {"identity": report.evidence.get("identity")},
                  facts={"identity_after_rollback": report.evidence.get("identity"),
                         "rolled_back_at": now_iso(), "resumed_argv_source": argv_source})

    def _check_running(self, identity: str) -> None:
        """Abort when the process behind ``identity`` runs another session (claude: the
        identity is the whole check)."""

    def _ready(self, old_id: str, current: str, old_argv: Sequence[str]) -> Any:
        """The evidence that the resumed old session runs."""
        flags = claude.channel_flags(old_argv)
        project = self.config.project_dir
        sw = self.config.switch
        return restart.ready(self.door, self.expectation(old_id, current, flags),
                             project.parent.parent if project is not None else None,
                             sw.activation_stable_seconds, sw.activation_timeout_seconds)

    def _finish_failed(self, code: str, message: str) -> None:
        log(f"{self.id}: rollback failed: {code}: {message}")
        current = self.store.read(self.id)
        if current.state != State.ROLLBACK_SCHEDULED:
            return
        self.op = current
        self.move(State.FAILED, "failed", {"code": code, "message": message},
                  failure={"code": code, "message": message})


