"""Verify on a Codex host (issue 17): ``codex mcp list --json`` must list our server with the
merged command; a server missing or pointing elsewhere fails the check, naming what codex saw.
The JSON shapes are those of the real codex 0.169 (tests/e2e/test_codex_provision.py)."""

from __future__ import annotations

import json

from provision.parsers.codex_config import Wanted, merge
from provision.profile import profile_from_mapping
from provision.result import Context
from provision.tasks.codex_config import CodexConfig
from provision.tasks.verify import codex_checks
from tests.fakes import FakeHost

TL = "/opt/tl/bin/tl-rebuild"
CFG = "/etc/threadline/codex.toml"
CODEX = "/opt/codex/node_modules/.bin/codex"
LIST = (CODEX, "mcp", "list", "--json")


def _world(listed: list[dict]) -> tuple[FakeHost, Context]:
    text = merge('model = "m"\n', Wanted(TL, CFG), "/c/config.toml")
    host = FakeHost(files={TL: b"#!/bin/sh\n", "/c/config.toml": text.encode()},
                    executables={TL, CODEX})
    host.add_command(LIST, json.dumps(listed))
    ctx = Context(profile=profile_from_mapping({
        "host": "h", "agent": "codex", "codex": {"user": "codex", "home": "/c"},
        "door": {"kind": "tmux", "tmux": {"target": "codex:0.0"}},
        "install": {"config_path": CFG, "state_dir": "/var/lib/tl", "prefix": "/opt/tl"}}))
    ctx.facts["CodexConfig"] = CodexConfig().facts(host, ctx)
    return host, ctx


def _server(name: str, command: str, args: list[str]) -> dict:
    """One entry as codex 0.169 prints it (captured from the real CLI)."""
    return {"name": name, "enabled": True, "disabled_reason": None, "transport": {
        "type": "stdio", "command": command, "args": args, "env": None, "env_vars": [],
        "cwd": None}, "startup_timeout_sec": None, "tool_timeout_sec": None,
        "auth_status": "unsupported"}


def test_our_server_listed_by_codex_passes() -> None:
    host, ctx = _world([_server("threadline", TL, ["mcp", "--config", CFG])])
    checks = codex_checks(host, ctx, CODEX)
    assert [(c.name, c.passed) for c in checks] == [
        ("tl-rebuild runs as codex", True), ("codex mcp list shows threadline", True)]
    assert LIST in host.ran


def test_a_server_codex_does_not_list_fails_naming_what_it_listed() -> None:
    host, ctx = _world([_server("github", "npx", ["-y", "x"])])
    check = codex_checks(host, ctx, CODEX)[-1]
    assert not check.passed and check.evidence == "not listed (servers: github)"


def test_a_server_pointing_elsewhere_fails_with_its_command() -> None:
    host, ctx = _world([_server("threadline", "/old/tl-rebuild", ["mcp"])])
    check = codex_checks(host, ctx, CODEX)[-1]
    assert not check.passed and check.evidence == "/old/tl-rebuild mcp"
