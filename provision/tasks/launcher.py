"""Tasks about the claude process itself (SPEC §5.2 steps 2–4, and ``--restart-claude``).

``HostFacts`` checks the tools the door needs; ``LaunchCommand`` introspects the real launch
command (and publishes it as ``ctx.launch``); ``ResumeCommand`` computes the resume argv from it
(``ctx.resume_argv``) and shows both token by token; ``RestartClaude`` restarts the live claude
only when the operator asked for it, and waits until it is ready. On a Codex host it restarts
nothing and says whether the live codex must be restarted by hand (``codex_restart_note``).
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING

from provision.actions import CLAUDE_ONLY, CODEX_ONLY, Action, Task
from provision.errors import FactError, HostError, IntrospectError
from provision.introspect import Launch, introspect
from provision.resume import SESSION_TOKEN, resume_argv, token_table
from provision.tasks.files import find_console_script, owner_of
from provision.tasks.restart import RestartReady, live_session
from runtime.agents.kind import AgentKind
from runtime.doors.kind import DoorKind

if TYPE_CHECKING:
    from provision.host import Host
    from provision.result import Context


@dataclass(frozen=True)
class ToolFacts:
    """Versions of the tools the door needs, as the host reported them."""

    tools: tuple[tuple[str, str], ...]


class HostFacts(Task):
    """The tools the profile's door needs exist on the host (read-only)."""

    name = "HostFacts"
    halt_on_failure = True

    def facts(self, host: Host, ctx: Context) -> ToolFacts:
        kind = ctx.profile.door.kind
        needed = [list(kind.tool_probe)] if kind.tool_probe else []
        if kind is DoorKind.TMUX and ctx.profile.door.tmux_unit:
            needed.append(list(DoorKind.SYSTEMD.tool_probe))
        found = []
        user, section = ctx.profile.claude.user, ctx.profile.agent  # codex: its user and home
        if not host.run(["id", "-u", user], timeout=10).ok:
            raise FactError(f"{section}.user {user!r} does not exist on {ctx.profile.host!r}")
        home = host.stat(ctx.profile.claude.home)
        if home is None or not home.is_dir:
            raise FactError(f"{section}.home {ctx.profile.claude.home!r} is not a directory")
        for argv in needed:
            try:
                result = host.run(argv, timeout=10)
            except HostError as exc:
                raise FactError(f"{argv[0]} is required for the {kind} door: {exc}") from exc
            found.append((argv[0], (result.stdout.strip().splitlines() or ["?"])[0]))
        return ToolFacts(tuple(found))

    def plan(self, facts: ToolFacts, ctx: Context) -> list[Action]:
        return []

    def ok_message(self, facts: ToolFacts, ctx: Context) -> str:
        tools = ", ".join(f"{name}: {version}" for name, version in facts.tools) or "none needed"
        return (f"door {ctx.profile.door.kind}; user {ctx.profile.claude.user} "
                f"(home {ctx.profile.claude.home}); {tools}")


@dataclass(frozen=True)
class LaunchFacts:
    """The introspected launch and the version its claude binary reports."""

    launch: Launch
    binary_version: str


class LaunchCommand(Task):
    """The real launch command of claude, corroborated by the live process."""

    name = "LaunchCommand"
    details_are_evidence = True
    halt_on_failure = True

    def facts(self, host: Host, ctx: Context) -> LaunchFacts:
        launch = introspect(host, ctx.profile)
        ctx.launch = launch
        return LaunchFacts(launch, claude_version(host, launch.argv[0]))

    def plan(self, facts: LaunchFacts, ctx: Context) -> list[Action]:
        expected = ctx.profile.channels_expected
        if expected:
            present = set(facts.launch.channel_flags)
            missing = [channel for channel in expected if channel not in present]
            if missing:
                raise IntrospectError(f"expected channels {missing!r} are not in the live claude "
                                      f"argv: {shlex.join(facts.launch.channel_flags)!r}")
        return []

    def ok_message(self, facts: LaunchFacts, ctx: Context) -> str:
        launch = facts.launch
        live = "no live process seen"
        if launch.live is not None:  # _settle notes "configured ≠ live" when prefer decided
            differs = any(line.startswith("configured ≠ live") for line in launch.evidence)
            live = (f"differs from live pid {launch.live.pid}; profile prefers "
                    f"{ctx.profile.prefer}" if differs else f"live pid {launch.live.pid} agrees")
        return (f"{launch.source} ({live}): {shlex.join(launch.argv)} "
                f"[cwd {launch.workdir}, {ctx.profile.agent} {facts.binary_version}]")

    def details(self, facts: LaunchFacts, ctx: Context) -> list[str]:
        channels = shlex.join(facts.launch.channel_flags) or "none"
        return [f"workdir: {facts.launch.workdir}", f"channels: {channels}",
                *(f"evidence: {line}" for line in facts.launch.evidence)]


def claude_version(host: Host, binary: str) -> str:
    """First line of ``BINARY --version``, or why it could not be read (never fatal)."""
    try:
        result = host.run([binary, "--version"], timeout=20)
    except HostError as exc:
        return f"unknown ({exc})"
    lines = (result.stdout or result.stderr).strip().splitlines()
    return lines[0] if result.ok and lines else f"unknown (rc={result.rc})"


@dataclass(frozen=True)
class ResumeFacts:
    launch_argv: tuple[str, ...]
    resume_argv: tuple[str, ...]


