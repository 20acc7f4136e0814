"""The drill's channel-server stand-ins: same names and argv shape, nothing real, no secrets."""

from __future__ import annotations

import json
import subprocess
import sys

from provision.accept.standins import DUMMY, SERVER, standins

REAL = json.dumps({"mcpServers": {
    "companion": {"type": "stdio", "command": "python3",
                  "args": ["/opt/companion/server.py", "--token", "s3cr3t"],
                  "env": {"BOT_TOKEN": "123:ABC"}},
    "notes": {"type": "stdio", "command": "node", "args": ["/opt/notes.js"]},
}})


def test_each_expected_server_gets_a_stand_in_of_the_same_shape_without_its_secrets() -> None:
    servers, missing = standins(("companion", "plugin:tg@mkt", "server:ghost"), REAL, None,
                                "/srv/app", {})
    assert list(servers) == ["companion"]  # only what is expected and registered
    spec = servers["companion"]
    assert spec["command"] == sys.executable and spec["args"][0] == str(SERVER)
    assert len(spec["args"]) - 1 == 3  # one placeholder per real argument
    assert spec["env"] == {"BOT_TOKEN": DUMMY}
    text = json.dumps(servers)
    assert "s3cr3t" not in text and "123:ABC" not in text and "/opt/companion" not in text
    assert not any("companion" in token for token in spec["args"])
    assert missing == {"server:ghost": "'ghost' is not a registered stdio server of the "
                                       "deployment"}


def test_the_stand_in_server_answers_mcp_and_exits_at_eof() -> None:
    lines = [{"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18"}},
             {"jsonrpc": "2.0", "method": "notifications/initialized"},
             {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}]
    done = subprocess.run([sys.executable, str(SERVER), "--drill-arg-0-0"], timeout=30,
                          input="\n".join(json.dumps(x) for x in lines) + "\n",
                          capture_output=True, text=True)
    replies = [json.loads(x) for x in done.stdout.splitlines()]
    assert done.returncode == 0
    assert replies[0]["result"]["capabilities"]["experimental"] == {"claude/channel": {}}
    assert replies[1] == {"jsonrpc": "2.0", "id": 2, "result": {"tools": []}}
