"""The rebuild job (SPEC §4.1 steps 3–4): scheduled → … → activated | rolled_back | failed.

Phases, each a timeline line: worker_started → stable → frozen → identity → built → verifying →
verified → activating → rechecked → switched → health → activated → watch_ended. Before the
switch any problem fails the operation and removes the unused candidate; after it, an unhealthy
new session makes the job resume the old one, with the old process's own argv (its channel
flags kept; the configured resume argv only when that argv is unknown). ``health`` is the
positive evidence of runtime/switch/activation.py; after ``activated`` the job watches the new
claude
for ``healthcheck_seconds`` and, when it dies or loses a channel server, resumes the old session
(``post_activation_failure`` → ``rolled_back``). The final recheck under the
lock checks the door identity first (``session_conflict``), then the source digest
(``source_changed``), then that no other session became active.
"""

from __future__ import annotations

import os
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from runtime import proc
from runtime import procfs as ident
from runtime.agents import claude
from runtime.agents.kind import AgentKind
from runtime.doors.kind import DoorKind
from runtime.engine.items import sha256_text
from runtime.errors import DoorError, IdentityConflictError, StoreError, ThreadlineError
from runtime.switch import activation, restart
from runtime.switch.job import (
    Abort,
    Job,
    counts_only,
    fault,
    line_count,
    log,
    other_sessions,
    sha256_file,
    worker_info,
)
from runtime.switch.state import TERMINAL, State
from runtime.switch.store import now_iso


