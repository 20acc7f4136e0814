"""Activation after a switch (SPEC §4.4, issue 13 §2): positive evidence, then a watch.

``activate`` calls the new claude activated as soon as the evidence exists, not after a fixed
window: the door shows a new process that stays the same; its argv holds the new session id
and every channel flag; its cwd is the workdir; the carried environment is in its environ;
claude's own record (``<config dir>/sessions/<pid>.json``) names the new session; every
expected channel server is recognised below it (runtime/channels/running.py, through
``health.ServerWatch``). All of it must then hold unchanged — same pid, same server pids —
for ``stable`` seconds. A problem that holds as long (a missing flag, a wrong cwd, a server
that is not registered or started and then exited) is the verdict at once; evidence still
missing after ``timeout`` seconds fails with what is missing.

``watch`` looks at the activated process for ``healthcheck_seconds`` more. It ends ``held``;
``failed`` when the process dies or a channel server stays absent for ``stable`` seconds (the
rebuild job then resumes the old session); ``replaced`` when another process runs in the
target (a third party's respawn: recorded, never undone); ``superseded`` when the operation
left ``activated`` (a rollback was requested).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runtime import procfs as ident
from runtime.agents import claude
from runtime.doors.base import Door
from runtime.errors import IdentityConflictError
from runtime.switch import health

POLL = 0.1
HELD, FAILED, REPLACED, SUPERSEDED = "held", "failed", "replaced", "superseded"


@dataclass
class Look:
    """One look at the new process: what is still missing, what is wrong, and the evidence.

    ``key`` is what must stay unchanged through the stability window (pid, argv, the pids of
    each channel server, the session the record names).
    """

    pending: list[str] = field(default_factory=list)
    wrong: list[str] = field(default_factory=list)
    evidence: dict[str, Any] = field(default_factory=dict)
    key: tuple[Any, ...] = ()


def activate(door: Door, want: health.Expectation, config_dir: Path | None, stable: float,
             timeout: float) -> health.HealthReport:
    """Judge the freshly switched claude on positive evidence held ``stable`` seconds."""
    if not door.name.runs_process:
        return health.check(door, want)  # a file and a pointer: nothing to wait for
    started = time.monotonic()
    first: str | None = None
    accept = claude.asks_dev_warning(want.channel_flags)
    confirmed, last_press = 0, 0.0
    watch: health.ServerWatch | None = None
    watched: tuple[str, ...] = ()
    key: tuple[Any, ...] | None = None
    since = started
    marks: dict[str, float] = {}
    while True:
        now = time.monotonic()
        try:
            current = door.identity()
        except IdentityConflictError as exc:
            return _verdict(False, f"the new process is gone: {exc}",
                            {"identity": None, "gone": True}, started, confirmed)
        if first is None:
            first = current
            if current == want.previous_identity:
                return _verdict(False, f"the process was not replaced (identity {current})",
                                {"identity": current}, started, confirmed)
        elif current != first:
            return _verdict(False, f"the new process was replaced ({first} → {current})",
                            {"identity": current}, started, confirmed)
        pid = door.process_pid(current)
        if pid is None or not ident.alive(pid):
            return _verdict(False, f"the new process {pid} died",
                            {"identity": current, "gone": True}, started, confirmed)
        # claude names the session in its record only once it has loaded it and the warning
        # is answered: from then on the screen has nothing to say (one tmux call less a look)
        screen = "" if "session_record" in marks else door.screen()
        if f"{health.NOT_FOUND} with session ID: {want.session_id}" in screen:
            # claude exits right after saying it: gone, even if the pid still runs a moment
            return _verdict(False, f"the screen shows {health.NOT_FOUND!r}",
                            {"pid": pid, "gone": True}, started, confirmed)
        if (accept and health.shows_dev_warning(screen) and now - last_press > 1.0
                and door.confirm()):
            confirmed, last_press = confirmed + 1, now
        argv = ident.cmdline(pid) or ()
        if want.session_id in argv and (watch is None or (watch.pid, watched) != (pid, argv)):
            # exec'd (again: ``env NAME=VALUE claude …`` execs claude in the same pid): the
            # environ and cwd now name the registrations this claude reads
            watch, watched = health.ServerWatch(pid, want.channel_servers, want.session_id), argv
        look = look_at(pid, current, argv, want, watch, config_dir)
        if health.shows_dev_warning(screen):
            look.pending.append("claude waits at the development-channels warning")
        _mark(marks, now - started, look, want.session_id, argv, screen)
        look.evidence["seen_after_s"] = marks
        if look.key != key:
            key, since = look.key, now
        held = now - since >= stable
        if held and not look.wrong and not look.pending:
            return _verdict(True, "; ".join(["healthy", *_unverifiable(watch)]), look.evidence,
                            started, confirmed)
        if held and look.wrong:
            return _verdict(False, "; ".join(look.wrong), look.evidence, started, confirmed)
        if now - started >= timeout:
            missing = look.wrong + look.pending
            return _verdict(False, "; ".join(missing) + f" (after {timeout:g}s)", look.evidence,
                            started, confirmed)
        time.sleep(POLL)


def look_at(pid: int, identity: str, argv: tuple[str, ...], want: health.Expectation,
            watch: health.ServerWatch | None, config_dir: Path | None) -> Look:
    """One look at claude ``pid``; before it has exec'd claude (argv without the session)
    everything is still missing."""
    evidence: dict[str, Any] = {"identity": identity, "pid": pid, "argv": list(argv)}
    if want.session_id not in argv or watch is None:
        return Look([f"argv does not hold session {want.session_id!r}"], [], evidence,
                    (pid, argv))
    flags = claude.channel_flags(argv)
    missing = [f for f in want.channel_flags if f not in flags]
    cwd = ident.cwd(pid)
    evidence.update({"cwd": cwd, "channel_flags": list(flags), "missing_channel_flags": missing})
    look = Look(evidence=evidence)
    if missing:
        look.wrong.append("missing channel flag(s) " + ", ".join(repr(f) for f in missing))
    if want.workdir is not None and not health._same_dir(cwd, want.workdir):
        look.wrong.append(f"cwd is {cwd!r}, expected {str(want.workdir)!r}")
    look.wrong.extend(health._check_environment(pid, want.environment, evidence))
    watch.poll(force=True)
    evidence.update({"channel_servers": watch.evidence(), "channel_config": watch.where})
    for verdict, text in _server_problems(watch):
        (look.wrong if verdict else look.pending).append(text)
    named = None
    if config_dir is not None:
        record, named = record_problem(config_dir, pid, want.session_id)
        evidence["session_record"] = named
        if record and named is None and claude.asks_dev_warning(want.channel_flags):
            record += (" (claude writes it only once the development-channels warning is "
                       "answered: it may be waiting there, deaf)")
        if record:
            look.pending.append(record)
    servers = tuple(sorted((c, tuple(f["pids"])) for c, f in watch.last.items()))
    look.key = (pid, argv, servers, named)
    return look


def record_problem(config_dir: Path, pid: int,
                   session_id: str) -> tuple[str | None, str | None]:
    """(problem or None, the session it names) of claude ``pid``'s own session record.

    2.1.328 first writes a fresh id and switches to the resumed one once it has loaded it, and
    writes no record at all while the development-channels warning waits for Enter."""
    record = ident.claude_session_record(config_dir, pid)
    named = str(record["sessionId"]) if record and record.get("sessionId") else None
    if named == session_id:
        return None, named
    where = claude.session_record_path(config_dir, pid)
    if named is None:
        return f"claude pid {pid} wrote no session record {str(where)!r}", None
    return f"claude pid {pid}'s session record names {named!r}, not {session_id!r}", named


def _mark(marks: dict[str, float], at: float, look: Look, session_id: str,
          argv: tuple[str, ...], screen: str) -> None:
    """When each piece of evidence was first seen (seconds after the switch), for the
    timeline: where the time to ``activated`` goes."""
    seen = {"exec": session_id in argv,
            "warning_shown": health.shows_dev_warning(screen),
            "session_record": look.evidence.get("session_record") == session_id,
            "channel_servers": "channel_servers" in look.evidence and not any(
                f["status"] == "absent" for f in look.evidence["channel_servers"].values()),
            "ready": not look.pending and not look.wrong}
    for name, now in seen.items():
        if now and name not in marks:
            marks[name] = round(at, 3)


def _server_problems(watch: health.ServerWatch) -> list[tuple[bool, str]]:
    """(is it a verdict, text) per absent channel server: not registered where claude reads
    or started and then exited is wrong; not started yet is still missing."""
    found = []
    for channel, seen in watch.last.items():
        if seen["status"] != "absent":
            continue
        gone = watch.seen.get(channel)
        if seen.get("reason"):
            found.append((True, f"{channel} ({seen['reason']})"))
        elif gone:
            found.append((True, f"{channel} (started as pid {', '.join(map(str, gone))}, "
                                f"then exited)"))
        else:
            found.append((False, f"{channel} (no process of its registration below the new "
                                 f"claude yet)"))
    return [(verdict, f"channel server(s) not running: {text}") for verdict, text in found]


def _unverifiable(watch: health.ServerWatch | None) -> list[str]:
    return watch.unverifiable() if watch is not None else []


def _verdict(ok: bool, reason: str, evidence: dict[str, Any], started: float,
             confirmed: int) -> health.HealthReport:
    evidence = {**evidence, "warnings_confirmed": confirmed,
                "judged_after_s": round(time.monotonic() - started, 3)}
    return health.HealthReport(ok, reason, evidence)


@dataclass(frozen=True)
class Watched:
    """How the watch after activation ended, why, and what it saw."""

    outcome: str
    reason: str
    evidence: dict[str, Any] = field(default_factory=dict)


def watch(door: Door, identity: str, pid: int, want: health.Expectation, seconds: float,
          stable: float, ours: Callable[[], bool],
          seen: dict[str, Any] | None = None) -> Watched:
    """Watch activated claude ``pid`` (door ``identity``) for ``seconds``.

    ``ours()`` says whether the operation is still the activated one this watch answers for;
    ``seen`` is the activation's ``channel_servers`` evidence (the pids it saw run), so a
    server that dies before the watch's first look is named "started as pid N, then exited".
    """
    end = time.monotonic() + seconds
    servers = health.ServerWatch(pid, want.channel_servers, want.session_id)
    for channel, found in (seen or {}).items():
        if channel in servers.seen:
            servers.seen[channel].extend(found.get("seen_pids") or found.get("pids") or [])
    absent_since: float | None = None
    while True:
        if not ours():
            return Watched(SUPERSEDED, "the operation left 'activated'", {"pid": pid})
        moved = _moved(door, identity, pid)
        if moved is not None:
            if not ours():
                return Watched(SUPERSEDED, "the operation left 'activated'", {"pid": pid})
            return moved
        servers.poll()
        lost = servers.problems()
        now = time.monotonic()
        absent_since = (absent_since or now) if lost else None
        evidence = {"pid": pid, "identity": identity, "channel_servers": servers.evidence()}
        if lost and absent_since is not None and now - absent_since >= stable:
            return Watched(FAILED, "; ".join(lost), evidence)
        if now >= end and not lost:
            return Watched(HELD, f"alive with every channel server for {seconds:g}s", evidence)
        time.sleep(POLL)


def _moved(door: Door, identity: str, pid: int) -> Watched | None:
    """None while ``pid`` still runs as ``identity``; else how the target changed."""
    for attempt in (0, 1):  # a respawn between reading the identity and the pid is no death
        try:
            current: str | None = door.identity()
        except IdentityConflictError as exc:
            return Watched(FAILED, f"the activated process {pid} is gone: {exc}",
                           {"pid": pid, "identity": None, "gone": True})
        if current != identity:
            return Watched(REPLACED, f"{door.name} runs {current} now, not the activated "
                                     f"{identity}: left as it is", {"pid": pid,
                                                                     "identity": current})
        if ident.alive(pid):
            return None
        if attempt:
            break
    return Watched(FAILED, f"the activated process {pid} died",
                   {"pid": pid, "identity": identity, "gone": True})
