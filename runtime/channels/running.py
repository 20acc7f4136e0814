"""Which expected channel servers run under a claude process, recognised by what they are.

An expected channel is ``NAME`` / ``server:NAME`` (an MCP registration) or ``plugin:P@M`` (an
installed plugin). The registration is read where *that* claude reads it: its own environment
(``/proc/PID/environ``) says ``CLAUDE_CONFIG_DIR`` / ``HOME``, its cwd picks the local scope and
``.mcp.json``. The processes come from runtime/procfs.py; the matching is
runtime/channels/registry.py.
Each channel ends ``running``, ``absent`` or ``not_verifiable`` (with the reason): never a silent
skip, never a guess. Evidence holds argv and env *names* only, never env values (tokens).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runtime import procfs as ident
from runtime.channels import registry as ch

RUNNING, ABSENT, NOT_VERIFIABLE = "running", "absent", "not_verifiable"
MAX_CONFIG_BYTES = 16 << 20
MAX_SCRIPT_BYTES = 64 << 10


@dataclass
class Expected:
    """What one channel should show: the specs claude starts for it, or why we cannot tell."""

    channel: str
    specs: list[ch.ServerSpec] = field(default_factory=list)
    problem: str = ""          # set: the channel cannot be running (absent) or be checked
    verifiable: bool = True


def _read(path: Path) -> str | None:
    try:
        with open(path, "rb") as handle:
            return handle.read(MAX_CONFIG_BYTES).decode("utf-8", "replace")
    except OSError:
        return None


EMPTY_ENVIRON_WAIT = 0.5  # a process caught between fork and exec shows an empty environ


def claude_environment(pid: int) -> tuple[dict[str, str], str]:
    """The environment claude ``pid`` runs with, and where it came from.

    Right after a start, ``/proc/PID/environ`` can read empty for a moment (measured: about
    one start in three read at once after ``Popen`` returns); claude never runs with an empty
    environment, so an empty read is retried for a bounded moment before it is believed.
    """
    deadline = time.monotonic() + EMPTY_ENVIRON_WAIT
    env = ident.environ(pid)
    while env == {} and time.monotonic() < deadline:
        time.sleep(0.01)
        env = ident.environ(pid)
    if env is not None:
        return env, "process"
    return dict(os.environ), "worker"  # unreadable (another user): the worker's own


def config_paths(env: Mapping[str, str]) -> tuple[Path, Path]:
    """(config dir, .claude.json) as Claude Code 2.1.328 picks them (measured)."""
    custom = env.get("CLAUDE_CONFIG_DIR")
    if custom:
        return Path(custom), Path(custom) / ".claude.json"
    home = Path(env.get("HOME") or os.path.expanduser("~"))
    return home / ".claude", home / ".claude.json"


def resolve(pid: int, channels: Sequence[str]) -> tuple[list[Expected], dict[str, str]]:
    """The expectations for ``channels`` as claude ``pid`` sees them, and where they came from."""
    env, env_source = claude_environment(pid)
    config_dir, claude_json = config_paths(env)
    cwd = ident.cwd(pid) or env.get("PWD", "")
    where = {"environment": env_source, "claude_json": str(claude_json), "cwd": cwd}
    registered = ch.registrations(_read(claude_json), _read(Path(cwd) / ".mcp.json"), cwd, env)
    found = []
    for channel in channels:
        if channel.startswith("plugin:"):
            found.append(plugin_expected(channel, config_dir, env, env_source))
            continue
        name = channel.removeprefix("server:")
        spec = registered.get(name)
        if spec is None:
            found.append(Expected(channel, problem=f"{name!r} is not a stdio server registered in "
                                  f"{str(claude_json)!r} or {cwd!r}/.mcp.json"))
        else:
            found.append(Expected(channel, [_with_script(spec, env)]))
    return found, where


def _with_script(spec: ch.ServerSpec, env: Mapping[str, str]) -> ch.ServerSpec:
    """``spec`` plus what its command execs when the command is a wrapper shell script."""
    path = spec.command if "/" in spec.command else shutil.which(
        spec.command, path=env.get("PATH"))
    if not path or not os.path.isfile(path):
        return spec
    try:
        with open(path, "rb") as handle:
            text = handle.read(MAX_SCRIPT_BYTES).decode("utf-8", "replace")
    except OSError:
        return spec
    forms = ch.script_forms(text, spec.args, env)
    return dataclasses.replace(spec, exec_forms=tuple(forms)) if forms else spec


def plugin_expected(channel: str, config_dir: Path, env: Mapping[str, str],
                    env_source: str = "process",
                    read: Callable[[Path], str | None] = _read) -> Expected:
    """What ``plugin:P@M`` should show under a claude whose config dir is ``config_dir``.

    ``read``: how files are read (the drill reads the deployment's through provision's host).
    """
    plugin = channel.removeprefix("plugin:")
    installed = config_dir / "plugins" / "installed_plugins.json"
    cached = ch.plugin_root(read(installed), plugin)
    roots = [cached] if cached else []
    market = ch.marketplace_dir(read(config_dir / "plugins" / "known_marketplaces.json"), plugin)
    if market:
        listing = read(Path(market) / ".claude-plugin" / "marketplace.json")
        in_place = ch.in_place_root(listing, market, plugin)
        if in_place:
            roots.insert(0, in_place)  # claude runs a directory marketplace's plugin in place
    if not roots:
        return Expected(channel, verifiable=False,
                        problem=f"plugin {plugin!r} has no installPath in {str(installed)!r}")
    manifest = next((text for root in roots
                     if (text := read(Path(root) / ".mcp.json")) is not None), None)
    specs = ch.plugin_servers(manifest, plugin, roots, env)
    if not specs:
        return Expected(channel, verifiable=False,
                        problem=f"plugin {plugin!r} declares no stdio server in "
                                f"{roots[0]}/.mcp.json")
    if env_source != "process":
        return Expected(channel, specs, verifiable=False,
                        problem="the new claude's environment is unreadable, so its plugin "
                                "servers cannot be told apart")
    return Expected(channel, specs)


def processes_below(pid: int) -> list[ch.Proc]:
    """Every live descendant of ``pid`` with argv and (when readable) environment."""
    return [ch.Proc(child, parent, ident.cmdline(child) or (), ident.environ(child))
            for child, parent in ident.descendant_pairs(pid)]


def look(pid: int, expected: Sequence[Expected],
         session_id: str | None) -> dict[str, dict[str, Any]]:
    """One look: per channel its status, the pids recognised and the reason."""
    procs = processes_below(pid) if expected else []
    result: dict[str, dict[str, Any]] = {}
    for want in expected:
        if want.problem and (not want.verifiable or not want.specs):
            status = NOT_VERIFIABLE if not want.verifiable else ABSENT
            result[want.channel] = {"status": status, "pids": [], "reason": want.problem}
            continue
        pids: list[int] = []
        for spec in want.specs:
            pids.extend(ch.outermost(ch.recognise(spec, procs, session_id), procs))
        result[want.channel] = {
            "status": RUNNING if pids else ABSENT, "pids": sorted(set(pids)),
            "servers": [{"name": s.name, "scope": s.scope, "argv": list(s.argv),
                         "env_names": [k for k, _ in s.env]} for s in want.specs],
        }
    return result
