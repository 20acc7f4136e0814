"""The rebuild job for a Codex TUI (issue 17): the Claude job with Codex's identity, build and
health.

- Identity (CAS): the door's process (tmux ``#{pane_pid}``, the npm wrapper) and the one
  thread it — or its native child — holds the writer lock for in ``codex_home``
  (``runtime.procfs.codex_writer_locks``). No lock, or two (after ``/fork`` both threads are
  locked), is a ``session_conflict``, as is a thread other than the stopping one. The final
  recheck under the store lock reads both again.
- Build: the Codex engine writes ``rollout-<time>-<new id>.jsonl`` into the dated folder of
  the sessions root and verifies it (``runtime.engine.codex``).
- Health ("activated"): a new process runs in the pane; it holds the writer lock of the NEW
  thread; its argv resumes that thread with every option the old process had (what
  ``runtime.agents.codex.resume_argv`` keeps); its cwd is the workdir; and all of it holds
  unchanged for ``activation_stable_seconds`` — then for ``healthcheck_seconds`` more it stays
  alive holding the lock. A failure resumes the old thread with the old process's own argv.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from runtime import procfs as ident
from runtime.agents import codex
from runtime.errors import IdentityConflictError, ThreadlineError
from runtime.switch import health
from runtime.switch.job import Abort, Job, log
from runtime.switch.rebuild import Rebuild
from runtime.switch.rollback import Rollback
from runtime.switch.state import State
from runtime.switch.store import now_iso

POLL = 0.1


def look(door: Any, home: Path, thread: str, options: tuple[tuple[str, ...], ...],
         workdir: Path | None, previous: str) -> tuple[list[str], list[str], dict[str, Any]]:
    """(still missing, wrong, evidence) of one look at the process behind ``door``."""
    try:
        identity = door.identity()
    except IdentityConflictError as exc:
        return [], [f"the new process is gone: {exc}"], {"identity": None, "gone": True}
    if identity == previous:
        return [f"the process was not replaced yet (identity {identity})"], [], {
            "identity": identity}
    pid = ident.command_pid(int(identity)) if identity.isdigit() else 0
    argv = ident.cmdline(pid) or ()
    threads = ident.codex_writer_locks(home, pid)
    cwd = ident.cwd(pid)
    evidence: dict[str, Any] = {"identity": identity, "pid": pid, "argv": list(argv),
                                "threads": list(threads), "cwd": cwd}
    pending: list[str] = []
    wrong: list[str] = []
    try:
        parsed = codex.parse_argv(argv)
    except codex.ResumeArgvError as exc:
        return [f"argv is not codex's yet ({exc})"], [], evidence
    if codex.resumed_session(argv) != thread:
        wrong.append(f"argv does not resume thread {thread!r}")
    lost = [" ".join(o) for o in options if o not in parsed.options]
    if lost:
        wrong.append("argv lost option(s) " + ", ".join(repr(o) for o in lost))
    if workdir is not None and not health._same_dir(cwd, workdir):
        wrong.append(f"cwd is {cwd!r}, expected {str(workdir)!r}")
    if threads != (thread,):
        pending.append(f"holds the writer lock of {list(threads)!r}, not of {thread!r}"
                       + _elsewhere(home, thread, threads))
    return pending, wrong, evidence


def _elsewhere(home: Path, thread: str, threads: Sequence[str]) -> str:
    """Who holds ``thread``'s writer lock when the pane holds none: a plain codex runs its
    threads in the shared ``codex app-server --managed-daemon`` (HANDOFF "Codex (runtime)")."""
    holder = None if threads else ident.codex_lock_holder(home, thread)
    if holder is None:
        return ""
    argv = list(ident.cmdline(holder) or ("?",))
    shown = " ".join([Path(argv[0]).name, *argv[1:]])[:100]
    return (f"; pid {holder} outside the pane holds it ({shown}): the shared app-server "
            "daemon, launch codex with --no-daemon")


def judge(door: Any, home: Path, thread: str, options: tuple[tuple[str, ...], ...],
          workdir: Path | None, previous: str, stable: float, timeout: float,
          window: float = 0.0) -> health.HealthReport:
    """Healthy once every look is right and unchanged for ``stable`` seconds, then still so
    (alive, same pid, holding the lock) for ``window`` seconds; wrong as long is the verdict."""
    started = time.monotonic()
    key: Any = None
    since = started
    ready_at: float | None = None
    while True:
        now = time.monotonic()
        pending, wrong, evidence = look(door, home, thread, options, workdir, previous)
        evidence["seen_after_s"] = round(now - started, 3)
        if evidence.get("gone"):
            return health.HealthReport(False, "; ".join(wrong), evidence)
        current = (evidence.get("pid"), tuple(evidence.get("argv", ())),
                   tuple(evidence.get("threads", ())))
        if current != key:
            if ready_at is not None:
                return health.HealthReport(False, f"the process changed after it was ready "
                                           f"({key} → {current})", evidence)
            key, since = current, now
        held = now - since >= stable
        if held and not pending and not wrong:
            ready_at = ready_at or now
            if now - ready_at >= window:
                return health.HealthReport(True, "healthy", evidence)
        elif ready_at is not None:
            return health.HealthReport(False, "; ".join(wrong + pending), evidence)
        if held and wrong:
            return health.HealthReport(False, "; ".join(wrong), evidence)
        if now - started >= timeout and ready_at is None:
            return health.HealthReport(
                False, "; ".join(wrong + pending) + f" (after {timeout:g}s)", evidence)
        time.sleep(POLL)


class CodexJob(Job):
    """What the Codex rebuild and rollback share: CODEX_HOME and the resume rules."""

    @property
    def home(self) -> Path:
        if self.config.codex_home is None:
            raise Abort("config", "agent 'codex' needs codex_home")
        return self.config.codex_home

    def _options(self, old_argv: Sequence[str]) -> tuple[tuple[str, ...], ...]:
        """The options a resume keeps from the old process's argv (none when unreadable)."""
        try:
            return codex.parse_argv(codex.resume_argv(old_argv, "x")).options
        except codex.ResumeArgvError:
            return ()

    def old_resume_argv(self, session_id: str,
                        old_argv: Sequence[str]) -> tuple[tuple[str, ...], str]:
        if old_argv:
            try:
                return tuple(codex.resume_argv(old_argv, session_id)), "old_process"
            except codex.ResumeArgvError as exc:
                log(f"{self.id}: old argv unusable for the resume ({exc}); using resume_argv")
        return self.resume_argv(session_id), "configured"


