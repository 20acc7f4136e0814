"""Tasks ``McpServer`` (register through the claude CLI) and ``McpTools`` (verify over MCP).

SPEC §5.2 steps 8–9. ``claude mcp add`` is not an upsert and ``claude mcp get`` prints a lossy
one-line form of the arguments, so the facts are both: ``claude mcp get NAME`` (scope and
status, as claude resolves it) and a read-only parse of the files the CLI writes, for the exact
stored spec of every scope:

    user     <config dir or HOME>/.claude.json → mcpServers.NAME
    local    <config dir or HOME>/.claude.json → projects[WORKDIR].mcpServers.NAME
    project  WORKDIR/.mcp.json → mcpServers.NAME

The plan: absent → ``claude mcp add``; a different spec → ``claude mcp remove`` then ``add``; the
name in another scope (or a scope we cannot read) → failed, nothing removed. Several companions
share a claude user: a ``tl-rebuild mcp`` server of the same name whose ``--config`` is another
companion's (not this profile's, nor the path its manifest recorded) → failed, nothing removed.
The files are never written by us: concurrent claude sessions write ``~/.claude.json``
non-atomically.

Every claude call runs as the profile's claude user, in the launch workdir, with that user's
HOME (and CLAUDE_CONFIG_DIR, or none), spelt out in the argv:
``[runuser -u USER --] env [-u CLAUDE_CONFIG_DIR] HOME=… claude mcp …`` (no shell).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from provision.actions import CLAUDE_ONLY, Action, RunCommand, Task
from provision.errors import FactError, McpRegistrationError
from provision.tasks.settings import find_tl_rebuild, previous_config
from runtime.channels.registry import SCOPE_ORDER, scope_tables

if TYPE_CHECKING:
    from provision.host import Host
    from provision.profile import Profile
    from provision.result import Context

SCOPES = SCOPE_ORDER  # claude's precedence, highest first (runtime/channels/registry.py owns it)
EXPECTED_TOOLS = (
    "thread_rebuild_doctor", "thread_rebuild_dirty", "thread_rebuild_plan",
    "thread_rebuild_request", "thread_rebuild_status", "thread_rebuild_cancel",
    "thread_rebuild_rollback_request",
)
CLI_TIMEOUT = 60.0


@dataclass(frozen=True)
class ServerSpec:
    """One stored MCP server definition, normalised for comparison."""

    type: str
    command: str | None
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    extra: str = ""  # canonical JSON of any other stored field (url, headers, ...)

    @classmethod
    def from_json(cls, data: Any, where: str) -> ServerSpec:
        """Normalise a stored entry; ``where`` names it in errors."""
        if not isinstance(data, dict):
            raise FactError(f"MCP server entry {where} is not an object")
        rest = {k: v for k, v in data.items() if k not in ("type", "command", "args", "env")}
        args, env = data.get("args", []), data.get("env") or {}
        if not isinstance(args, list) or not isinstance(env, dict):
            raise FactError(f"MCP server entry {where} has malformed args or env")
        return cls(str(data.get("type", "stdio")), data.get("command"),
                   tuple(str(a) for a in args),
                   tuple(sorted((str(k), str(v)) for k, v in env.items())),
                   json.dumps(rest, sort_keys=True) if rest else "")

    def describe(self) -> str:
        env = "".join(f" {k}={v}" for k, v in self.env)
        extra = f" {self.extra}" if self.extra else ""
        return f"{self.type}:{env} {json.dumps([self.command, *self.args])}{extra}"


@dataclass(frozen=True)
class McpGet:
    """What ``claude mcp get NAME`` printed: found or not, scope, status line."""

    found: bool
    scope: str | None = None
    status: str = ""

    @property
    def connected(self) -> bool:
        return "connected" in self.status.lower() and "fail" not in self.status.lower()


_SCOPE_LABELS = {"user config": "user", "local config": "local", "project config": "project"}


def parse_mcp_get(rc: int, stdout: str, stderr: str = "") -> McpGet:
    """Parse ``claude mcp get`` output (2.1.328: ``  Scope: User config (...)``, ``  Status: …``).

    rc 1 with ``No MCP server named`` means absent; any other failure is a FactError.
    """
    if rc != 0:
        if "no mcp server named" in (stderr + stdout).lower():
            return McpGet(False)
        tail = (stderr or stdout).strip().splitlines()
        raise FactError(f"claude mcp get failed (rc={rc}): {tail[-1] if tail else 'no output'}")
    scope_line = re.search(r"^\s*Scope:\s*(.+)$", stdout, re.M)
    status_line = re.search(r"^\s*Status:\s*(.+)$", stdout, re.M)
    scope = None
    if scope_line:
        label = scope_line.group(1).lower()
        scope = next((s for key, s in _SCOPE_LABELS.items() if label.startswith(key)),
                     scope_line.group(1).strip())
    return McpGet(True, scope, status_line.group(1).strip() if status_line else "")


def stored_servers(name: str, workdir: str, claude_json: bytes | None,
                   mcp_json: bytes | None, claude_json_path: str,
                   mcp_json_path: str) -> tuple[tuple[str, ServerSpec], ...]:
    """Every stored definition of ``name`` as ``(scope, spec)``, in claude's precedence order."""
    def load(raw: bytes | None, path: str) -> dict[str, Any]:
        if raw is None or not raw.strip():
            return {}
        try:
            doc = json.loads(raw)
        except ValueError as exc:
            raise FactError(f"'{path}' is not valid JSON ({exc}); not touching it") from exc
        if not isinstance(doc, dict):
            raise FactError(f"'{path}' does not hold a JSON object; not touching it")
        return doc

    tables = scope_tables(load(claude_json, claude_json_path), load(mcp_json, mcp_json_path),
                          workdir)
    where = {"local": f"{claude_json_path} projects[{workdir!r}].mcpServers",
             "project": f"{mcp_json_path} mcpServers", "user": f"{claude_json_path} mcpServers"}
    found = []
    for scope in SCOPES:
        if name in tables[scope]:
            found.append((scope, ServerSpec.from_json(tables[scope][name],
                                                      f"{where[scope]}.{name}")))
    return tuple(found)


