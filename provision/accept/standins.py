"""Harmless stand-ins for the deployment's channel servers, registered in the drill's scratch.

The drill must prove what the real switch will check: the health check recognises each expected
channel server from its registration (runtime/servers.py). So the scratch claude gets, under the
**same names**, registrations with the **same argv shape** as the real ones — the same number of
arguments, the same env names — but the program is ``standin_server.py`` (a silent stdio MCP
server, stdlib only), every argument is a neutral placeholder and every env value a dummy. The
user's real servers never start (a drill once stole a Telegram token) and none of their secrets
(arguments, env values) is copied. A deployment whose health check cannot recognise its channels
then fails the drill with the health check's own reason, not its first real switch.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

SERVER = Path(__file__).with_name("standin_server.py")
DUMMY = "tl-drill-stand-in"


def standin_spec(real: Any, index: int) -> dict[str, Any]:
    """A registration shaped like ``real`` (a runtime.channels.ServerSpec) that runs nothing real.

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
    too). Plugin channels are skipped: the scratch installs no plugin.
    """
    from runtime.channels import registrations

    real = registrations(real_json, real_mcp_json, real_workdir, env)
    servers: dict[str, Any] = {}
    missing: dict[str, str] = {}
    for index, channel in enumerate(expected):
        if channel.startswith("plugin:"):
            continue  # the scratch installs no plugin: not drilled (see drill.py)
        name = channel.removeprefix("server:")
        spec = real.get(name)
        if spec is None:
            missing[channel] = f"{name!r} is not a registered stdio server of the deployment"
            continue
        servers[name] = standin_spec(spec, index)
    return servers, missing
