"""A restart ends ready, or says it did not (issue 10 §4).

Every restart the product makes — ``tl-provision apply --restart-claude``, the systemd door's
``systemctl restart``, the resume of the old session after a failed switch and a rollback —
is judged the same way before anyone calls it done, on evidence rather than after a fixed
wait (a slow machine that takes 8 s to start claude is not a failed restart):

- ``runtime.switch.activation.activate``: the new process replaced the old one and stays the same,
  the development-channels warning is answered where the door can press Enter (tmux), the
  argv holds the session and every channel flag, its cwd and environment are right, each
  expected channel server runs below it, and claude's own session record
  (``<config dir>/sessions/<pid>.json``) names the session — 2.1.328 first writes a fresh id
  and switches to the resumed one once it has loaded it, and writes no record at all while
  the warning waits for Enter, so a door that cannot see the screen still finds a claude
  stuck there. All of it held unchanged ``stable`` seconds, within ``timeout``;
- then ``activation.watch`` for the health window: still alive, every server still there.

``ready`` returns that verdict; ``restart`` switches the door, judges, and always gives the
target back what the switch borrowed (``settle``).
"""

from __future__ import annotations

import argparse
import os
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from runtime import procfs as ident
from runtime.agents import claude
from runtime.agents.kind import AgentKind
from runtime.config import Config
from runtime.doors.base import Door
from runtime.doors.kind import DoorKind
from runtime.doors.tmux import DeadPane, TmuxDoor
from runtime.errors import DoorError
from runtime.switch import activation, health

STABLE = 0.5  # the defaults of switch.activation_stable_seconds / activation_timeout_seconds
TIMEOUT = 20.0


def missing_transcript(project_dir: Path | None, session_id: str) -> str | None:
    """Why ``claude --resume session_id`` cannot work, before anything is stopped: claude
    writes a session's transcript only once something is said, and resuming a session without
    one ends with "No conversation found" after the running claude is gone (measured, 2.1.328)."""
    from runtime.agents.claude import SESSION_ID

    if not SESSION_ID.fullmatch(session_id):
        return (f"{session_id!r} is not a session id (letters, digits, '-' and '_'); "
                "nothing was restarted")
    if project_dir is None:
        return None
    path = project_dir / f"{session_id}.jsonl"
    if path.is_file():
        return None
    return (f"session {session_id} has no transcript {str(path)!r} (claude writes it once "
            f"something is said): a resume would end with {health.NOT_FOUND!r} after claude is "
            f"gone; nothing was restarted — say something to claude first")


def not_a_claude(pid: int, resume_argv: Sequence[str], config_dir: Path | None) -> str | None:
    """Why the process behind a tmux door is no claude (None when it, or a process below it —
    a wrapper script's child — is one): a claude program by name (``claude``, ``cli.js`` run
    by node), a process launched like the configured resume argv, or one with a session record
    in ``config_dir``. With ``renumber-windows`` an index target drifts onto another window
    when one before it closes; a respawn there would kill what runs in it (a user's shell)."""
    for candidate in (pid, *ident.descendants(pid)):
        if claude_argv(ident.cmdline(candidate) or (), resume_argv):
            return None
        if config_dir is not None and ident.claude_session_record(config_dir, candidate):
            return None
    shown = " ".join(ident.cmdline(pid) or ("?",))
    return f"pid {pid} runs {shown[:120]!r} and no claude runs below it"


def claude_argv(argv: Sequence[str], resume_argv: Sequence[str]) -> bool:
    """Whether ``argv`` starts a claude: the program by name (``claude``, ``cli.js`` run by
    node) or launched like the configured resume argv."""
    if any(os.path.basename(arg) in claude.PROGRAMS for arg in argv[:2]):
        return True
    return bool(argv) and claude.same_launch(argv, resume_argv)


def dead_not_a_claude(dead: DeadPane, resume_argv: Sequence[str],
                      project_dir: Path | None = None) -> str | None:
    """Why a dead pane is not one to revive (None when its start command started claude: a
    claude that crashed under ``remain-on-exit``, or a switch's respawn whose old session did
    not come back). A dead shell or wrapper script is left to the user: what it would start
    again is not known. A claude that resumed a session with no transcript in ``project_dir``
    is another companion's (an index target that drifted onto its window)."""
    shown = shlex.join(dead.argv) if dead.argv else dead.command
    if not claude_argv(dead.argv, resume_argv):
        return f"pid {dead.pid} exited; the pane was started as {shown[:120]!r}"
    session = claude.resumed_session(dead.argv)
    if (session and project_dir is not None and claude.SESSION_ID.fullmatch(session)
            and not (project_dir / f"{session}.jsonl").is_file()):
        return (f"pid {dead.pid} exited; it resumed session {session}, which has no transcript "
                f"in {str(project_dir)!r} — another companion's claude?")
    return None


