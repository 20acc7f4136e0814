"""The ``tl-provision`` command line: validate, introspect, apply, drift, accept, uninstall.

Exit codes: 0 ok (drift: clean), 1 drift found, 2 failed task or error. Errors print one line
``tl-provision: error: <msg>`` (a traceback only with ``--debug``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from provision.errors import ProvisionError
from runtime.cli.render import use_colour

if TYPE_CHECKING:
    from provision.actions import Task
    from provision.host import Host
    from provision.profile import Profile
    from provision.result import TaskResult

PROG = "tl-provision"


def emit_json(data: dict[str, object]) -> None:
    """A ``--json`` result on stdout, ``schema_version`` first (as tl-rebuild's)."""
    from runtime.cli.output import SCHEMA_VERSION

    print(json.dumps({"schema_version": SCHEMA_VERSION, **data}, indent=2, ensure_ascii=False,
                     default=str))


def apply_tasks(restart_claude: bool = False) -> list[Task]:
    """The ordered task list of ``apply``."""
    from provision.tasks.codex_config import CodexConfig
    from provision.tasks.files import Directories, LaunchDropIn, RunnerWrapper, RuntimeConfig
    from provision.tasks.launcher import HostFacts, LaunchCommand, RestartClaude, ResumeCommand
    from provision.tasks.manifest import Manifest
    from provision.tasks.mcp import McpServer, McpTools
    from provision.tasks.privileges import DoorPrivileges
    from provision.tasks.settings import StopHook, StopHookPersists
    from provision.tasks.verify import Verify

    return [HostFacts(), LaunchCommand(), ResumeCommand(), Directories(), RuntimeConfig(),
            LaunchDropIn(), DoorPrivileges(), RunnerWrapper(), StopHook(), McpServer(),
            CodexConfig(), Verify(),
            McpTools(), StopHookPersists(), Manifest(), RestartClaude(restart_claude)]


def uninstall_tasks() -> list[Task]:
    """What ``uninstall`` removes: what apply added to the agent's own files — claude: our Stop
    hook entry and MCP registration; codex: our notify head and MCP table (HANDOFF §8)."""
    from provision.tasks.codex_config import CodexConfigRemoved
    from provision.tasks.mcp import McpServerRemoved
    from provision.tasks.settings import StopHook

    return [StopHook(present=False), McpServerRemoved(), CodexConfigRemoved()]


def introspect_tasks() -> list[Task]:
    from provision.tasks.launcher import HostFacts, LaunchCommand, ResumeCommand

    return [HostFacts(), LaunchCommand(), ResumeCommand()]


def _host(profile: Profile) -> Host:
    from provision.host import LocalHost

    if profile.connection != "local":
        raise ProvisionError(f"connection {profile.connection!r} is not supported in this "
                             f"release; run tl-provision on the host (connection: local)")
    return LocalHost(profile.host)


def _run(args: argparse.Namespace, tasks: list[Task], check: bool) -> int:
    from provision import engine
    from provision.profile import load_profile
    from provision.result import Context

    profile = load_profile(args.profile)
    if getattr(args, "profile_source", None):  # a staged copy: name the real file
        profile = dataclasses.replace(profile, source=args.profile_source)
    ctx = Context(profile, check=check)
    colour = use_colour()

    def show(result: TaskResult) -> None:
        if not args.json:
            # introspect's evidence and token table are what it is asked for: always shown
            verbose = 1 if args.command == "introspect" else args.verbose
            print(engine.format_result(result, profile.host, getattr(args, "diff", False),
                                       verbose, colour), flush=True)

    report = engine.run(tasks, _host(profile), ctx, on_result=show)
    if args.json:
        data = report.to_dict()
        if args.command == "introspect":
            data["launch"] = ctx.launch.to_dict() if ctx.launch else None
            data["resume_argv"] = list(ctx.resume_argv) if ctx.resume_argv else None
        emit_json(data)
    else:
        print(engine.format_recap(report, colour))
    return report.exit_code


def cmd_apply(args: argparse.Namespace) -> int:
    return _run(args, apply_tasks(args.restart_claude), check=args.check)


def cmd_uninstall(args: argparse.Namespace) -> int:
    return _run(args, uninstall_tasks(), check=args.check)


def cmd_introspect(args: argparse.Namespace) -> int:
    return _run(args, introspect_tasks(), check=True)


def cmd_drift(args: argparse.Namespace) -> int:
    from provision.drift import check_drift, evidence, findings_json
    from provision.profile import load_profile
    from provision.tasks.manifest import load_manifest
    from runtime.cli.render import ansi

    profile = load_profile(args.profile)
    host = _host(profile)
    findings = check_drift(host, profile)
    if args.json:
        emit_json(findings_json(findings))
        return 1 if findings else 0
    colour = use_colour()
    if args.verbose:
        print("\n".join(evidence(load_manifest(host, profile), profile.install.manifest_path)))
    for finding in findings:
        print("\n".join(finding.lines(args.verbose, colour)))
    recap = (f"{profile.host} : drift={len(findings)}" if findings else
             f"{profile.host} : no drift since the last apply")
    print(ansi(recap, "yellow" if findings else "green") if colour else recap)
    return 1 if findings else 0


def cmd_validate(args: argparse.Namespace) -> int:
    from provision.profile import load_profile

    profile = load_profile(args.profile)
    if args.json:
        emit_json({"host": profile.host, "valid": True})
    else:
        print(f"{args.profile}: valid host profile for {profile.host}")
    return 0


def cmd_accept(args: argparse.Namespace) -> int:
    from provision.accept import cmd_accept as accept
    from provision.profile import load_profile

    profile = load_profile(args.profile)
    return accept(args, profile, _host(profile))


def build_parser() -> argparse.ArgumentParser:
    from runtime.cli import add_command, add_completion, add_program_flags

    parser = argparse.ArgumentParser(prog=PROG, description="Threadline installer (SPEC §5).")
    add_program_flags(parser, PROG)
    sub = parser.add_subparsers(dest="command", required=True)
    host = "inventories/tmux-vps.yml"
    specs = {
        "validate": (cmd_validate, "check a host profile against the schema; touch nothing",
                     [f"tl-provision validate {host}"]),
        "introspect": (cmd_introspect, "show how claude is really launched and the resume argv",
                       [f"tl-provision introspect {host}",
                        f"tl-provision introspect {host} --json"]),
        "apply": (cmd_apply, "install config, Stop hook, MCP server; verify; record manifest",
                  [f"tl-provision apply {host} --check --diff   # say what would change",
                   f"tl-provision apply {host}",
                   f"tl-provision apply {host} --restart-claude"]),
        "uninstall": (cmd_uninstall, "remove what apply added to the agent's config (claude: "
                      "Stop hook, MCP server; codex: notify head, MCP table); backups kept",
                      ["tl-provision uninstall inventories/codex-host.yml --check --diff",
                       "tl-provision uninstall inventories/codex-host.yml"]),
        "drift": (cmd_drift, "compare the machine with the last apply (exit 0 clean, 1 drift)",
                  [f"tl-provision drift {host}",
                   f"tl-provision drift {host} -v   # what was compared, whole diffs"]),
        "accept": (cmd_accept, "post-install acceptance checklist (exit 0 all pass, 1 a fail)",
                   [f"tl-provision accept {host}", f"tl-provision accept {host} --drill",
                    f"tl-provision accept {host} --live --confirm REBUILD"]),
    }
    for name, (func, text, examples) in specs.items():
        cmd = add_command(sub, name, text, examples, description=text)
        cmd.add_argument("profile", metavar="HOST.yml")
        cmd.add_argument("--json", action="store_true", help="JSON report on stdout")
        cmd.set_defaults(func=func, verbose=0)
        if name in ("apply", "accept", "drift", "uninstall"):
            cmd.add_argument("-v", "--verbose", action="count", default=0,
                             help="also print the evidence of what passed (apply: the launch "
                                  "evidence, the launch/resume token table, what was read; "
                                  "drift: the manifest's values compared, whole diffs)")
        if name in ("apply", "uninstall"):
            cmd.add_argument("--check", action="store_true", help="change nothing; say what "
                             "would change")
            cmd.add_argument("--diff", action="store_true", help="show unified diffs")
        if name == "apply":
            cmd.add_argument("--restart-claude", action="store_true",
                             help="restart the live claude at the end (never implicit)")
            cmd.add_argument("--profile-source", metavar="PATH",
                             help="the profile path the rendered config names, when HOST.yml "
                                  "is a staged copy of it (Ansible's check mode)")
        if name == "accept":
            cmd.add_argument("--drill", action="store_true",
                             help="full rebuild on an isolated scratch target")
            cmd.add_argument("--live", action="store_true",
                             help="rebuild the real target (needs --confirm REBUILD)")
            cmd.add_argument("--confirm", default="")
            cmd.add_argument("--wait-minutes", type=float, default=10.0,
                             help="--live: how long to wait for the switch and the messages")
    add_completion(sub, PROG, build_parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        return int(args.func(args))
    except ProvisionError as exc:
        if args.debug:
            raise
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
