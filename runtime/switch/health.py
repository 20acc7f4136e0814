"""The health check of a restarted claude over a window (SPEC §4.4); the switch itself is
judged on evidence by runtime/switch/activation.py, which reuses ``ServerWatch`` and the checks
here.

Within ``healthcheck_seconds`` the new process is alive and stays alive; its argv holds the
new session id and every channel flag the old process had; its cwd is the workdir; the screen
shows no "No conversation found"; each expected channel server runs below it, recognised by
its registration (runtime/channels/running.py), waited for within the window and watched until its
end
(a server that starts and then dies is caught). Every finding is evidence for the timeline.

``channels_ready`` is the public question "does this claude run every expected channel server
now": the restart paths use it to decide that a restart ended ready.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runtime import procfs as ident
from runtime.agents import claude
from runtime.channels import running as srv
from runtime.doors.base import Door
from runtime.errors import IdentityConflictError

NOT_FOUND = "No conversation found"
# Claude Code shows this on every start with a development channel (claude.asks_dev_warning); the
# preselected choice accepts. The old process had the flag, so the user already chose it.
DEV_WARNING = "I am using this for local development"


def shows_dev_warning(screen: str) -> bool:
    """True when ``screen`` shows claude's development-channels warning. Claude wraps its own
    lines to the pane (measured, 2.1.328: in 40 columns ``I am using this for local`` /
    ``development`` on two lines, indented — not a terminal wrap ``capture-pane -J`` joins),
    so the option is looked for with every run of white space read as one space."""
    return DEV_WARNING in " ".join(screen.split())
POLL = 0.1
SERVER_POLL = 0.5


@dataclass(frozen=True)
class Expectation:
    """What the new process must show."""

    session_id: str
    previous_identity: str
    channel_flags: tuple[str, ...] = ()
    workdir: Path | None = None
    channel_servers: tuple[str, ...] = ()
    project_dir: Path | None = None
    window: float = 5.0
    environment: tuple[tuple[str, str], ...] = ()  # (name, value digest) carried from the launch


@dataclass(frozen=True)
class HealthReport:
    """The verdict and its evidence (no conversation text). ``evidence["gone"]`` is True when
    the process is gone or going (died, or said "No conversation found"): nothing runs."""

    ok: bool
    reason: str
    evidence: dict[str, Any] = field(default_factory=dict)


def check(door: Door, want: Expectation) -> HealthReport:
    """Watch the door for ``want.window`` seconds and judge the new process."""
    if not door.name.runs_process:
        return _check_pointer(door, want)
    deadline = time.monotonic() + want.window
    first: str | None = None
    accept = claude.asks_dev_warning(want.channel_flags)
    confirmed, last_press = 0, 0.0
    watch: ServerWatch | None = None
    while True:
        try:
            current = door.identity()
        except IdentityConflictError as exc:
            return HealthReport(False, f"the new process is gone: {exc}",
                                {"identity": None, "gone": True})
        if first is None:
            first = current
            if current == want.previous_identity:
                return HealthReport(False, f"the process was not replaced (identity {current})",
                                    {"identity": current})
        elif current != first:
            return HealthReport(False, f"the new process was replaced ({first} → {current})",
                                {"identity": current})
        pid = door.process_pid(current)
        if pid is None or not ident.alive(pid):
            return HealthReport(False, f"the new process {pid} died",
                                {"identity": current, "gone": True})
        screen = door.screen()
        if NOT_FOUND in screen:
            # claude exits right after saying it: gone, even if the pid still runs a moment
            return HealthReport(False, f"the screen shows {NOT_FOUND!r}",
                                {"pid": pid, "gone": True})
        now = time.monotonic()
        if accept and shows_dev_warning(screen) and now - last_press > 1.0 and door.confirm():
            confirmed, last_press = confirmed + 1, now
        if watch is None or watch.pid != pid:
            watch = ServerWatch(pid, want.channel_servers, want.session_id)
        watch.poll()
        if now >= deadline:
            break
        time.sleep(POLL)
    report = _judge_process(pid, current, want, watch)
    report.evidence["warnings_confirmed"] = confirmed
    if shows_dev_warning(door.screen()):
        return HealthReport(False, "claude still waits at the development-channels warning",
                            report.evidence)
    return report


def _judge_process(pid: int, identity: str, want: Expectation,
                   watch: ServerWatch | None = None) -> HealthReport:
    argv = ident.cmdline(pid) or ()
    flags = claude.channel_flags(argv)
    missing = [f for f in want.channel_flags if f not in flags]
    cwd = ident.cwd(pid)
    if watch is None:
        watch = ServerWatch(pid, want.channel_servers, want.session_id)
    watch.poll(force=True)
    servers = watch.evidence()
    evidence: dict[str, Any] = {
        "identity": identity, "pid": pid, "argv": list(argv), "cwd": cwd,
        "channel_flags": list(flags), "missing_channel_flags": missing,
        "channel_servers": servers, "channel_config": watch.where,
    }
    problems = []
    if want.session_id not in argv:
        problems.append(f"argv does not hold session {want.session_id!r}")
    if missing:
        problems.append("missing channel flag(s) " + ", ".join(repr(f) for f in missing))
    if want.workdir is not None and not _same_dir(cwd, want.workdir):
        problems.append(f"cwd is {cwd!r}, expected {str(want.workdir)!r}")
    problems.extend(watch.problems())
    notes = watch.unverifiable()
    problems.extend(_check_environment(pid, want.environment, evidence))
    if problems:
        return HealthReport(False, "; ".join(problems + notes), evidence)
    return HealthReport(True, "; ".join(["healthy", *notes]), evidence)


def _check_environment(pid: int, wanted: Sequence[tuple[str, str]],
                       evidence: dict[str, Any]) -> list[str]:
    """The new process carries the launch environment: each variable with the same value
    (compared and reported as digests; values are never printed)."""
    if not wanted:
        return []
    env = ident.environ(pid)
    if env is None:
        evidence["environment"] = None
        return [f"cannot read the environment of process {pid}"]
    seen = {name: ident.value_digest(env[name]) if name in env else "unset"
            for name, _ in wanted}
    evidence["environment"] = seen
    wrong = [name for name, digest in wanted if seen[name] != digest]
    if wrong:
        return ["launch environment not carried: " + ", ".join(
            f"{name} ({seen[name]}, expected {digest})" for name, digest in wanted
            if name in wrong)]
    return []


def _check_pointer(door: Door, want: Expectation) -> HealthReport:
    try:
        current = door.identity()
    except IdentityConflictError as exc:
        return HealthReport(False, str(exc), {"identity": None})
    evidence: dict[str, Any] = {"identity": current}
    if current != want.session_id:
        return HealthReport(False, f"pointer holds {current!r}, not {want.session_id!r}",
                            evidence)
    if want.project_dir is not None:
        session_file = want.project_dir / f"{want.session_id}.jsonl"
        evidence["session_file"] = str(session_file)
        if not session_file.is_file():
            return HealthReport(False, f"session file {str(session_file)!r} is missing",
                                evidence)
    return HealthReport(True, "healthy", evidence)


class ServerWatch:
    """The expected channel servers of one claude pid, looked at through the health window."""

    def __init__(self, pid: int, channels: Sequence[str], session_id: str | None) -> None:
        self.pid, self.session_id = pid, session_id
        self.channels = tuple(channels)
        self.expected: list[srv.Expected] | None = None
        self.where: dict[str, str] = {}
        self.last: dict[str, dict[str, Any]] = {}
        self.seen: dict[str, list[int]] = {c: [] for c in self.channels}
        self.looked_at = 0.0

    def poll(self, force: bool = False) -> None:
        """Look again (at most every SERVER_POLL seconds unless ``force``)."""
        if not self.channels:
            return
        now = time.monotonic()
        if not force and now - self.looked_at < SERVER_POLL:
            return
        self.looked_at = now
        if self.expected is None:
            self.expected, self.where = srv.resolve(self.pid, self.channels)
        self.last = srv.look(self.pid, self.expected, self.session_id)
        for channel, found in self.last.items():
            for p in found["pids"]:
                if p not in self.seen[channel]:
                    self.seen[channel].append(p)

    def running(self) -> bool:
        """Every checkable expected channel server runs (unverifiable ones cannot be waited for)."""
        return all(f["status"] != srv.ABSENT for f in self.last.values()) and bool(
            self.last or not self.channels)

    def evidence(self) -> dict[str, Any]:
        return {c: {**f, "seen_pids": self.seen.get(c, [])} for c, f in self.last.items()}

    def problems(self) -> list[str]:
        """Each expected channel server that does not run (with why): these fail the check."""
        absent = []
        for channel, found in self.last.items():
            if found["status"] == srv.ABSENT:
                gone = self.seen.get(channel)
                why = found.get("reason") or (
                    f"started as pid {', '.join(map(str, gone))}, then exited" if gone
                    else "no process of its registration below the new claude")
                absent.append(f"{channel} ({why})")
        return ["channel server(s) not running: " + "; ".join(absent)] if absent else []

    def unverifiable(self) -> list[str]:
        """Channels that cannot be checked here: named in the verdict, never a silent pass
        and never a false "not running"."""
        return [f"{channel} not verifiable: {found['reason']}"
                for channel, found in self.last.items()
                if found["status"] == srv.NOT_VERIFIABLE]


def channels_ready(pid: int, channels: Sequence[str], session_id: str | None = None,
                   window: float = 5.0) -> HealthReport:
    """Wait up to ``window`` seconds until claude ``pid`` runs every expected channel server.

    ``ok`` as soon as each one is recognised below ``pid``; otherwise the reason names each
    missing channel (and "not verifiable: …" where it cannot be told). Evidence per channel.
    """
    watch = ServerWatch(pid, channels, session_id)
    deadline = time.monotonic() + window
    while True:
        watch.poll(force=True)
        if watch.running() or time.monotonic() >= deadline or not ident.alive(pid):
            break
        time.sleep(SERVER_POLL)
    problems = watch.problems() if watch.channels else []
    if not ident.alive(pid):
        problems.insert(0, f"claude {pid} is gone")
    evidence = {"pid": pid, "channel_servers": watch.evidence(), "config": watch.where}
    notes = watch.unverifiable()
    if problems:
        return HealthReport(False, "; ".join(problems + notes), evidence)
    return HealthReport(True, "; ".join(["ready", *notes]), evidence)


def _same_dir(actual: str | None, expected: Path) -> bool:
    if actual is None:
        return False
    try:
        return os.path.realpath(actual) == os.path.realpath(expected)
    except OSError:
        return False