def dead_environment(door: TmuxDoor, dead: DeadPane, names: Sequence[str],
                     target: str) -> dict[str, str]:
    """The launch variables ``names`` for the claude started again in a dead pane: the dead
    claude's own assignments (a switch's ``env NAME=VALUE … claude``, a user's ``NAME=VALUE
    claude``); a name tmux itself gives every process of the pane (the session's or global
    environment) needs none. A name neither has cannot be carried — its value died with the
    process — and the restart is refused naming it (a resume without ``CLAUDE_CONFIG_DIR``
    finds no conversation)."""
    carry = {name: value for name, value in dead.env if name in names}
    inherited = door.inherited_names()
    missing = [name for name in names if name not in carry and
               (inherited is None or name not in inherited)]
    if missing:
        shown = ", ".join(missing)
        raise DoorError(
            f"cannot carry {shown} to claude in the dead tmux pane {target!r}: the pane's start "
            f"command does not set it and tmux's environment does not have it; nothing was "
            f"restarted — set it for the pane's session (tmux set-environment -t SESSION NAME "
            f"VALUE) and run restart again")
    return carry


def ready(door: Door, want: health.Expectation, config_dir: Path | None,
          stable: float = STABLE, timeout: float = TIMEOUT) -> health.HealthReport:
    """Judge a freshly started claude: ready on positive evidence held ``stable`` seconds
    (``runtime.switch.activation.activate``, at most ``timeout``), then alive with every channel
    server for the health window ``want.window`` (``activation.watch``): a server that starts
    and then exits, or a claude that dies soon after, is still caught. The report's evidence
    holds ``gone`` when the new process died or said "No conversation found"."""
    report = activation.activate(door, want, config_dir, stable, timeout)
    if not report.ok or not door.name.runs_process:
        return report
    pid, identity = report.evidence.get("pid"), report.evidence.get("identity")
    if not isinstance(pid, int) or not isinstance(identity, str):
        return report
    seen = activation.watch(door, identity, pid, want, want.window, stable, lambda: True,
                            report.evidence.get("channel_servers"))
    evidence = {**report.evidence, "watch": {"outcome": seen.outcome, "reason": seen.reason,
                                             "seconds": want.window}}
    if seen.outcome == activation.HELD:
        return health.HealthReport(True, report.reason, evidence)
    if seen.evidence.get("gone"):
        evidence["gone"] = True
    if seen.outcome == activation.REPLACED:
        evidence["identity"] = seen.evidence.get("identity")
    return health.HealthReport(
        False, f"{seen.reason} (within {want.window:g}s of being ready)", evidence)


def restart(door: Door, want: health.Expectation, argv: Sequence[str], workdir: Path,
            config_dir: Path | None, stable: float = STABLE,
            timeout: float = TIMEOUT) -> health.HealthReport:
    """Switch ``door`` to ``argv`` (resuming ``want.session_id``) and judge the result."""
    try:
        door.switch(want.session_id, argv, workdir)
        return ready(door, want, config_dir, stable, timeout)
    finally:
        door.settle()


@dataclass(frozen=True)
class Found:
    """What runs behind the door before a restart: its identity, its process (None for a dead
    pane) and that process's argv — or the dead pane tmux kept."""

    previous: str
    pid: int | None
    argv: tuple[str, ...]
    dead: DeadPane | None


def what_runs(door: Door, config: Config, config_dir: Path | None) -> Found:
    """The claude behind ``door``; DoorError when its tmux pane runs no claude, alive or dead."""
    sw = config.switch
    fix = "check switch.tmux.target (tmux list-panes -a shows where claude runs)"
    dead = door.dead() if isinstance(door, TmuxDoor) else None
    if dead is not None:  # claude exited and tmux kept the pane: start it there again
        stranger = dead_not_a_claude(dead, sw.resume_argv, config.project_dir)
        if stranger:
            raise DoorError(f"tmux pane {sw.tmux.target!r} is dead and was not this "
                            f"companion's claude ({stranger}); nothing was restarted — {fix}")
        return Found(dead.pid, None, dead.argv, dead)
    previous = door.identity()
    pid = door.process_pid(previous)
    if door.name is DoorKind.TMUX and pid is not None:
        stranger = not_a_claude(pid, sw.resume_argv, config_dir)
        if stranger:
            raise DoorError(f"tmux pane {sw.tmux.target!r} does not run claude ({stranger}); "
                            f"nothing was restarted — {fix}")
    return Found(previous, pid, tuple(ident.cmdline(pid) or ()) if pid else (), None)


