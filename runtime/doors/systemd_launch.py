"""``tl-launch``: the ExecStart wrapper of the systemd door.

A unit runs ``tl-launch --pointer P -- claude --continue …``. tl-launch reads the session id
in the pointer file, turns the launch argv into the resume argv for it (runtime.agents.claude) and
*execs* it, so the unit's MainPID is claude itself. When the pointer is missing or empty, or
names a session whose file ``<CLAUDE_CONFIG_DIR or ~/.claude>/projects/<encoded cwd>/<id>.jsonl``
does not exist, it starts the launch argv unchanged and says so on stderr (the journal) — a
claude that continues its last session beats a unit that does not start.

Stdlib and runtime.agents.claude/paths/doors.pointer only: it runs on every start of the service.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from runtime.agents.claude import SESSION_ID, ResumeArgvError, resume_argv
from runtime.doors.pointer import pointed_session

PROG = "tl-launch"
USAGE = f"usage: {PROG} --pointer FILE -- CLAUDE_ARGV..."
HELP = f"""{USAGE}

The ExecStart wrapper of Threadline's systemd door: execs CLAUDE_ARGV as the resume argv of the
session named in FILE (claude --resume ID, every other flag kept), or CLAUDE_ARGV unchanged,
with a warning on stderr, when FILE names no existing session.

options:
  --pointer FILE  the pointer file tl-rebuild writes before it restarts the unit
  -h, --help      show this help and exit
  --version       print the program's name and version and exit

example (the drop-in tl-provision writes):
  ExecStart=tl-launch --pointer /var/lib/threadline/pointer -- claude --continue --channels …
"""


def session_file(session_id: str, cwd: str, environ: dict[str, str] | None = None) -> Path:
    """Where Claude Code keeps session ``session_id`` of working directory ``cwd``."""
    from runtime.paths import claude_config_dir, project_dir_for

    return project_dir_for(cwd, claude_config_dir(environ)) / f"{session_id}.jsonl"


def choose_argv(launch: Sequence[str], pointer: str, cwd: str,
                environ: dict[str, str] | None = None) -> tuple[list[str], str]:
    """The argv to exec and the one line to log: the resume argv, or the launch argv (why)."""
    launch = list(launch)
    session_id = pointed_session(pointer)
    if session_id is None:
        return launch, f"WARNING: pointer {pointer!r} is missing or empty; " + _unchanged(launch)
    if not SESSION_ID.fullmatch(session_id):
        return launch, (f"WARNING: pointer {pointer!r} holds {session_id!r}, not a session id; "
                        + _unchanged(launch))
    target = session_file(session_id, cwd, environ)
    if not target.is_file():
        return launch, (
            f"WARNING: pointer {pointer!r} names session {session_id!r} but {str(target)!r} "
            f"does not exist; " + _unchanged(launch)
        )
    try:
        argv = resume_argv(launch, session_id)
    except ResumeArgvError as exc:
        return launch, f"WARNING: {exc}; " + _unchanged(launch)
    return argv, f"resuming session {session_id!r} from pointer {pointer!r}: {shlex.join(argv)}"


def _unchanged(launch: list[str]) -> str:
    return f"starting the launch argv unchanged: {shlex.join(launch)}"


def parse_args(argv: Sequence[str]) -> tuple[str, list[str]]:
    """Split ``--pointer FILE -- ARGV...`` into the pointer path and the launch argv."""
    args = list(argv)
    if "--" not in args:
        raise ValueError(USAGE)
    split = args.index("--")
    options, launch = args[:split], args[split + 1 :]
    if len(options) == 1 and options[0].startswith("--pointer="):
        options = ["--pointer", options[0].split("=", 1)[1]]
    if len(options) != 2 or options[0] != "--pointer" or not options[1] or not launch:
        raise ValueError(USAGE)
    return options[1], launch


def main(argv: Sequence[str] | None = None) -> int:
    """Exec claude with the session of the pointer file (never returns on success)."""
    args = list(sys.argv[1:] if argv is None else argv)
    own = args[: args.index("--")] if "--" in args else args  # after -- it is claude's argv
    if "-h" in own or "--help" in own:
        print(HELP, end="")
        return 0
    if "--version" in own:
        from runtime import package_version

        print(f"{PROG} {package_version()}")
        return 0
    try:
        pointer, launch = parse_args(args)
    except ValueError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    chosen, line = choose_argv(launch, pointer, os.getcwd())
    print(f"{PROG}: {line}", file=sys.stderr, flush=True)
    try:
        os.execvp(chosen[0], chosen)
    except OSError as exc:
        print(f"{PROG}: cannot run {chosen[0]!r}: {exc.strerror}", file=sys.stderr, flush=True)
        return 127
    return 0  # pragma: no cover - execvp does not return


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
