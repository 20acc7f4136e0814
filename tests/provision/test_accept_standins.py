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


def _plugin_specs(manifest: dict, root: str) -> list:
    from runtime.channels.registry import plugin_servers

    return plugin_servers(json.dumps(manifest), "tg@mkt", [root], {})


def test_a_plugin_stand_in_is_laid_out_as_claude_installs_one_without_secrets() -> None:
    from provision.accept.standins import plugin_standins

    manifest = {"mcpServers": {"bot": {"command": "bun", "args": [
        "run", "--cwd", "${CLAUDE_PLUGIN_ROOT}", "start"], "env": {"BOT_TOKEN": "123:ABC"}}}}
    specs = _plugin_specs(manifest, "/real/cache/mkt/tg/1.2.0")
    real = {"source": {"source": "git", "url": "https://bob:ghp_s3cr3t@git.example/mkt.git"},
            "installLocation": "/real/marketplaces/mkt", "lastUpdated": "x"}
    files, settings = plugin_standins([("tg@mkt", specs, real, "1.2.0")], "/s/cfg", "/s/market",
                                      "2026-12-04T00:00:00.000Z")
    cache = "/s/cfg/plugins/cache/mkt/tg/1.2.0"
    installed = files["/s/cfg/plugins/installed_plugins.json"]
    assert installed["version"] == 2
    assert [e["installPath"] for e in installed["plugins"]["tg@mkt"]] == [cache]
    known = files["/s/cfg/plugins/known_marketplaces.json"]["mkt"]
    assert known["source"] == {"source": "git", "url": "https://git.example/mkt.git"}
    assert known["installLocation"] == "/s/cfg/plugins/marketplaces/mkt"
    assert files[f"{cache}/.claude-plugin/plugin.json"]["name"] == "tg"
    server = files[f"{cache}/.mcp.json"]["mcpServers"]["bot"]  # the real key
    assert server["command"] == sys.executable and server["args"][0] == str(SERVER)
    assert len(server["args"]) - 1 == 4 and server["env"] == {"BOT_TOKEN": DUMMY}
    listing = files["/s/cfg/plugins/marketplaces/mkt/.claude-plugin/marketplace.json"]
    assert listing["plugins"] == [{"name": "tg", "source": "./plugins/tg", "version": "1.2.0"}]
    assert settings == {"enabledPlugins": {"tg@mkt": True},
                        "extraKnownMarketplaces": {"mkt": {"source": known["source"]}}}
    text = json.dumps([files, settings])
    assert "ghp_s3cr3t" not in text and "123:ABC" not in text and "/real/" not in text


def test_a_directory_marketplace_stand_in_runs_in_place_like_the_real_one() -> None:
    from provision.accept.standins import plugin_standins
    from runtime.channels.registry import in_place_root, marketplace_dir

    specs = _plugin_specs({"mcpServers": {"b": {"command": "sh", "args": ["-c", "x"]}}}, "/m/p")
    real = {"source": {"source": "directory", "path": "/home/u/market"},
            "installLocation": "/home/u/market", "lastUpdated": "x"}
    files, _ = plugin_standins([("tg@mkt", specs, real, "1.0.0")], "/s/cfg", "/s/market", "t")
    known = files["/s/cfg/plugins/known_marketplaces.json"]
    assert known["mkt"]["source"] == {"source": "directory", "path": "/s/market/mkt"}
    # what the health check derives from these files: the in-place root, holding the manifest
    folder = marketplace_dir(json.dumps(known), "tg@mkt")
    listing = json.dumps(files[f"{folder}/.claude-plugin/marketplace.json"])
    root = in_place_root(listing, str(folder), "tg@mkt")
    assert root == "/s/market/mkt/plugins/tg" and f"{root}/.mcp.json" in files


def test_a_plugin_without_a_known_marketplace_keeps_that_shape() -> None:
    from provision.accept.standins import plugin_standins

    specs = _plugin_specs({"mcpServers": {"b": {"command": "x"}}}, "/m/p")
    files, settings = plugin_standins([("tg@mkt", specs, None, "1.0.0")], "/c", "/m", "t")
    assert files["/c/plugins/known_marketplaces.json"] == {}
    assert settings["extraKnownMarketplaces"] == {} and settings["enabledPlugins"]["tg@mkt"]
