"""Verify on a Codex host (issue 17): ``codex mcp list --json`` must list our server with the
merged command; a server missing or pointing elsewhere fails the check, naming what codex saw.
The JSON shapes are those of the real codex 0.169 (tests/e2e/test_codex_provision.py).
And RestartClaude's line on a Codex host: restart codex by hand unless the live codex already
runs our MCP server (a running codex reads config.toml only at start)."""

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


def test_a_codex_on_the_shared_daemon_fails_naming_the_fix_and_own_servers_pass() -> None:
    from provision.tasks.verify import own_server_check

    plain = own_server_check((CODEX, "-m", "gpt-5", "--cd", "/w"))
    assert not plain.passed and "add --no-daemon to the codex command" in plain.evidence
    resumed = own_server_check((CODEX, "resume", "abc", "-m", "gpt-5"))
    assert not resumed.passed
    for argv, option in [((CODEX, "--no-daemon", "-m", "gpt-5"), "--no-daemon"),
                         ((CODEX, "resume", "abc", "--no-daemon"), "--no-daemon"),
                         ((CODEX, "-c", "model_auto_compact_token_limit=9"), "-c"),
                         ((CODEX, "-ck=v"), "-c"), ((CODEX, "--config=k=v"), "--config"),
                         (("node", CODEX, "--config", "k=v", "hi"), "--config")]:
        check = own_server_check(argv)
        assert check.passed and check.evidence == f"launched with {option}", argv
    # a prompt that merely mentions the option is not the option
    assert not own_server_check((CODEX, "--", "--no-daemon")).passed
    broken = own_server_check((CODEX, "--frobnicate"))
    assert not broken.passed and "'--frobnicate' is not one codex 0.169.0 knows" in broken.evidence


def _live(host: FakeHost, ctx: Context, tree: dict[int, list[int]],
          argv: dict[int, tuple[str, ...]]) -> str:
    """RestartClaude's line on a Codex host whose live codex (pid 10) has these children."""
    from provision.introspect import Launch, LiveProcess
    from provision.tasks.launcher import RestartClaude
    from runtime.doors.kind import DoorKind

    for pid, children in tree.items():
        host.files[f"/proc/{pid}/task/{pid}/children"] = " ".join(map(str, children)).encode()
    for pid, args in argv.items():
        host.files[f"/proc/{pid}/cmdline"] = b"".join(a.encode() + b"\0" for a in args)
    ctx.launch = Launch(DoorKind.TMUX, "tmux pane", (CODEX, "--no-daemon"), "/w",
                        live=LiveProcess(10, (CODEX, "--no-daemon"), "/w"))
    task = RestartClaude()
    assert task.skip_reason(ctx) is None
    facts = task.facts(host, ctx)
    assert task.plan(facts, ctx) == []  # nothing is ever restarted on a Codex host
    return task.ok_message(facts, ctx)


def test_a_live_codex_without_our_mcp_server_must_be_restarted_and_apply_says_so() -> None:
    host, ctx = _world([])
    line = _live(host, ctx, {10: [11], 11: [12]},
                 {11: ("/opt/codex/native/codex", "--no-daemon"),
                  12: ("python3", "/other/tl-rebuild", "mcp", "--config", CFG)})
    assert line.startswith("restart codex (pid 10, e.g. with the resume argv) for the merged "
                           "/c/config.toml to take effect: a running codex reads notify and "
                           "[mcp_servers] only at start"), line
    assert "\n" not in line


def test_a_live_codex_running_our_mcp_server_needs_no_restart() -> None:
    host, ctx = _world([])
    line = _live(host, ctx, {10: [11], 11: [12]},  # npm wrapper → native codex → our server
                 {11: ("/opt/codex/native/codex", "--no-daemon"),
                  12: ("/usr/bin/python3", TL, "mcp", "--config", CFG)})
    assert line == ("nothing to restart: the live codex (pid 10) runs our MCP server (pid 12), "
                    "so it started from the merged /c/config.toml")
