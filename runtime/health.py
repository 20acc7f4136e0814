"""The health check after a switch (SPEC §4.4): what "activated" means.

Within ``healthcheck_seconds`` the new process is alive and stays alive; its argv holds the
new session id and every channel flag the old process had; its cwd is the workdir; the screen
shows no "No conversation found"; each expected channel server runs below it. Every finding is
evidence for the timeline.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runtime import identity as ident
from runtime.doors.base import Door
from runtime.errors import IdentityConflictError

NOT_FOUND = "No conversation found"
# Claude Code shows this on every start with --dangerously-load-development-channels; the
# preselected choice accepts. The old process had the flag, so the user already chose it.
DEV_WARNING = "I am using this for local development"
DEV_FLAG = "--dangerously-load-development-channels"
POLL = 0.1


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
    """The verdict and its evidence (no conversation text)."""

    ok: bool
    reason: str
    evidence: dict[str, Any] = field(default_factory=dict)


def check(door: Door, want: Expectation) -> HealthReport:
    """Watch the door for ``want.window`` seconds and judge the new process."""
    if door.name == "pointer":
        return _check_pointer(door, want)
    deadline = time.monotonic() + want.window
    first: str | None = None
    accept = any(flag.startswith(DEV_FLAG) for flag in want.channel_flags)
    confirmed, last_press = 0, 0.0
    while True:
        try:
            current = door.identity()
        except IdentityConflictError as exc:
            return HealthReport(False, f"the new process is gone: {exc}", {"identity": None})
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
            return HealthReport(False, f"the new process {pid} died", {"identity": current})
        screen = door.screen()
        if NOT_FOUND in screen:
            return HealthReport(False, f"the screen shows {NOT_FOUND!r}", {"pid": pid})
        now = time.monotonic()
        if accept and DEV_WARNING in screen and now - last_press > 1.0 and door.confirm():
            confirmed, last_press = confirmed + 1, now
        if now >= deadline:
            break
        time.sleep(POLL)
    report = _judge_process(pid, current, want)
    report.evidence["warnings_confirmed"] = confirmed
    if DEV_WARNING in door.screen():
        return HealthReport(False, "claude still waits at the development-channels warning",
                            report.evidence)
    return report


def _judge_process(pid: int, identity: str, want: Expectation) -> HealthReport:
    argv = ident.cmdline(pid) or ()
    flags = ident.channel_flags(argv)
    missing = [f for f in want.channel_flags if f not in flags]
    cwd = ident.cwd(pid)
    servers = _servers_below(pid, want.channel_servers)
    evidence: dict[str, Any] = {
        "identity": identity, "pid": pid, "argv": list(argv), "cwd": cwd,
        "channel_flags": list(flags), "missing_channel_flags": missing,
        "channel_servers": servers,
    }
    problems = []
    if want.session_id not in argv:
        problems.append(f"argv does not hold session {want.session_id!r}")
    if missing:
        problems.append("missing channel flag(s) " + ", ".join(repr(f) for f in missing))
    if want.workdir is not None and not _same_dir(cwd, want.workdir):
        problems.append(f"cwd is {cwd!r}, expected {str(want.workdir)!r}")
    absent = [name for name, pids in servers.items() if not pids]
    if absent:
        problems.append("channel server(s) not running: " + ", ".join(absent))
    problems.extend(_check_environment(pid, want.environment, evidence))
    if problems:
        return HealthReport(False, "; ".join(problems), evidence)
    return HealthReport(True, "healthy", evidence)


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


def _servers_below(pid: int, names: Sequence[str]) -> dict[str, list[int]]:
    if not names:
        return {}
    below = [(p, " ".join(ident.cmdline(p) or ())) for p in ident.descendants(pid)]
    return {name: [p for p, line in below if name in line] for name in names}


def _same_dir(actual: str | None, expected: Path) -> bool:
    if actual is None:
        return False
    try:
        return os.path.realpath(actual) == os.path.realpath(expected)
    except OSError:
        return False