def claude_prefix(profile: Profile, claude: str, current_user: str) -> tuple[str, ...]:
    """argv prefix that runs ``claude`` as the claude user with exactly its HOME/config dir."""
    spec = profile.claude
    prefix: list[str] = []
    if spec.user != current_user:
        prefix += ["runuser", "-u", spec.user, "--"]
    prefix.append("env")
    if not spec.config_dir:
        prefix += ["-u", "CLAUDE_CONFIG_DIR"]
    prefix += [f"{key}={value}" for key, value in spec.env.items()]
    return (*prefix, claude)


@dataclass(frozen=True)
class McpFacts:
    """The registration as found, and everything the plan needs to change it."""

    name: str
    scope: str
    workdir: str
    claude_json_path: str
    stored: tuple[tuple[str, ServerSpec], ...]
    get: McpGet
    wanted: ServerSpec
    prefix: tuple[str, ...]
    previous: tuple[str, ...] = ()  # this profile's earlier config path (manifest), if moved

    def in_scope(self, scope: str) -> ServerSpec | None:
        return dict(self.stored).get(scope)


def claude_program(host: Host, ctx: Context) -> str:
    """The claude CLI to run: ``claude.binary``, else the one the launch runs (introspected
    now, else recorded by the last apply), else ``claude`` on tl-provision's PATH — which, for
    root or under sudo, is often not the user's (a native install in ~/.local/bin)."""
    import json

    if ctx.profile.claude.binary:
        return ctx.profile.claude.binary
    argv = getattr(ctx.launch, "argv", None)  # accept's stand-in launch holds a workdir only
    if argv:
        return str(argv[0])
    try:
        recorded = json.loads(host.read_bytes(ctx.profile.install.manifest_path) or b"{}")
        binary = recorded["claude"]["binary"]
    except (ValueError, KeyError, TypeError):
        binary = None
    found = binary if isinstance(binary, str) and binary.startswith("/") \
        else host.which("claude")
    if not found:
        raise FactError("claude not found on PATH; set claude.binary in the profile")
    return found


def workdir_of(ctx: Context) -> str | None:
    """The launch workdir: from introspection when it ran, else the profile's claude.workdir."""
    launch = ctx.launch
    for attr in ("cwd", "workdir"):
        value = getattr(launch, attr, None) if launch is not None else None
        if isinstance(value, str) and value:
            return value
    return ctx.profile.claude.workdir


def _companion_config(spec: ServerSpec | None) -> str | None:
    """The ``--config`` of a ``tl-rebuild mcp`` server spec (None: not one, or none named)."""
    if spec is None or not spec.command or not spec.command.endswith("tl-rebuild"):
        return None
    args = list(spec.args)
    if args[:1] != ["mcp"] or "--config" not in args[:-1]:
        return None
    return os.path.normpath(args[args.index("--config") + 1])


def wanted_spec(tl_rebuild: str, profile: Profile) -> ServerSpec:
    """Our server: ``tl-rebuild mcp --config CONFIG`` over stdio, no extra environment."""
    return ServerSpec("stdio", tl_rebuild, ("mcp", "--config", profile.install.config_path))


