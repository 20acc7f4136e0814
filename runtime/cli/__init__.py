"""The ``tl-rebuild`` command line: one parser, lazy handlers, one error boundary.

``hook-stop`` and Codex's ``hook-notify`` bypass argparse and every heavy import: the agent
runs them after every turn, so they must stay close to the start-up time of a bare
interpreter (see runtime.cli.hook, runtime.cli.notify).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from runtime.errors import ThreadlineError

if TYPE_CHECKING:  # argparse only off the hook's path (issue 13 §3: every import counts there)
    import argparse
    from collections.abc import Callable, Sequence

PROG = "tl-rebuild"
DEBUG_HELP = "show tracebacks on errors"


def add_program_flags(parser: argparse.ArgumentParser, prog: str) -> None:
    """``--version`` (``PROG VERSION`` on stdout, exit 0) and ``--debug`` on a top parser.

    The version is looked up only when asked: importlib.metadata is no start-up cost."""
    import argparse

    class Version(argparse.Action):
        def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
            from runtime import package_version

            print(f"{prog} {package_version()}", flush=True)
            parser.exit(0)

    parser.add_argument("--version", action=Version, nargs=0, default=argparse.SUPPRESS,
                        help="print the program's name and version and exit")
    parser.add_argument("--debug", action="store_true", help=DEBUG_HELP)


def formatter(kind: type[argparse.HelpFormatter]) -> Callable[..., argparse.HelpFormatter]:
    """``kind`` at the width argparse itself takes, ``shutil.get_terminal_size()``'s columns
    less 2, found here the same way: argparse imports shutil (with zlib, bz2 and lzma, ≈ 2 ms
    of every start-up, issue 13) for the first formatter it makes, when a parser is built."""
    import functools
    import os

    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        stdout = sys.__stdout__
        try:
            columns = os.get_terminal_size(stdout.fileno()).columns if stdout else 0
        except (ValueError, OSError):
            columns = 0
    return functools.partial(kind, width=(columns or 80) - 2)


def add_command(sub: Any, name: str, help_text: str, examples: Sequence[str],
                description: str | None = None) -> argparse.ArgumentParser:
    """A sub-command with a one-line description, its examples in ``--help``, and ``--debug``
    accepted after the sub-command too (``tl-rebuild plan --debug`` ≡ ``tl-rebuild --debug
    plan``: SUPPRESS keeps the top parser's value unless the flag is given here)."""
    import argparse

    parser: argparse.ArgumentParser = sub.add_parser(
        name, help=help_text, description=description or help_text[:1].upper() + help_text[1:],
        epilog="examples:\n" + "\n".join(f"  {line}" for line in examples),
        formatter_class=formatter(argparse.RawDescriptionHelpFormatter))
    parser.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help=DEBUG_HELP)
    return parser


# options that name a file: completed with file names (shtab's FILE, without importing it here)
FILE_OPTIONS = ("transcript", "config", "into", "manifest", "profile")
SHTAB_FILE = {"bash": "_shtab_compgen_files", "zsh": "_files", "tcsh": "f"}


def add_completion(sub: Any, prog: str, build: Any) -> None:
    """``PROG completion bash|zsh``: print a completion script made from ``build()``'s parser
    tree by shtab (imported only by this sub-command)."""
    cmd = add_command(sub, "completion", "print a shell completion script (bash or zsh)", [
        f"{prog} completion bash > ~/.local/share/bash-completion/completions/{prog}",
        f"{prog} completion zsh > ~/.zfunc/_{prog}   # a folder on $fpath, before compinit"])
    cmd.add_argument("shell", choices=("bash", "zsh"), help="the shell to complete in")
    cmd.set_defaults(func=lambda args: print_completion(build(), args.shell))


def print_completion(parser: argparse.ArgumentParser, shell: str) -> int:
    """Print ``parser``'s completion script for ``shell`` (file names where a path is asked)."""
    import shtab

    stack = [parser]
    while stack:
        current = stack.pop()
        for action in current._actions:  # argparse keeps no public list of them
            if action.dest in FILE_OPTIONS or action.metavar == "HOST.yml":
                action.complete = SHTAB_FILE  # type: ignore[attr-defined]
            choices = action.choices if isinstance(action.choices, dict) else {}
            stack.extend(p for p in choices.values() if p not in stack)
    script = shtab.complete(parser, shell=shell)
    # shtab registers on `eval` only and runs the function on `source`; registering on both
    # makes `source <(PROG completion zsh)` work (autoloaded from fpath it still runs it)
    script = script.replace("[[ $zsh_eval_context[-1] == eval ]]",
                            "[[ $zsh_eval_context[-1] == (eval|file) ]]")
    sys.stdout.write(script if script.endswith("\n") else script + "\n")
    return 0