class ResumeCommand(Task):
    """The resume argv computed from the launch argv (the one input of every switch)."""

    name = "ResumeCommand"
    details_are_evidence = True
    halt_on_failure = True

    def skip_reason(self, ctx: Context) -> str | None:
        return None if ctx.launch else "no launch argv (LaunchCommand did not succeed)"

    def facts(self, host: Host, ctx: Context) -> ResumeFacts:
        assert ctx.launch is not None
        resume = resume_argv(ctx.launch.argv, agent=ctx.profile.agent)
        ctx.resume_argv = resume
        return ResumeFacts(ctx.launch.argv, resume)

    def plan(self, facts: ResumeFacts, ctx: Context) -> list[Action]:
        return []

    def ok_message(self, facts: ResumeFacts, ctx: Context) -> str:
        return f"resume argv: {shlex.join(facts.resume_argv)}"

    def details(self, facts: ResumeFacts, ctx: Context) -> list[str]:
        return [f"{'':2}{'launch':<48} resume", *token_table(facts.launch_argv, facts.resume_argv)]


@dataclass(frozen=True)
class RestartFacts:
    """The launch, and the session the live claude runs (what the restart must resume)."""

    launch: Launch
    session_id: str | None
    tl_rebuild: str = ""
    codex_note: str = ""  # a Codex host: whether the live codex must be restarted by hand


class RestartClaude(Task):
    """Restart the live claude so it reads the new hook (only with ``--restart-claude``).

    tmux and systemd: the live session is resumed through the runtime door and the task waits
    until claude is ready (provision/tasks/restart.py), or fails naming what is missing.
    """

    name = "RestartClaude"
    agents = CLAUDE_ONLY | CODEX_ONLY
    reverify = False

    def __init__(self, requested: bool = False) -> None:
        self.requested = requested

    def skip_reason(self, ctx: Context) -> str | None:
        if ctx.profile.agent is AgentKind.CODEX:
            return None if ctx.launch else "no launch argv (LaunchCommand did not succeed)"
        if not self.requested:
            return "not requested (pass --restart-claude; a running claude reads hooks at start)"
        return None if ctx.launch else "no launch argv (LaunchCommand did not succeed)"

    def facts(self, host: Host, ctx: Context) -> RestartFacts:
        assert ctx.launch is not None
        if ctx.profile.agent is AgentKind.CODEX:
            return RestartFacts(ctx.launch, None, codex_note=codex_restart_note(host, ctx))
        if not ctx.profile.door.kind.restarts_claude:
            return RestartFacts(ctx.launch, None)
        live = ctx.launch.live
        if live is None:
            raise FactError("no live claude process to restart (start claude first)")
        return RestartFacts(ctx.launch,
                            live_session(host, ctx.profile.claude.claude_dir, live.pid),
                            find_console_script(host, ctx.profile, "tl-rebuild"))

    def plan(self, facts: RestartFacts, ctx: Context) -> list[Action]:
        door = ctx.profile.door
        if facts.codex_note or not door.kind.restarts_claude or facts.session_id is None:
            return []
        template = ctx.resume_argv or resume_argv(facts.launch.argv)
        argv = tuple(token.replace(SESSION_TOKEN, facts.session_id) for token in template)
        where = (f"tmux pane {door.tmux_target}" if door.kind is DoorKind.TMUX
                 else f"unit {door.systemd_unit}")
        owners = owner_of(ctx)
        as_user = (ctx.profile.claude.user if door.kind is DoorKind.TMUX and owners is not None
                   and owners.claude != owners.writer else None)
        return [RestartReady(facts.tl_rebuild, ctx.profile.install.config_path,
                             facts.session_id, argv, as_user=as_user,
                             summary=f"restart claude in {where} on session {facts.session_id} "
                                     f"and wait until it is ready (--restart-claude)"
                                     + (f" as {as_user}" if as_user else ""))]

    def ok_message(self, facts: RestartFacts, ctx: Context) -> str:
        if facts.codex_note:
            return facts.codex_note
        runner = os.path.basename(ctx.profile.door.pointer_runner or "runner")
        return f"pointer door: nothing to restart; {runner}'s next call starts a new claude"


def codex_restart_note(host: Host, ctx: Context) -> str:
    """Whether the live codex must be restarted to use what CodexConfig merged, in one line.

    Measured with 0.169.0 (tests/e2e/test_codex_config_reload.py): a running codex keeps the
    ``notify`` and ``[mcp_servers]`` it read at start; an edit of config.toml takes effect only
    when codex is restarted. A live codex that runs our MCP server (a process below it with
    the merged command) started from a merged file: nothing to restart."""
    assert ctx.launch is not None
    facts = ctx.facts_of("CodexConfig")
    live = ctx.launch.live
    if facts is None:
        return "nothing restarted: CodexConfig did not run"
    if live is None:
        return "no live codex: a codex started from now on reads the merged " \
            f"{facts.path} (notify, [mcp_servers.{facts.wanted.mcp_name}])"
    want = (facts.wanted.tl_rebuild, *facts.wanted.mcp_args)
    server = _descendant_running(host, live.pid, want)
    if server is not None:
        return (f"nothing to restart: the live codex (pid {live.pid}) runs our MCP server "
                f"(pid {server}), so it started from the merged {facts.path}")
    return (f"restart codex (pid {live.pid}, e.g. with the resume argv) for the merged "
            f"{facts.path} to take effect: a running codex reads notify and [mcp_servers] "
            "only at start (measured with 0.169.0); until then its turn ends switch nothing")


def _descendant_running(host: Host, pid: int, argv: tuple[str, ...]) -> int | None:
    """A process below ``pid`` whose argv ends with ``argv`` (a console script runs as
    ``python <script> …``), or None."""
    pending, seen = list(host.proc_children(pid)), {pid}
    while pending:
        child = pending.pop()
        if child in seen:
            continue
        seen.add(child)
        found = host.proc_cmdline(child)
        if len(found) >= len(argv) and found[len(found) - len(argv):] == argv:
            return child
        pending.extend(host.proc_children(child))
    return None
