"""A restart ends ready, or says it did not (issue 10 §4).

Every restart the product makes — ``tl-provision apply --restart-claude``, the systemd door's
``systemctl restart``, the resume of the old session after a failed switch and a rollback —
is judged the same way before anyone calls it done:

- the health check (runtime.health.check): the new process replaced the old one and stays
  alive, the development-channels warning is answered where the door can press Enter (tmux),
  the argv holds the session and every channel flag, each expected channel server runs;
- claude's own session record (``<config dir>/sessions/<pid>.json``) names the expected
  session: 2.1.328 first writes a fresh id and switches to the resumed one once it has loaded
  it, so the record is polled (bounded), never read once. It writes no record at all while
  the development-channels warning waits for Enter, so a door that cannot see the screen
  still finds a claude stuck there.

``ready`` returns the health report with the record's verdict folded in; ``restart`` switches
the door, judges, and always gives the target back what the switch borrowed (``settle``).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path

from runtime import health
from runtime import identity as ident
from runtime.doors.base import Door

RECORD_GRACE = 5.0  # at least this long for the record after the health window
POLL = 0.1


def session_record_problem(config_dir: Path, pid: int, session_id: str,
                           timeout: float = RECORD_GRACE) -> tuple[str | None, str | None]:
    """(problem or None, the session the record names) for claude ``pid``, polled up to
    ``timeout`` seconds until the record names ``session_id``."""
    deadline = time.monotonic() + timeout
    named: str | None = None
    while True:
        record = ident.claude_session_record(config_dir, pid)
        named = str(record["sessionId"]) if record and record.get("sessionId") else None
        if named == session_id:
            return None, named
        if time.monotonic() >= deadline:
            break
        time.sleep(POLL)
    where = config_dir / "sessions" / f"{pid}.json"
    if named is None:
        return f"claude pid {pid} wrote no session record {str(where)!r}", None
    return f"claude pid {pid}'s session record names {named!r}, not {session_id!r}", named


def missing_transcript(project_dir: Path | None, session_id: str) -> str | None:
    """Why ``claude --resume session_id`` cannot work, before anything is stopped: claude
    writes a session's transcript only once something is said, and resuming a session without
    one ends with "No conversation found" after the running claude is gone (measured, 2.1.328)."""
    if project_dir is None:
        return None
    path = project_dir / f"{session_id}.jsonl"
    if path.is_file():
        return None
    return (f"session {session_id} has no transcript {str(path)!r} (claude writes it once "
            f"something is said): a resume would end with {health.NOT_FOUND!r} after claude is "
            f"gone; nothing was restarted — say something to claude first")


def ready(door: Door, want: health.Expectation,
          config_dir: Path | None) -> health.HealthReport:
    """Judge a freshly started claude: the health check, then its own session record."""
    report = health.check(door, want)
    if not report.ok or door.name == "pointer" or config_dir is None:
        return report
    pid = report.evidence.get("pid")
    if not isinstance(pid, int):
        return report
    problem, named = session_record_problem(config_dir, pid, want.session_id,
                                           max(want.window, RECORD_GRACE))
    if problem and named is None and any(f.startswith(health.DEV_FLAG)
                                         for f in want.channel_flags):
        problem += (" (claude writes it only once the development-channels warning is "
                    "answered: it may be waiting there, deaf)")
    evidence = {**report.evidence, "session_record": named}
    if problem:
        return health.HealthReport(False, problem, evidence)
    return health.HealthReport(True, report.reason, evidence)


def restart(door: Door, want: health.Expectation, argv: Sequence[str], workdir: Path,
            config_dir: Path | None) -> health.HealthReport:
    """Switch ``door`` to ``argv`` (resuming ``want.session_id``) and judge the result."""
    try:
        door.switch(want.session_id, argv, workdir)
        return ready(door, want, config_dir)
    finally:
        door.settle()


def run_restart(args: argparse.Namespace) -> int:
    """``tl-rebuild restart``: restart claude on ``args.session`` and wait until it is ready."""
    from runtime.config import config_path_from, load_config
    from runtime.doors.base import open_door
    from runtime.errors import DoorError
    from runtime.job import carried_environment, environment_digests, with_environment

    config = load_config(config_path_from(args.config))
    unresumable = missing_transcript(config.project_dir, args.session)
    if unresumable:
        raise DoorError(unresumable)
    door = open_door(config)
    previous = door.identity()
    pid = door.process_pid(previous)
    sw = config.switch
    old_argv = (ident.cmdline(pid) or ()) if pid else ()
    flags = tuple(dict.fromkeys([*ident.channel_flags(old_argv),
                                 *ident.channel_flags(sw.channel_flags)]))
    if door.name == "systemd" and not door.screen() and any(
            f.startswith(health.DEV_FLAG) for f in flags):
        raise DoorError(
            f"claude in unit {sw.systemd.unit!r} starts with {health.DEV_FLAG} and would wait "
            f"at its warning after a restart: the systemd door has no terminal to answer it "
            f"(run claude in tmux inside the unit and set switch.tmux.target; HANDOFF §7)")
    carry: dict[str, str] = {}
    if sw.environment and door.name != "pointer":
        found = carried_environment(sw.environment, pid)
        if found is None:
            raise DoorError(f"cannot read the environment of claude pid {pid} to carry "
                            f"{', '.join(sw.environment)}; run as the claude user or root")
        carry = found
    want = health.Expectation(
        session_id=args.session, previous_identity=previous, channel_flags=flags,
        workdir=config.workdir, channel_servers=sw.expected_channel_servers,
        project_dir=config.project_dir, window=sw.healthcheck_seconds,
        environment=tuple(sorted(environment_digests(carry).items())))
    argv = with_environment(door.name, carry, ident.format_argv(sw.resume_argv, args.session))
    project = config.project_dir
    report = restart(door, want, argv, config.workdir or Path("/"),
                     project.parent.parent if project is not None else None)
    if not report.ok:
        raise DoorError(f"claude restarted through the {door.name} door is not ready: "
                        f"{report.reason}")
    servers = ", ".join(sorted(report.evidence.get("channel_servers") or {})) or "none expected"
    print(f"ready: session {args.session} (pid {report.evidence.get('pid')}), development-"
          f"channels warnings answered: {report.evidence.get('warnings_confirmed', 0)}, "
          f"channel servers up: {servers}")
    return 0