# The engine's one-shot commands: a run of one builds its own sub-parser alone. The other
# sub-parsers and runtime.cli.ops cost ≈ 2 ms of every plan/dirty/fork start-up (issue 13).
ENGINE_COMMANDS = frozenset({"plan", "dirty", "fork"})


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """Return the full parser; each command group registers its own sub-commands.

    With ``command`` (one of ENGINE_COMMANDS) only that sub-command is registered: its
    parsing, ``--help`` and errors are the full parser's, the other commands are unknown."""
    import argparse

    from runtime.cli import engine as cli_engine

    parser = argparse.ArgumentParser(
        prog=PROG,
        description=(
            "Rebuild a long-running Claude Code or Codex session: carry every word, drop the noise."
        ),
        formatter_class=formatter(argparse.HelpFormatter),
    )
    add_program_flags(parser, PROG)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    if command in ENGINE_COMMANDS:
        cli_engine.register(sub, only=command)
        return parser
    from runtime.cli import ops as cli_ops

    cli_engine.register(sub)
    cli_ops.register(sub)
    # registered here, not in runtime.switch.restart: importing it pulls runtime.switch.health and
    # the channel servers into every command (6-12 ms of plan/dirty/fork start-up, issue 13)
    cmd = add_command(sub, "restart", "restart claude on SESSION through the door and wait "
                                      "until it is ready (tl-provision apply --restart-claude); "
                                      "also in a tmux pane kept dead after claude exited",
                      ["tl-rebuild restart --session SESSION_ID --config /etc/threadline/c.toml",
                       "tl-rebuild restart --config /etc/threadline/c.toml   # the session it "
                       "runs (or a dead pane's --resume)"])
    cmd.add_argument("--session", help="the session id claude must run after (default: the one "
                                       "the running claude's session record names, or the "
                                       "--resume of a dead pane's claude)")
    cmd.add_argument("--config", help="runtime config file (TOML)")
    cmd.set_defaults(func=_run_restart)
    hook = add_command(sub, "hook-stop", "Stop-hook entry (reads the hook JSON on stdin)",
                       ["tl-rebuild hook-stop < hook.json   "
                        "# what Claude Code runs after every turn (settings.json hooks.Stop)"])
    hook.set_defaults(func=None)
    notify = add_command(sub, "hook-notify", "Codex's turn-end trigger (its notify program; "
                         "the JSON payload is the last argument)",
                         ["tl-rebuild hook-notify --config C.toml -- my-notify.sh PAYLOAD   "
                          "# config.toml: notify = [tl-rebuild, hook-notify, --config, C.toml, "
                          "--, my-notify.sh]"])
    notify.set_defaults(func=None)
    mcp = add_command(sub, "mcp", "run the stdio MCP server (7 thread_rebuild_* tools)",
                      ["tl-rebuild mcp --config /etc/threadline/config.toml   "
                       "# as registered by tl-provision (claude mcp add)"])
    mcp.add_argument("--config", help="runtime config file (TOML)")
    mcp.set_defaults(func=_run_mcp)
    add_completion(sub, PROG, build_parser)
    return parser


def _run_restart(args: argparse.Namespace) -> int:
    from runtime.switch import restart

    return restart.run_restart(args)


def _run_mcp(args: argparse.Namespace) -> int:
    from runtime.cli import mcp as mcp_server

    return mcp_server.main(args)


def _engine_command(argv: Sequence[str]) -> str | None:
    """The engine command ``argv`` runs (its first word, after any ``--debug``), else None:
    ``-h``, ``--version`` or an abbreviated flag first get the full parser."""
    for token in argv:
        if token != "--debug":
            return token if token in ENGINE_COMMANDS else None
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``tl-rebuild`` command and return its exit code."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["hook-stop"]:
        from runtime.cli import hook

        return hook.main(args_list[1:])
    if args_list[:1] == ["hook-notify"]:
        from runtime.cli import notify

        return notify.main(args_list[1:])
    parser = build_parser(_engine_command(args_list))
    args = parser.parse_args(args_list)
    try:
        return int(args.func(args) or 0)
    except ThreadlineError as exc:
        if args.debug:
            raise
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