class McpServer(Task):
    """Our MCP server registered in the profile's scope with exactly our spec."""

    name = "McpServer"
    agents = CLAUDE_ONLY
    details_are_evidence = True

    def facts(self, host: Host, ctx: Context) -> McpFacts:
        profile = ctx.profile
        workdir = workdir_of(ctx)
        if workdir is None:
            if profile.mcp_scope != "user":
                raise FactError(f"mcp.scope {profile.mcp_scope!r} needs the launch workdir "
                                "(claude.workdir or introspection) and none is known")
            workdir = profile.claude.home
        claude = claude_program(host, ctx)
        whoami = host.run(["id", "-un"], timeout=10)
        prefix = claude_prefix(profile, claude, whoami.stdout.strip())
        get = host.run([*prefix, "mcp", "get", profile.mcp_name], cwd=workdir,
                       timeout=CLI_TIMEOUT)
        base = profile.claude.config_dir or profile.claude.home
        claude_json = f"{base.rstrip('/')}/.claude.json"
        mcp_json = f"{workdir.rstrip('/')}/.mcp.json"
        stored = stored_servers(profile.mcp_name, workdir, host.read_bytes(claude_json),
                                host.read_bytes(mcp_json), claude_json, mcp_json)
        return McpFacts(profile.mcp_name, profile.mcp_scope, workdir, claude_json, stored,
                        parse_mcp_get(get.rc, get.stdout, get.stderr),
                        wanted_spec(find_tl_rebuild(host, profile), profile), prefix,
                        previous_config(host, profile))

    def plan(self, facts: McpFacts, ctx: Context) -> list[Action]:
        elsewhere = [scope for scope, _ in facts.stored if scope != facts.scope]
        if facts.get.found and facts.get.scope not in dict(facts.stored):
            if facts.get.scope == facts.scope:
                raise FactError(f"claude mcp get finds {facts.name!r} in {facts.scope} scope but "
                                f"{facts.claude_json_path} holds no such entry; check HOME / "
                                "CLAUDE_CONFIG_DIR of the claude user")
            elsewhere.append(str(facts.get.scope))
        if elsewhere:
            raise McpRegistrationError(
                f"MCP server {facts.name!r} already exists in {' and '.join(elsewhere)} scope "
                f"(wanted: {facts.scope}); remove it there or set mcp.scope, nothing was removed")
        current = facts.in_scope(facts.scope)
        if current == facts.wanted:
            return []
        owner = _companion_config(current)
        if owner is not None and owner not in (_companion_config(facts.wanted),
                                               *facts.previous):
            raise McpRegistrationError(
                f"MCP server {facts.name!r} ({facts.scope} scope) belongs to another companion "
                f"(config {owner!r}); give this profile its own mcp.name, nothing was removed")
        actions: list[Action] = []
        if current is not None:
            actions.append(self._run(facts, ("remove", "--scope", facts.scope, facts.name),
                                     f"remove MCP server {facts.name!r} ({facts.scope} scope): "
                                     f"{current.describe()}"))
        add = ["add", "--transport", facts.wanted.type, "--scope", facts.scope]
        add += [f"--env={key}={value}" for key, value in facts.wanted.env]
        add += [facts.name, "--", str(facts.wanted.command), *facts.wanted.args]
        actions.append(self._run(facts, tuple(add),
                                 f"add MCP server {facts.name!r} ({facts.scope} scope): "
                                 f"{facts.wanted.describe()}"))
        return actions

    @staticmethod
    def _run(facts: McpFacts, args: tuple[str, ...], summary: str) -> RunCommand:
        return RunCommand((*facts.prefix, "mcp", *args), summary=summary, cwd=facts.workdir,
                          timeout=CLI_TIMEOUT)

    def ok_message(self, facts: McpFacts, ctx: Context) -> str:
        return (f"MCP server {facts.name!r} already registered in {facts.scope} scope "
                f"({facts.wanted.describe()})")

    def details(self, facts: McpFacts, ctx: Context) -> list[str]:
        if not facts.get.found:
            return [f"claude mcp get {facts.name}: not registered (cwd {facts.workdir})"]
        return [f"claude mcp get {facts.name}: {facts.get.scope} scope, status "
                f"{facts.get.status or 'unknown'} (cwd {facts.workdir})"]

    def diff(self, facts: McpFacts, actions: list[Action]) -> str:
        if not actions:
            return ""
        current = facts.in_scope(facts.scope)
        before = current.describe() if current else "absent"
        return (f"--- before: mcp {facts.scope} {facts.name}: {before}\n"
                f"+++ after: mcp {facts.scope} {facts.name}: {facts.wanted.describe()}\n")


# ---------------------------------------------------------------- verify over MCP

ToolLister = Callable[[Sequence[str], Mapping[str, str], str, float], tuple[str, ...]]


