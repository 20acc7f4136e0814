"""Step 9 of apply: read-only checks that a switch would work, each with its evidence.

- the resume argv's program is an executable file, and the workdir exists;
- the config's ``project_dir`` is the encoded workdir (runtime.paths.encode_project_dir) and
  that session store exists (a wrong one fails only after the old process is gone);
- every channel flag of the live process is in the resume argv (the deaf process, SPEC §6);
- every ``server:NAME`` development channel is a registered MCP server (read from the stored
  MCP config; ``claude mcp get`` would start the server);
- the Stop hook's and the MCP server's program (tl-rebuild) starts as the claude user.

On a Codex host instead of the channel checks: the notify program and the MCP server in
``$CODEX_HOME/config.toml`` start as the codex user, and the real ``codex mcp list --json``
(with that CODEX_HOME; it reads the config, starts no server) lists the MCP server as merged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from provision.actions import Action, Task
from provision.errors import FactError, HostError, VerifyError
from provision.tasks.files import project_dir
from runtime.agents.claude import channel_flags, channel_tokens, dev_channel_servers
from runtime.agents.kind import AgentKind

if TYPE_CHECKING:
    from provision.host import Host
    from provision.result import Context


@dataclass(frozen=True)
class Check:
    """One verification: name, passed or not, and the evidence either way."""

    name: str
    passed: bool
    evidence: str


def missing_channel_flags(live_argv: tuple[str, ...], resume: tuple[str, ...]) -> list[str]:
    """Channel flags (``"FLAG VALUE"``) of the live argv that the resume argv does not carry."""
    have = set(channel_flags(resume))
    return [flag for flag in channel_flags(live_argv) if flag not in have]


def mcp_registered(host: Host, ctx: Context, name: str, workdir: str) -> Check:
    """``name`` is stored as an MCP server in the user/local (``.claude.json``) or project
    (``WORKDIR/.mcp.json``) config — read from the files, never with ``claude mcp get``, which
    starts the server to probe it (a Telegram bridge would lose its updates: SPEC §6)."""
    from provision.tasks.mcp import stored_servers

    claude = ctx.profile.claude
    claude_json = f"{(claude.config_dir or claude.home).rstrip('/')}/.claude.json"
    mcp_json = f"{workdir.rstrip('/')}/.mcp.json"
    label = f"channel server:{name} registered"
    try:
        found = stored_servers(name, workdir, host.read_bytes(claude_json),
                               host.read_bytes(mcp_json), claude_json, mcp_json)
    except (HostError, FactError) as exc:
        return Check(label, False, str(exc))
    if not found:
        return Check(label, False, f"not in {claude_json} (user/local) nor in {mcp_json}")
    return Check(label, True, "scope: " + ", ".join(scope for scope, _ in found))


def run_checks(host: Host, ctx: Context) -> tuple[Check, ...]:
    launch, resume = ctx.launch, ctx.resume_argv
    assert launch is not None and resume is not None and launch.workdir is not None
    checks = []
    st = host.stat(resume[0])
    checks.append(Check("resume argv[0] executable", bool(st and st.executable and not st.is_dir),
                        resume[0]))
    wd = host.stat(launch.workdir)
    checks.append(Check("workdir exists", bool(wd and wd.is_dir), launch.workdir))
    store = project_dir(ctx.profile, launch.workdir)
    found = host.stat(store)
    checks.append(Check("session store exists (project_dir = encoded workdir)",
                        bool(found and found.is_dir), store))
    live = launch.live.argv if launch.live else launch.argv
    if ctx.profile.agent is AgentKind.CODEX:
        return (*checks, own_server_check(live), *codex_checks(host, ctx, resume[0]))
    missing = missing_channel_flags(live, resume)
    checks.append(Check("every live channel flag in the resume argv", not missing,
                        "missing: " + ", ".join(missing) if missing else
                        " ".join(channel_tokens(live)) or "no channel flags"))
    for name in dev_channel_servers(live):
        checks.append(mcp_registered(host, ctx, name, launch.workdir))
    checks.extend(runnable_by_claude(host, ctx, program) for program in our_programs(ctx))
    return tuple(checks)


def own_server_check(live_argv: tuple[str, ...]) -> Check:
    """The live codex holds its thread in the pane (identity and health read the writer lock
    there), not in the shared app-server daemon, which Threadline cannot switch yet."""
    from runtime.agents.codex import ResumeArgvError, own_app_server

    label = "codex holds its thread in the pane (not the shared app-server daemon)"
    try:
        option = own_app_server(live_argv)
    except ResumeArgvError as exc:
        return Check(label, False, str(exc))
    if option:
        return Check(label, True, f"launched with {option}")
    return Check(label, False, "launched without --no-daemon or -c: codex 0.169.0 then runs "
                 "its threads in the shared `codex app-server --managed-daemon`, where a switch "
                 "cannot be verified; add --no-daemon to the codex command, restart it, "
                 "re-run apply")


def codex_checks(host: Host, ctx: Context, codex_program: str) -> list[Check]:
    """Our programs in config.toml run as the codex user; codex itself lists our server."""
    import json

    from provision.tasks.codex_config import merged

    facts = ctx.facts_of("CodexConfig")
    if facts is None:
        return [Check("config.toml read", False, "CodexConfig did not run")]
    wanted = facts.wanted
    checks = [runnable_by_claude(host, ctx, wanted.tl_rebuild)]
    label = f"codex mcp list shows {wanted.mcp_name}"
    if merged(facts) != facts.current:  # check mode: nothing merged yet, nothing to ask
        return [*checks, Check(label, True, f"{facts.path} not merged yet (check mode)")]
    assert ctx.profile.codex is not None
    try:
        result = host.run([codex_program, "mcp", "list", "--json"],
                          env=ctx.profile.codex.env, timeout=60)
        servers = {s.get("name"): s for s in json.loads(result.stdout or "[]")}
    except (HostError, ValueError, AttributeError) as exc:
        return [*checks, Check(label, False, f"codex mcp list --json: {exc}")]
    transport = (servers.get(wanted.mcp_name) or {}).get("transport") or {}
    argv = [transport.get("command"), *(transport.get("args") or [])]
    want = [wanted.tl_rebuild, *wanted.mcp_args]
    return [*checks, Check(label, argv == want, " ".join(map(str, argv)) if argv[0] else
                           f"not listed (servers: {', '.join(map(str, servers)) or 'none'})")]


def our_programs(ctx: Context) -> list[str]:
    """The programs claude starts for us: the Stop hook's and the MCP server's (tl-rebuild)."""
    import shlex

    found = []
    hook = ctx.facts_of("StopHook")
    command = getattr(hook, "wanted", {}).get("command") if hook is not None else None
    if command and getattr(hook, "present", True):
        found.append(shlex.split(str(command))[0])
    mcp = ctx.facts_of("McpServer")
    wanted = getattr(mcp, "wanted", None)
    if wanted is not None and getattr(wanted, "command", None):
        found.append(str(wanted.command))
    return list(dict.fromkeys(found))


def runnable_by_claude(host: Host, ctx: Context, program: str) -> Check:
    """``program`` starts as the claude user (claude runs the hook and the MCP server as
    itself): run as that user with ``--help`` when apply runs as someone else — a file that is
    executable but sits under an unreadable folder (a venv under /root) or has an unreadable
    interpreter fails here, not at the first Stop."""
    from provision.tasks.files import Owners, owner_of

    user = ctx.profile.claude.user
    label = f"{program.rsplit('/', 1)[-1]} runs as {user}"
    owners = owner_of(ctx)
    if owners is None or owners == Owners(owners.claude, owners.claude):
        st = host.stat(program)
        return Check(label, bool(st and st.executable and not st.is_dir), program)
    try:
        result = host.run(["runuser", "-u", user, "--", program, "--help"], timeout=30)
    except HostError as exc:
        return Check(label, False, f"{program}: {exc}")
    tail = (result.stderr or result.stdout).strip().splitlines()
    return Check(label, result.ok, program if result.ok else
                 f"{program} as {user}: rc={result.rc} {tail[-1] if tail else ''}".strip())


class Verify(Task):
    """The switch prerequisites hold (read-only; any failed check fails the task)."""

    name = "Verify"
    details_are_evidence = True

    def skip_reason(self, ctx: Context) -> str | None:
        return ctx.missing_argv()

    def facts(self, host: Host, ctx: Context) -> tuple[Check, ...]:
        return run_checks(host, ctx)

    def plan(self, facts: tuple[Check, ...], ctx: Context) -> list[Action]:
        failed = [c for c in facts if not c.passed]
        if failed:
            raise VerifyError("verification failed: " + "; ".join(
                f"{c.name} ({c.evidence})" for c in failed))
        return []

    def ok_message(self, facts: tuple[Check, ...], ctx: Context) -> str:
        return f"{len(facts)} checks passed"

    def details(self, facts: tuple[Check, ...], ctx: Context) -> list[str]:
        return [f"{'pass' if c.passed else 'FAIL'}: {c.name} — {c.evidence}" for c in facts]