class Rebuild(Job):
    """scheduled → … → activated | rolled_back | failed."""

    candidate: Path | None = None
    switched = False

    def run(self) -> None:
        try:
            self._run()
        except Abort as abort:
            self._abandon(abort)
        except Exception as exc:  # noqa: BLE001 - every path must end in a terminal state
            log(traceback.format_exc())
            self._abandon(Abort("worker_error", f"{type(exc).__name__}: {exc}"))

    def _run(self) -> None:
        # The hook may still be recording the spawned pid: check the state, not the revision.
        self.op = self.store.transition(self.id, State.RUNNING, phase="worker_started",
                                        expect_state=State.SCHEDULED, worker=worker_info(),
                                        evidence={"pid": os.getpid()})
        self.store.heartbeat(self.id, "worker_started")
        self._check_escape()
        self._check_config()
        fault("running")
        source = Path(self.op.fact("transcript_path"))
        size, digest, backup, others = self._freeze(source)
        fault("frozen")
        identity, old_argv = self._capture_identity()
        build, new_id = self._build(backup)
        self.move(State.VERIFYING, "verifying")
        self._verify(build)
        fault("verified")
        self.move(State.ACTIVATING, "activating")
        fault("activating")
        with self.store.lock():
            self._recheck(source, digest, identity, others)
            fault("switch")
            self.switch_to(new_id)
            self.switched = True
        self.note("switched", {"session_id": new_id, "argv": list(self.resume_argv(new_id))},
                  facts={"switched_at": now_iso()})
        fault("switched")
        want = self.expectation(new_id, identity, self.required_flags(old_argv))
        report = self._activate(want, old_argv)
        self.note("health", {"ok": report.ok, "reason": report.reason, **report.evidence})
        if not report.ok:
            self._resume_old(identity, old_argv, report.reason)
            return
        after = report.evidence.get("identity") or self.door.identity()
        self.move(State.ACTIVATED, "activated", {"identity": after},
                  facts={"identity_after": after, "activated_at": now_iso(), "backup": str(backup),
                         "source_size": size})
        self._watch(want, after, report.evidence, identity, old_argv)

    def _activate(self, want: Any, old_argv: Sequence[str]) -> Any:
        """The positive evidence that the switched process runs the new session."""
        sw = self.config.switch
        return activation.activate(self.door, want, self._config_dir(),
                                   sw.activation_stable_seconds, sw.activation_timeout_seconds)

    def _ready_old(self, old_id: str, old_argv: Sequence[str]) -> Any:
        """The evidence that the resumed old session runs again."""
        sw = self.config.switch
        return restart.ready(self.door, self.expectation(
            old_id, "", claude.channel_flags(old_argv)), self._config_dir(),
            sw.activation_stable_seconds, sw.activation_timeout_seconds)

    def _watch(self, want: Any, after: str, judged: dict[str, Any], identity: str,
               old_argv: Sequence[str]) -> None:
        """Watch the activated claude for ``healthcheck_seconds``; when it dies or loses a
        channel server, resume the old session (activated → rollback_scheduled → rolled_back)."""
        pid = judged.get("pid")
        if not self.door.name.runs_process or not isinstance(pid, int):
            self.note("watch_ended", {"outcome": "none", "reason": "no process to watch"},
                      facts={"watch_ended_at": now_iso()})
            return
        activated = self.op.revision
        sw = self.config.switch

        def ours() -> bool:
            try:
                return self.store.read(self.id).revision == activated
            except StoreError:
                return False

        seen = activation.watch(self.door, after, pid, want, sw.healthcheck_seconds,
                                sw.activation_stable_seconds, ours,
                                judged.get("channel_servers"))
        evidence = {"outcome": seen.outcome, "reason": seen.reason, **seen.evidence}
        if seen.outcome != activation.FAILED:
            try:
                self.note("watch_ended", evidence, facts={"watch_ended_at": now_iso()})
            except StoreError:  # superseded: the record belongs to whoever changed it
                self.store.event(self.id, "watch_ended", **evidence)
            return
        with self.store.lock():
            other = self.store.active()
            if other is not None or not ours():
                why = f"operation {other.operation_id} is active" if other else "superseded"
                self.store.event(self.id, "watch_ended", **evidence, unanswered=why)
                return
            self.move(State.ROLLBACK_SCHEDULED, "post_activation_failure", evidence,
                      facts={"post_activation_failure": seen.reason,
                             "post_activation_failure_at": now_iso()})
        try:
            now = self.door.identity()
        except IdentityConflictError:
            now = after  # the pane is dead (remain-on-exit) or gone: nothing else runs there
        if now != after:
            self.move(State.ACTIVATED, "watch_ended",
                      {"outcome": activation.REPLACED, "identity": now,
                       "reason": f"{self.door.name} runs {now} now, not the activated {after}: "
                                 f"left as it is"}, facts={"watch_ended_at": now_iso()})
            return
        self._resume_old(identity, old_argv, seen.reason)

    def _check_escape(self) -> None:
        unit = self.config.switch.systemd.unit
        if self.config.switch.door is DoorKind.SYSTEMD and unit:
            from runtime.doors.systemd import parse_proc_cgroup

            inside = parse_proc_cgroup(Path("/proc/self/cgroup").read_text()).service
            if inside == unit or (inside and inside == unit + ".service"):
                raise Abort("cgroup_escape_failed",
                            f"worker runs inside {inside!r} and its restart would kill it")

    def _check_config(self) -> None:
        cfg = self.config
        missing = [k for k, v in (("project_dir", cfg.project_dir), ("workdir", cfg.workdir))
                   if v is None]
        if cfg.switch.door.worker_builds_argv and not any("{session_id}" in t
                                                 for t in cfg.switch.resume_argv):
            missing.append("switch.resume_argv (with {session_id})")
        if missing:
            raise Abort("config", "config lacks " + ", ".join(missing))

    def _freeze(self, source: Path) -> tuple[int, str, Path, dict[str, list[int]]]:
        backup = self.store.artifacts(self.id) / "source.jsonl"
        for _attempt in range(3):
            size, mtime, waited = self._wait_stable(source)
            self.note("stable", {"size": size, "waited_s": round(waited, 3)})
            others = other_sessions(self.config.project_dir, {source.name})  # type: ignore[arg-type]
            copied = proc.copy_file(source, backup, 0o600)
            st = source.stat()
            if (st.st_size, st.st_mtime_ns) != (size, mtime):
                self.note("freeze_retry", {"reason": "source changed during the copy"})
                continue
            on_disk = sha256_file(backup)
            if on_disk != copied:
                raise Abort("freeze_failed", f"backup {str(backup)!r} digest {on_disk} ≠ copied "
                            f"{copied}")
            self.note("frozen", {"backup": str(backup), "sha256": copied, "size": size,
                                 "other_sessions": len(others)},
                      facts={"source_sha256": copied, "source_size": size,
                             "backup": str(backup), "frozen_at": now_iso()})
            return size, copied, backup, others
        raise Abort("transcript_unstable", f"transcript {str(source)!r} kept changing")

    def _wait_stable(self, source: Path) -> tuple[int, int, float]:
        sw = self.config.switch
        start = time.monotonic()
        deadline = start + sw.stable_timeout_seconds
        last, since, beat = None, start, start
        while True:
            try:
                st = source.stat()
            except FileNotFoundError as exc:
                raise Abort("source_missing", f"transcript {str(source)!r} is missing") from exc
            now = time.monotonic()
            sig = (st.st_size, st.st_mtime_ns)
            busy = self._claude_busy()
            if sig != last or busy:
                last, since = sig, now
            elif now - since >= sw.stable_seconds:
                return st.st_size, st.st_mtime_ns, now - start
            if now > deadline:
                why = "claude stayed busy" if busy else "the file kept changing"
                raise Abort("transcript_unstable",
                            f"transcript {str(source)!r} not stable within "
                            f"{sw.stable_timeout_seconds:g}s ({why})")
            if now - beat > 1.0:
                self.store.heartbeat(self.id, "stable_wait")
                beat = now
            time.sleep(min(0.05, max(sw.stable_seconds / 3, 0.005)))

    def _config_dir(self) -> Path | None:
        """``$CLAUDE_CONFIG_DIR`` of the claude whose transcripts live in ``project_dir``."""
        project = self.config.project_dir
        return project.parent.parent if project is not None else None

    def _claude_busy(self) -> bool:
        """True while the claude running the old session says it is busy (a turn runs)."""
        config_dir = self._config_dir()
        old_id = self.op.fact("old_session_id")
        if config_dir is None or not old_id:
            return False
        return ident.claude_session_status(config_dir, str(old_id)) == "busy"

    def _capture_identity(self) -> tuple[str, tuple[str, ...]]:
        try:
            identity = self.door.identity()
        except IdentityConflictError as exc:
            raise Abort("session_conflict", str(exc)) from exc
        old_id = self.op.fact("old_session_id")
        if self.door.name.identity_is_session and identity != old_id:
            raise Abort("session_conflict",
                        f"pointer names session {identity!r}, not the stopping {old_id!r}")
        pid = self.door.process_pid(identity)
        old_argv = (ident.cmdline(pid) or ()) if pid else ()
        config_dir = self._config_dir()
        said = ident.claude_session_record(config_dir, pid) if pid and config_dir else None
        if said is not None and said.get("sessionId") not in (None, old_id):
            raise Abort("session_conflict",
                        f"{self.door.name} process {pid} runs session {said.get('sessionId')!r}, "
                        f"not the stopping {old_id!r}")
        carried = self.capture_environment(pid)
        self.note("identity", {"identity": identity, "pid": pid, "argv": list(old_argv),
                               "channel_flags": list(claude.channel_flags(old_argv)), **carried},
                  facts={"identity_before": identity, "old_argv": list(old_argv)})
        return identity, old_argv

    def _build(self, backup: Path) -> tuple[Any, str]:
        from runtime.engine.candidate import build, write

        result = build(backup, self.config)
        new_id = self._keep_candidate(
            result, lambda: write(result, self.config.project_dir))  # type: ignore[arg-type]
        self._keep_snapshot(result.startup_snapshot)
        return result, new_id

    def _keep_candidate(self, result: Any, write: Callable[[], Any]) -> str:
        """Refuse an empty or blocked build, write the candidate with ``write``, record it
        (``built``) and keep its manifest; the new session id (shared by every agent)."""
        if result.empty_reason:
            raise Abort("nothing_to_carry", f"nothing to carry: {result.empty_reason}")
        if result.blocked_reason:
            raise Abort("blocked", f"rebuild blocked: {result.blocked_reason}")
        try:
            path = write()
        except ThreadlineError as exc:
            raise Abort("write_failed", str(exc)) from exc
        self.candidate = Path(path)
        new_id = str(result.new_session_id)
        self.note("built", {"new_session_id": new_id, "candidate": str(path),
                            "stats": counts_only(result.stats())},
                  facts={"new_session_id": new_id, "candidate_path": str(path),
                         "candidate_sha256": sha256_file(self.candidate),
                         "candidate_lines": line_count(self.candidate),
                         "stats": counts_only(result.stats())})
        self._build_result = result
        self._keep_manifest(result)
        return new_id

    def _keep_manifest(self, result: Any) -> None:
        """Keep the per-item manifest in the artifacts (0600); record its path and digest."""
        from runtime.engine.candidate import write_manifest

        path = self.store.artifacts(self.id) / "manifest.jsonl"
        digest = write_manifest(result, path)
        self.note("manifest_kept", {"path": str(path), "sha256": digest,
                                    "entries": len(result.manifest)},
                  facts={"manifest": str(path), "manifest_sha256": digest})

    def _keep_snapshot(self, snapshot: str | None) -> None:
        """Keep the frozen start-up injection in the artifacts (0600); record only its digest."""
        if snapshot is None:
            return
        path = self.store.artifacts(self.id) / "startup_snapshot.txt"
        proc.atomic_write(path, snapshot.encode("utf-8", "surrogatepass"), 0o600)
        digest = sha256_text(snapshot)
        self.note("snapshot_kept", {"path": str(path), "sha256": digest},
                  facts={"startup_snapshot": str(path), "startup_snapshot_sha256": digest})

    def _verifier(self) -> Callable[[Path, Any], Any]:
        """The agent's proof that a written candidate is the build (claude: the transcript)."""
        from runtime.engine.verify import verify_candidate

        return verify_candidate

    def _verify(self, build: Any) -> None:
        assert self.candidate is not None
        try:
            report = self._verifier()(self.candidate, build)
        except ThreadlineError as exc:
            raise Abort("verification_failed", str(exc)) from exc
        data = report.as_dict() if hasattr(report, "as_dict") else {}
        self.note("verified", {"report": counts_only(dict(data))})

    def _recheck(self, source: Path, digest: str, identity: str,
                 others: dict[str, list[int]]) -> None:
        # Identity first: a claude killed by a third party's respawn appends its exit lines
        # (last-prompt, cost-state) to the source, which must not hide the real cause.
        try:
            current = self.door.identity()
        except IdentityConflictError as exc:
            raise Abort("session_conflict", str(exc)) from exc
        if current != identity:
            raise Abort("session_conflict",
                        f"{self.door.name} identity changed from {identity!r} to {current!r}",
                        {"before": identity, "now": current})
        live = sha256_file(source) if source.exists() else "missing"
        if live != digest:
            raise Abort("source_changed", f"transcript {str(source)!r} changed after the freeze",
                        {"frozen": digest, "live": live})
        assert self.candidate is not None
        written = self.op.fact("candidate_sha256")
        actual = sha256_file(self.candidate) if self.candidate.is_file() else "missing"
        if actual != written:
            raise Abort("candidate_changed",
                        f"candidate {str(self.candidate)!r} changed after verification",
                        {"written": written, "now": actual})
        now = other_sessions(self.config.project_dir,  # type: ignore[arg-type]
                             {source.name, self.candidate.name})
        changed = sorted(n for n, sig in now.items() if others.get(n) != sig)
        if changed:
            raise Abort("session_conflict",
                        "another session became active: " + ", ".join(changed),
                        {"changed": changed})
        self.note("rechecked", {"sha256": live, "identity": current,
                                "candidate_excluded": self.candidate.name,
                                "other_sessions_changed": 0})

    def _resume_old(self, identity: str, old_argv: Sequence[str], why: str) -> None:
        old_id = str(self.op.fact("old_session_id"))
        try:
            argv, argv_source = self.old_resume_argv(old_id, old_argv)
            self.switch_to(old_id, argv)
            self.note("resumed_old", {"session_id": old_id, "argv": list(argv),
                                      "argv_source": argv_source})
            fault("resumed")
            check = self._ready_old(old_id, old_argv)
            self.note("resumed_health", {"ok": check.ok, "reason": check.reason,
                                         **check.evidence})
            if check.evidence.get("gone"):  # however soon it died: a failed resume, no rollback
                raise DoorError(f"the resumed old session is not running: {check.reason}")
            after = check.evidence.get("identity") or self.door.identity()
        except ThreadlineError as exc:
            # under a claude, ``tl-rebuild restart`` starts the old session again, also in a
            # pane tmux kept dead (the switch borrows remain-on-exit)
            source = self.config.source
            again = ("" if self.config.agent is AgentKind.CODEX else
                     f"; start it again: tl-rebuild restart --session {old_id}"
                     + (f" --config {source}" if source is not None else ""))
            self.move(State.FAILED, "failed", {"code": "resume_failed", "message": str(exc)},
                      failure={"code": "resume_failed",
                               "message": f"new session unhealthy ({why}); "
                                          f"resuming the old one failed: {exc}{again}"})
            return
        if not check.ok:
            why += f"; the resumed old session is not healthy either: {check.reason}"
        self.move(State.ROLLED_BACK, "rolled_back", {"code": "unhealthy", "message": why},
                  failure={"code": "unhealthy", "message": why},
                  facts={"identity_after_rollback": after, "resumed_healthy": check.ok,
                         "resumed_argv_source": argv_source})

    def _abandon(self, abort: Abort) -> None:
        log(f"{self.id}: abandoned: {abort.code}: {abort.message}")
        try:
            current = self.store.read(self.id)
        except StoreError:
            return
        if current.state in TERMINAL or current.state == State.ACTIVATED:
            return
        self.op = current
        if self.switched:
            self._resume_old(str(current.fact("identity_before", "")),
                             current.fact("old_argv", []), abort.message)
            return
        if self.candidate is not None and proc.remove(self.candidate):
            self.store.event(self.id, "candidate_removed", path=str(self.candidate))
        try:
            self.move(State.FAILED, "failed", {"code": abort.code, "message": abort.message,
                                               **abort.evidence},
                      failure={"code": abort.code, "message": abort.message})
        except StoreError as exc:
            log(f"{self.id}: could not record the failure: {exc}")