class CodexRebuild(CodexJob, Rebuild):
    """The rebuild job of a Codex TUI behind the tmux door."""

    def _config_dir(self) -> Path | None:
        return None  # codex keeps no per-pid session record

    def _claude_busy(self) -> bool:
        return False  # the turn has ended (notify): the rollout's stability is the evidence

    def _thread_of(self, identity: str) -> tuple[int | None, str]:
        """(pid, thread) behind ``identity``; Abort when it holds no or several locks."""
        pid = self.door.process_pid(identity)
        threads = ident.codex_writer_locks(self.home, pid) if pid else ()
        if len(threads) != 1:
            why = "no thread's" if not threads else f"{len(threads)} threads' ({threads!r})"
            raise Abort("session_conflict", f"{self.door.name} process {pid} holds {why} "
                        f"writer lock in {str(self.home)!r}", {"threads": list(threads)})
        return pid, threads[0]

    def _capture_identity(self) -> tuple[str, tuple[str, ...]]:
        try:
            identity = self.door.identity()
        except IdentityConflictError as exc:
            raise Abort("session_conflict", str(exc)) from exc
        old_id = str(self.op.fact("old_session_id"))
        pid, thread = self._thread_of(identity)
        if thread != old_id:
            raise Abort("session_conflict", f"{self.door.name} process {pid} writes thread "
                        f"{thread!r}, not the stopping {old_id!r}")
        command = ident.command_pid(pid) if pid else None
        old_argv = (ident.cmdline(command) or ()) if command else ()
        carried = self.capture_environment(pid)
        self.note("identity", {"identity": identity, "pid": pid, "thread": thread,
                               "argv": list(old_argv), **carried},
                  facts={"identity_before": identity, "old_argv": list(old_argv),
                         "thread_before": thread})
        return identity, old_argv

    def _recheck(self, source: Path, digest: str, identity: str,
                 others: dict[str, list[int]]) -> None:
        super()._recheck(source, digest, identity, others)
        _, thread = self._thread_of(identity)
        if thread != self.op.fact("old_session_id"):
            raise Abort("session_conflict", f"the pane now writes thread {thread!r}")

    def _build(self, backup: Path) -> tuple[Any, str]:
        from runtime.engine.codex import candidate

        source = Path(self.op.fact("transcript_path"))
        result = candidate.build(backup, self.config)
        new_id = self._keep_candidate(result, lambda: candidate.write(
            result, candidate.default_folder(source, result.created)))
        return result, new_id

    def _verifier(self) -> Callable[[Path, Any], Any]:
        from runtime.engine.codex.verify import verify_rollout

        return verify_rollout

    def required_flags(self, old_argv: Sequence[str]) -> tuple[str, ...]:
        return ()

    def _activate(self, want: Any, old_argv: Sequence[str]) -> Any:
        sw = self.config.switch
        return judge(self.door, self.home, want.session_id, self._options(old_argv),
                     self.config.workdir, want.previous_identity,
                     sw.activation_stable_seconds, sw.activation_timeout_seconds)

    def _ready_old(self, old_id: str, old_argv: Sequence[str]) -> Any:
        sw = self.config.switch
        return judge(self.door, self.home, old_id, self._options(old_argv),
                     self.config.workdir, "", sw.activation_stable_seconds,
                     sw.activation_timeout_seconds)

    def _watch(self, want: Any, after: str, judged: dict[str, Any], identity: str,
               old_argv: Sequence[str]) -> None:
        """For ``healthcheck_seconds`` the activated codex stays, holding the new lock;
        when it does not, the old thread is resumed (``post_activation_failure``)."""
        sw = self.config.switch
        seen = judge(self.door, self.home, want.session_id, self._options(old_argv),
                     self.config.workdir, "", 0.0, sw.activation_timeout_seconds,
                     window=sw.healthcheck_seconds)
        evidence = {"outcome": "held" if seen.ok else "failed", "reason": seen.reason}
        try:
            now = self.door.identity()
        except IdentityConflictError:
            now = after  # the pane is dead (remain-on-exit): nothing else runs there
        if seen.ok or now != after:
            if now != after:  # a third party's respawn: recorded, never undone
                evidence = {"outcome": "replaced", "identity": now,
                            "reason": f"{self.door.name} runs {now} now, not {after}"}
            try:
                self.note("watch_ended", evidence, facts={"watch_ended_at": now_iso()})
            except ThreadlineError:  # superseded (a rollback was requested): its record
                self.store.event(self.id, "watch_ended", **evidence)
            return
        with self.store.lock():
            if self.store.active() is not None:
                self.store.event(self.id, "watch_ended", **evidence, unanswered="superseded")
                return
            self.move(State.ROLLBACK_SCHEDULED, "post_activation_failure", evidence,
                      facts={"post_activation_failure": seen.reason,
                             "post_activation_failure_at": now_iso()})
        self._resume_old(identity, old_argv, seen.reason)


class CodexRollback(CodexJob, Rollback):
    """The rollback job of a Codex TUI: CAS also on the thread the pane writes (the new one);
    the old thread resumed with the old process's own options and judged like a switch."""

    def _check_running(self, identity: str) -> None:
        pid = self.door.process_pid(identity)
        threads = ident.codex_writer_locks(self.home, pid) if pid else ()
        new_id = self.op.fact("new_session_id")
        if threads != (new_id,):
            raise Abort("session_conflict", f"{self.door.name} process {pid} writes "
                        f"{list(threads)!r}, not the activated thread {new_id!r}")

    def _ready(self, old_id: str, current: str, old_argv: Sequence[str]) -> Any:
        sw = self.config.switch
        return judge(self.door, self.home, old_id, self._options(old_argv),
                     self.config.workdir, current, sw.activation_stable_seconds,
                     sw.activation_timeout_seconds)
