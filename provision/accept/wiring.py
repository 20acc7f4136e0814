"""The wiring stage: the Stop hook as settings.json holds it, MCP tools, argvs and channels."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from provision.accept.process import claude_argv, claude_pid, fmt_argv_diff
from provision.errors import HostError
from runtime.errors import ThreadlineError

if TYPE_CHECKING:
    from provision.accept.checklist import Checklist, Scene
    from runtime.config import Config

TOKEN = "tlaccept0session0token"  # a valid session id, replaced in both argvs to compare them


def wiring_stage(scene: Scene, out: Checklist, pause: float = 2.0,
                 sleep: Callable[[float], None] = time.sleep) -> None:
    """Hook, MCP tools, resume ≡ launch, channel flags and servers, hook persistence."""
    out.stage = "wiring"
    enabled = scene.profile.hook_enabled
    if enabled:
        with out.guard("hook in settings.json"):
            _hook_present(scene, out, "hook in settings.json")
        with out.guard("hook exits 0 on a synthetic Stop"):
            _hook_fires(scene, out)
    else:
        with out.guard("hook absent (hook.enabled is false)"):
            _hook_absent(scene, out, "hook absent (hook.enabled is false)")
        for name in ("hook exits 0 on a synthetic Stop", "hook schedules nothing"):
            out.add(name, None, "hook.enabled is false: automatic rebuilds are off")
    with out.guard("MCP lists 7 tools"):
        _mcp_tools(scene, out)
    with out.guard("resume argv ≡ launch argv"):
        _resume_equiv(scene, out)
    with out.guard("channel flags kept"):
        _channels(scene, out)
    sleep(pause)
    if enabled and scene.hook is None:  # never there: "still" cannot be judged
        out.cannot_judge("hook still present after a pause", "no Stop hook before the pause")
    elif enabled:
        with out.guard("hook still present after a pause"):
            _hook_present(scene, out, "hook still present after a pause", pause)
    else:
        with out.guard("hook still absent after a pause"):
            _hook_absent(scene, out, "hook still absent after a pause", pause)


def _hook_absent(scene: Scene, out: Checklist, name: str, pause: float | None = None) -> None:
    """With ``hook.enabled: false`` our Stop hook must not be in settings.json."""
    from provision.parsers.settings import find_stop_hook, parse_settings

    path = scene.profile.claude.settings_path
    entry = find_stop_hook(parse_settings(scene.host.read_bytes(path), path),
                           config_path=scene.profile.install.config_path)
    evidence: dict[str, Any] = {"path": path, "command": entry.get("command") if entry else None}
    if pause is not None:
        evidence["pause_s"] = pause
    out.add(name, entry is None, evidence)


def _hook_present(scene: Scene, out: Checklist, name: str, pause: float | None = None) -> None:
    from provision.parsers.settings import find_stop_hook, parse_settings

    path = scene.profile.claude.settings_path
    entry = find_stop_hook(parse_settings(scene.host.read_bytes(path), path),
                           config_path=scene.profile.install.config_path)
    wanted = scene.manifest.hook_command if scene.manifest else None
    same = entry is not None and (wanted is None or entry.get("command") == wanted)
    if pause is None:
        scene.hook = entry
    evidence: dict[str, Any] = {"path": path, "command": entry.get("command") if entry else None}
    if wanted is not None and not same:
        evidence["manifest"] = wanted
    if pause is not None:
        evidence["pause_s"] = pause
    out.add(name, same, evidence)


def store_snapshot(config: Config) -> dict[str, tuple[str, int]]:
    from runtime.switch.store import Store

    if config.state_dir is None:
        return {}
    return {op.operation_id: (op.state.value, op.revision) for op in Store(config.state_dir).all()}


def _hook_fires(scene: Scene, out: Checklist) -> None:
    name = "hook exits 0 on a synthetic Stop"
    if scene.hook is None or scene.config is None:
        out.cannot_judge(name, "no Stop hook in settings.json (or no runtime config)")
        out.cannot_judge("hook schedules nothing", "hook not run")
        return
    config = scene.config
    session = f"tl-accept-{uuid.uuid4()}"  # matches no transcript and no operation
    project = config.project_dir or "/nonexistent"
    payload = json.dumps({"session_id": session, "transcript_path": f"{project}/{session}.jsonl",
                          "cwd": str(config.workdir or "/"), "hook_event_name": "Stop",
                          "stop_hook_active": False})
    timeout = float(scene.hook.get("timeout") or 60)
    before = store_snapshot(config)
    argv = [*scene.claude_env_prefix(), "sh", "-c", str(scene.hook["command"])]
    cwd = str(config.workdir) if config.workdir and config.workdir.is_dir() else "/"
    started = time.monotonic()
    try:
        result = scene.host.run(argv, cwd=cwd, timeout=timeout, input_text=payload)
    except HostError as exc:  # a timeout: claude would have killed the hook too
        out.add(name, False, {"error": str(exc), "timeout_s": timeout})
    else:
        ms = round((time.monotonic() - started) * 1000, 1)
        out.numbers["hook_ms"] = ms
        out.add(name, result.ok, {"rc": result.rc, "ms": ms, "timeout_s": timeout,
                                  "stdout": result.stdout.strip()[:200],
                                  "stderr": result.stderr.strip()[:200]})
    schedules_nothing(out, "hook schedules nothing", before, store_snapshot(config))


def schedules_nothing(out: Checklist, name: str, before: dict[str, tuple[str, int]],
                      after: dict[str, tuple[str, int]]) -> None:
    """``name``: no operation was created or changed between the two store snapshots."""
    changed = sorted(k for k in after if before.get(k) != after[k])
    out.add(name, not changed, {"operations_before": len(before),
                                "operations_after": len(after), "changed": changed})


def _mcp_tools(scene: Scene, out: Checklist) -> None:
    from types import SimpleNamespace

    from provision.result import Context
    from provision.tasks.mcp import EXPECTED_TOOLS, McpServer, McpTools

    if scene.config is None:
        out.cannot_judge("MCP lists 7 tools", "the MCP server needs the runtime config")
        return
    ctx = Context(scene.profile, check=True)
    workdir = str(scene.config.workdir) if scene.config.workdir else None
    # McpServer reads only the launch's workdir (tasks/mcp.py: workdir_of, via getattr)
    ctx.launch = SimpleNamespace(workdir=workdir)  # type: ignore[assignment]
    ctx.facts[McpServer.name] = McpServer().facts(scene.host, ctx)
    facts = McpTools().facts(scene.host, ctx)
    missing = sorted(set(EXPECTED_TOOLS) - set(facts.tools))
    out.add("MCP lists 7 tools", not missing,
            {"tools": len(facts.tools), "missing": missing, "argv": list(facts.argv)})


def _resume_equiv(scene: Scene, out: Checklist) -> None:
    from runtime.agents.claude import format_argv, resume_argv

    name = "resume argv ≡ launch argv"
    if scene.manifest is None or scene.config is None:
        out.cannot_judge(name, "needs the manifest and the runtime config")
        return
    wanted = resume_argv(scene.manifest.launch_argv, TOKEN)
    actual = list(format_argv(scene.config.switch.resume_argv, TOKEN))
    out.add(name, actual == wanted,
            fmt_argv_diff(wanted, actual) if actual != wanted else " ".join(actual))
    pid = claude_pid(scene.config, scene.manifest.binary)
    if pid is None:
        out.add("live argv ≡ launch argv", None, "no live claude process found behind the door")
        return
    live = claude_argv(pid, scene.manifest.binary)
    try:
        normal = resume_argv(live, TOKEN)
    except ThreadlineError as exc:
        out.add("live argv ≡ launch argv", False, {"pid": pid, "error": str(exc)})
        return
    out.add("live argv ≡ launch argv", normal == wanted,
            {"pid": pid, "argv": live} if normal == wanted else fmt_argv_diff(wanted, normal))


def _channels(scene: Scene, out: Checklist) -> None:
    from provision.tasks.verify import missing_channel_flags
    from runtime.agents.claude import dev_channel_servers

    if scene.manifest is None or scene.config is None:
        out.cannot_judge("channel flags kept", "needs the manifest and the runtime config")
        return
    resume = tuple(scene.config.switch.resume_argv)
    pid = claude_pid(scene.config, scene.manifest.binary)
    live = tuple(claude_argv(pid, scene.manifest.binary)) if pid else ()
    base = live or scene.manifest.launch_argv
    missing = missing_channel_flags(base, resume)
    configured = [f for f in scene.manifest.channel_flags if f not in resume]
    out.add("channel flags kept", not missing and not configured,
            {"source": "live process" if live else "manifest launch argv",
             "missing": missing + configured,
             "flags": list(scene.manifest.channel_flags)})
    servers = dev_channel_servers(base)
    if not servers:
        out.add("server channels registered", None, "no server:NAME development channel")
    workdir = str(scene.config.workdir or scene.profile.claude.home)
    for server in servers:
        scopes = _stored_scopes(scene, server, workdir)
        out.add(f"server channels registered [{server}]", bool(scopes),
                {"scopes": scopes} if scopes else "not in .claude.json (user/local) "
                                                  "nor in WORKDIR/.mcp.json")


def _stored_scopes(scene: Scene, name: str, workdir: str) -> list[str]:
    """Scopes whose stored MCP config holds ``name`` — read from the files, never by
    ``claude mcp get``, which starts the server to probe it (a Telegram bridge would consume
    the bot's updates: SPEC §6)."""
    from provision.tasks.mcp import stored_servers

    spec = scene.profile.claude
    claude_json = f"{(spec.config_dir or spec.home).rstrip('/')}/.claude.json"
    mcp_json = f"{workdir.rstrip('/')}/.mcp.json"
    found = stored_servers(name, workdir, scene.host.read_bytes(claude_json),
                           scene.host.read_bytes(mcp_json), claude_json, mcp_json)
    return [scope for scope, _ in found]
