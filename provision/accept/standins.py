"""Harmless stand-ins for the deployment's channel servers, registered in the drill's scratch.

The drill must prove what the real switch will check: the health check recognises each expected
channel server from its registration (runtime/channels/running.py). So the scratch claude gets,
under the
**same names**, registrations with the **same argv shape** as the real ones — the same number of
arguments, the same env names — but the program is ``standin_server.py`` (a silent stdio MCP
server, stdlib only), every argument is a neutral placeholder and every env value a dummy. The
user's real servers never start (a drill once stole a Telegram token) and none of their secrets
(arguments, env values) is copied. A deployment whose health check cannot recognise its channels
then fails the drill with the health check's own reason, not its first real switch.

A plugin channel (``plugin:P@M``) gets a stand-in **plugin** laid out as Claude Code 2.1.328
installs one (measured with ``claude plugin install``): ``plugins/installed_plugins.json``
(version 2, ``installPath`` = ``plugins/cache/M/P/VERSION``), ``plugins/known_marketplaces.json``
and the marketplace folder with ``.claude-plugin/marketplace.json``, the plugin's
``.claude-plugin/plugin.json`` and ``.mcp.json`` (the real manifest's server keys, each a
stand-in of the same shape), and ``enabledPlugins`` / ``extraKnownMarketplaces`` in
settings.json. The marketplace keeps the real one's kind: a directory marketplace runs its
plugin in place (so the health check must find it there, as for the real one); any other kind
(github, git) keeps its public source without credentials and runs from the cache copy. Without
the marketplace entry claude 2.1.328 starts no plugin server (measured); a directory
marketplace may not take an official name such as ``claude-plugins-official`` (measured:
nothing starts).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

SERVER = Path(__file__).with_name("standin_server.py")
DUMMY = "tl-drill-stand-in"


def standin_spec(real: Any, index: int) -> dict[str, Any]:
    """A registration shaped like ``real`` (a runtime.channels.registry.ServerSpec) that runs
    nothing real.

    The argv is ``python standin_server.py ARG…`` with one placeholder per real argument
    (``--drill-arg-<index>-<n>``: unique per server, never the registration name).
    """
    args = [str(SERVER), *(f"--drill-arg-{index}-{n}" for n in range(len(real.args)))]
    return {"type": "stdio", "command": sys.executable, "args": args,
            "env": {name: DUMMY for name, _ in real.env}}


def standins(expected: Sequence[str], real_json: str | None, real_mcp_json: str | None,
             real_workdir: str, env: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    """(``mcpServers`` for the scratch ``.claude.json``, channel → why it has no stand-in).

    ``expected`` holds ``NAME`` / ``server:NAME`` / ``plugin:P@M``; only registered stdio
    servers get a stand-in; an unregistered name is reported (the drill's health check says so
    too). Plugin channels are skipped here: ``plugin_standins`` lays them out.
    """
    from runtime.channels.registry import registrations

    real = registrations(real_json, real_mcp_json, real_workdir, env)
    servers: dict[str, Any] = {}
    missing: dict[str, str] = {}
    for index, channel in enumerate(expected):
        if channel.startswith("plugin:"):
            continue  # a stand-in plugin instead (plugin_standins)
        name = channel.removeprefix("server:")
        spec = real.get(name)
        if spec is None:
            missing[channel] = f"{name!r} is not a registered stdio server of the deployment"
            continue
        servers[name] = standin_spec(spec, index)
    return servers, missing


CREDENTIALS = re.compile(r"(//)[^/@]*@")  # user:token@ in a git URL


def _public(source: dict[str, Any]) -> dict[str, str]:
    """A marketplace source with its string fields only, URL credentials removed."""
    return {str(k): CREDENTIALS.sub(r"\1", v) for k, v in source.items() if isinstance(v, str)}


def plugin_standins(plugins: Sequence[tuple[str, Sequence[Any], Any, str]], claude_dir: str,
                    market_base: str, now: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(JSON files by absolute path, settings.json additions) of stand-in plugins.

    ``plugins``: (``P@M``, the real plugin's ServerSpecs, the real known_marketplaces entry of
    M, the installed version) per plugin channel; ``claude_dir`` is the scratch config dir,
    ``market_base`` where directory marketplaces go, ``now`` the install timestamp.
    """
    files: dict[str, Any] = {}
    installed: dict[str, Any] = {}
    known: dict[str, Any] = {}
    settings: dict[str, Any] = {"enabledPlugins": {}, "extraKnownMarketplaces": {}}
    for index, (plugin, specs, real_entry, version) in enumerate(plugins):
        name, _, market = plugin.partition("@")
        entry = real_entry if isinstance(real_entry, dict) else {}
        directory = isinstance(entry.get("source"), dict) and \
            entry["source"].get("source") == "directory"
        folder = (f"{market_base}/{market}" if directory
                  else f"{claude_dir}/plugins/marketplaces/{market}")
        source = ({"source": "directory", "path": folder} if directory
                  else _public(entry["source"]) if isinstance(entry.get("source"), dict)
                  else None)
        manifest = {"mcpServers": {spec.name.split(":", 2)[2]: standin_spec(spec, 100 + index)
                                   for spec in specs}}
        meta = {"name": name, "version": version, "description": DUMMY}
        cache = f"{claude_dir}/plugins/cache/{market}/{name}/{version}"
        for root in (cache, f"{folder}/plugins/{name}"):
            files[f"{root}/.claude-plugin/plugin.json"] = meta
            files[f"{root}/.mcp.json"] = manifest
        listing = files.setdefault(f"{folder}/.claude-plugin/marketplace.json", {
            "name": market, "owner": {"name": DUMMY}, "plugins": []})
        listing["plugins"].append({"name": name, "source": f"./plugins/{name}",
                                   "version": version})
        installed[plugin] = [{"scope": "user", "installPath": cache, "version": version,
                              "installedAt": now, "lastUpdated": now}]
        settings["enabledPlugins"][plugin] = True
        if source is not None:  # the real one has none: claude starts nothing, as there
            known[market] = {"source": source, "installLocation": folder, "lastUpdated": now}
            settings["extraKnownMarketplaces"][market] = {"source": source}
    if plugins:
        files[f"{claude_dir}/plugins/installed_plugins.json"] = {"version": 2,
                                                                 "plugins": installed}
        files[f"{claude_dir}/plugins/known_marketplaces.json"] = known
    return files, settings
