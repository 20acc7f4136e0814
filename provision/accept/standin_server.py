"""A silent stdio MCP server: the drill's stand-in for a deployment's channel server.

It answers ``initialize`` (declaring the ``claude/channel`` capability), empty lists and pings,
never pushes anything, reads no file, opens no socket, ignores its arguments and environment,
and exits when claude closes its stdin. Stdlib only.
"""

from __future__ import annotations

import json
import sys

LISTS = {"tools/list": "tools", "resources/list": "resources",
         "resources/templates/list": "resourceTemplates", "prompts/list": "prompts"}


def answer(message: dict[str, object]) -> dict[str, object] | None:
    """The reply to one JSON-RPC message (None for notifications)."""
    ident, method = message.get("id"), message.get("method")
    if ident is None:
        return None
    if method == "initialize":
        params = message.get("params")
        version = params.get("protocolVersion") if isinstance(params, dict) else None
        result: dict[str, object] = {
            "protocolVersion": version or "2025-06-18",
            "capabilities": {"experimental": {"claude/channel": {}}, "tools": {}},
            "serverInfo": {"name": "tl-drill-stand-in", "version": "1"}}
    elif method in LISTS:
        result = {LISTS[str(method)]: []}
    elif method == "ping":
        result = {}
    else:
        return {"jsonrpc": "2.0", "id": ident,
                "error": {"code": -32601, "message": f"method not found: {method}"}}
    return {"jsonrpc": "2.0", "id": ident, "result": result}


def main() -> int:
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        reply = answer(message) if isinstance(message, dict) else None
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