def list_mcp_tools(argv: Sequence[str], env: Mapping[str, str], cwd: str,
                   timeout: float = 30.0) -> tuple[str, ...]:
    """Spawn ``argv`` with the official SDK's stdio client and return the tool names it lists.

    The one process start outside provision/host.py: the SDK's client owns the server process
    (it spawns, speaks JSON-RPC over its pipes, then closes and reaps it), exactly as claude does.
    """
    import anyio
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(command=argv[0], args=list(argv[1:]), env=dict(env), cwd=cwd)

    async def ask() -> tuple[str, ...]:
        with anyio.fail_after(timeout):
            async with Client(params, read_timeout_seconds=timeout) as client:
                result = await client.list_tools()
        return tuple(tool.name for tool in result.tools)

    try:
        return anyio.run(ask)
    except TimeoutError as exc:
        raise McpRegistrationError(f"MCP server {' '.join(argv)!r} did not list its tools "
                                   f"within {timeout:g}s") from exc
    except Exception as exc:  # the SDK raises many kinds (OSError, McpError, ExceptionGroup)
        raise McpRegistrationError(f"MCP server {' '.join(argv)!r} could not be queried: "
                                   f"{exc}") from exc


@dataclass(frozen=True)
class ToolsFacts:
    """The command that was spawned and the tool names it listed."""

    argv: tuple[str, ...]
    tools: tuple[str, ...]


class McpTools(Task):
    """Verification: the registered server lists exactly our 7 tools over the real protocol."""

    name = "McpTools"
    agents = CLAUDE_ONLY

    def __init__(self, lister: ToolLister = list_mcp_tools) -> None:
        self.lister = lister

    def skip_reason(self, ctx: Context) -> str | None:
        earlier = ctx.facts_of(McpServer.name)
        if earlier is not None and earlier.in_scope(earlier.scope) != earlier.wanted:
            return (f"MCP server {earlier.name!r} is not registered as wanted in this run; "
                    "nothing to list")
        return None

    def facts(self, host: Host, ctx: Context) -> ToolsFacts:
        registration = ctx.facts_of(McpServer.name) or McpServer().facts(host, ctx)
        spec = registration.in_scope(registration.scope) or registration.wanted
        if spec.type != "stdio" or not spec.command:
            raise McpRegistrationError(f"MCP server {registration.name!r} is not a stdio "
                                       f"server: {spec.describe()}")
        runner = registration.prefix[:-1]  # [runuser …] env … HOME=… (without claude)
        argv = (*runner, *(f"{k}={v}" for k, v in spec.env), spec.command, *spec.args)
        return ToolsFacts(argv, self.lister(argv, {}, registration.workdir, 30.0))

    def plan(self, facts: ToolsFacts, ctx: Context) -> list[Action]:
        missing = sorted(set(EXPECTED_TOOLS) - set(facts.tools))
        if missing:
            raise McpRegistrationError(
                f"MCP server {' '.join(facts.argv)!r} lists {len(facts.tools)} tools, missing "
                f"{', '.join(missing)}")
        return []

    def ok_message(self, facts: ToolsFacts, ctx: Context) -> str:
        extra = sorted(set(facts.tools) - set(EXPECTED_TOOLS))
        note = f" (and {', '.join(extra)})" if extra else ""
        return f"MCP server lists its {len(EXPECTED_TOOLS)} tools over stdio{note}"


class McpServerRemoved(McpServer):
    """``tl-provision uninstall``: our MCP server unregistered from the profile's scope with
    ``claude mcp remove`` — only when the registration there is a ``tl-rebuild mcp`` of this
    profile's config (or a config path its manifest recorded); another companion's server of
    the same name, or a server the user put under that name, is left and named. A second run
    is ``ok``."""

    name = "McpServer"

    def facts(self, host: Host, ctx: Context) -> McpFacts:
        if workdir_of(ctx) is None and ctx.profile.mcp_scope != "user":
            from types import SimpleNamespace

            from provision.tasks.manifest import load_manifest

            recorded = load_manifest(host, ctx.profile)  # local/project scope: the workdir
            ctx.launch = SimpleNamespace(workdir=recorded.workdir)  # type: ignore[assignment]
        return super().facts(host, ctx)

    def plan(self, facts: McpFacts, ctx: Context) -> list[Action]:
        current = facts.in_scope(facts.scope)
        if current is None:
            return []
        owner = _companion_config(current)
        if owner is None or owner not in (_companion_config(facts.wanted), *facts.previous):
            whose = f"another companion's (config {owner!r})" if owner else "not tl-rebuild mcp"
            raise McpRegistrationError(
                f"MCP server {facts.name!r} ({facts.scope} scope) is {whose}: "
                f"{current.describe()}; nothing was removed")
        return [self._run(facts, ("remove", "--scope", facts.scope, facts.name),
                          f"remove MCP server {facts.name!r} ({facts.scope} scope): "
                          f"{current.describe()}")]

    def ok_message(self, facts: McpFacts, ctx: Context) -> str:
        return f"no MCP server {facts.name!r} in {facts.scope} scope"