def session_to_resume(found: Found, config_dir: Path | None) -> str:
    """The session a restart without ``--session`` resumes: the one the live claude's session
    record names, or the one a dead pane's claude was started to resume (``--resume ID``).
    DoorError when neither says (a dead ``--continue`` launch: its record died with it)."""
    if found.pid is not None and config_dir is not None:
        for candidate in (found.pid, *ident.descendants(found.pid)):
            record = ident.claude_session_record(config_dir, candidate) or {}
            if isinstance(record.get("sessionId"), str) and record["sessionId"]:
                return str(record["sessionId"])
    session = claude.resumed_session(found.argv) if found.dead is not None else None
    if session:
        return session
    what = ("the dead claude's start command names no session (--continue)"
            if found.dead is not None else "the running claude has no session record")
    raise DoorError(f"name the session to resume: --session ID ({what}; the newest "
                    f"transcript of the project folder is usually it); nothing was restarted")


def carried(door: Door, config: Config, found: Found) -> dict[str, str]:
    """``switch.environment`` for the restarted claude: from the live process, or for a dead
    pane from its start command and tmux (``dead_environment``)."""
    sw = config.switch
    if not sw.environment:
        return {}
    if found.dead is not None and isinstance(door, TmuxDoor):
        return dead_environment(door, found.dead, sw.environment, sw.tmux.target)
    if not door.name.carries_environment:
        return {}
    from runtime.switch.job import carried_environment

    values = carried_environment(sw.environment, found.pid)
    if values is None:
        raise DoorError(f"cannot read the environment of claude pid {found.pid} to carry "
                        f"{', '.join(sw.environment)}; run as the claude user or root")
    return values


def run_restart(args: argparse.Namespace) -> int:
    """``tl-rebuild restart``: restart claude on ``args.session`` (default: the session it
    runs, or a dead pane's claude was resuming) and wait until it is ready."""
    from runtime.config import config_path_from, load_config
    from runtime.doors.base import open_door
    from runtime.switch.job import environment_digests, with_environment

    config = load_config(config_path_from(args.config))
    if config.agent is not AgentKind.CLAUDE:
        raise DoorError(f"tl-rebuild restart starts claude; config {str(config.source)!r} is "
                        f"for {config.agent.value} (agent = {config.agent.value!r}): resume the "
                        f"thread in its pane with `codex resume {args.session or 'ID'}`; "
                        f"nothing was restarted")
    if args.session:  # refused before the door is even asked
        unresumable = missing_transcript(config.project_dir, args.session)
        if unresumable:
            raise DoorError(unresumable)
    door = open_door(config)
    sw = config.switch
    project = config.project_dir
    config_dir = project.parent.parent if project is not None else None
    found = what_runs(door, config, config_dir)
    session = args.session or session_to_resume(found, config_dir)
    unresumable = missing_transcript(config.project_dir, session)
    if unresumable:
        raise DoorError(unresumable)
    flags = tuple(dict.fromkeys([*claude.channel_flags(found.argv),
                                 *claude.channel_flags(sw.channel_flags)]))
    if door.name is DoorKind.SYSTEMD and not door.screen() and claude.asks_dev_warning(flags):
        raise DoorError(
            f"claude in unit {sw.systemd.unit!r} starts with {claude.DEV_CHANNELS_FLAG} and "
            f"would wait at its warning after a restart: the systemd door has no terminal to "
            f"answer it (run claude in tmux inside the unit and set switch.tmux.target; "
            f"HANDOFF §7)")
    carry = carried(door, config, found)
    want = health.Expectation(
        session_id=session, previous_identity=found.previous, channel_flags=flags,
        workdir=config.workdir, channel_servers=sw.expected_channel_servers,
        project_dir=config.project_dir, window=sw.healthcheck_seconds,
        environment=tuple(sorted(environment_digests(carry).items())))
    argv = with_environment(door.name, carry, claude.format_argv(sw.resume_argv, session))
    report = restart(door, want, argv, config.workdir or Path("/"), config_dir,
                     sw.activation_stable_seconds, sw.activation_timeout_seconds)
    if not report.ok:
        raise DoorError(f"claude restarted through the {door.name} door is not ready: "
                        f"{report.reason}")
    servers = ", ".join(sorted(report.evidence.get("channel_servers") or {})) or "none expected"
    revived = (f"; claude pid {found.dead.pid} had exited, its dead pane was respawned"
               if found.dead is not None else "")
    print(f"ready: session {session} (pid {report.evidence.get('pid')}{revived}), development-"
          f"channels warnings answered: {report.evidence.get('warnings_confirmed', 0)}, "
          f"channel servers up: {servers}")
    return 0
