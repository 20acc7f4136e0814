"""Channel registrations parsed as claude reads them, and argv trees matched token for token."""

from __future__ import annotations

import json

import pytest

from runtime.channels.registry import (
    Proc,
    ServerSpec,
    argv_matches,
    expand,
    in_place_root,
    marketplace_dir,
    outermost,
    plugin_root,
    plugin_servers,
    recognise,
    registrations,
    script_forms,
    spawn_forms,
)

CWD = "/srv/work dir"
# What `claude mcp add` (2.1.328) wrote, captured: user scope at the top, local under projects.
CLAUDE_JSON = json.dumps({
    "mcpServers": {
        "companion": {"type": "stdio", "command": "python3",
                      "args": ["/opt/companion/server.py", "--port", "8765"], "env": {}},
        "shadowed": {"type": "stdio", "command": "user-version", "args": [], "env": {}},
        "remote": {"type": "http", "url": "http://127.0.0.1:1/mcp"},
    },
    "projects": {CWD: {"mcpServers": {
        "shadowed": {"type": "stdio", "command": "local-version", "args": ["-x"],
                     "env": {"TOKEN": "${SECRET:-none}"}}}}},
})
MCP_JSON = json.dumps({"mcpServers": {"proj": {"command": "node", "args": ["${HOME}/p.js"]}}})


def test_user_local_and_project_scopes_are_read_with_local_winning() -> None:
    found = registrations(CLAUDE_JSON, MCP_JSON, CWD, {"HOME": "/home/u"})
    assert found["companion"].argv == ("python3", "/opt/companion/server.py", "--port", "8765")
    assert found["companion"].scope == "user"
    assert found["shadowed"].argv == ("local-version", "-x")
    assert found["shadowed"].env == (("TOKEN", "none"),)
    assert found["proj"].argv == ("node", "/home/u/p.js") and found["proj"].scope == "project"
    assert "remote" not in found  # no process to recognise


def test_the_local_scope_of_another_directory_does_not_count() -> None:
    found = registrations(CLAUDE_JSON, None, "/elsewhere", {})
    assert found["shadowed"].argv == ("user-version",)


def test_broken_or_missing_config_files_give_no_registrations() -> None:
    assert registrations("{not json", None, CWD, {}) == {}
    assert registrations(None, "[]", CWD, {}) == {}


def test_variables_expand_with_defaults_and_unknown_ones_stay() -> None:
    assert expand("${A}/${B:-dflt}/${C}", {"A": "a"}) == "a/dflt/${C}"


def test_a_plugin_server_is_found_from_installed_plugins_and_its_manifest() -> None:
    installed = json.dumps({"version": 2, "plugins": {"tg@mkt": [
        {"scope": "user", "installPath": "/cfg/plugins/cache/mkt/tg/1.0.0", "version": "1.0.0"}]}})
    root = plugin_root(installed, "tg@mkt")
    assert root == "/cfg/plugins/cache/mkt/tg/1.0.0"
    assert plugin_root(installed, "other@mkt") is None
    manifest = json.dumps({"mcpServers": {"telegram": {
        "command": "bun", "args": ["run", "--cwd", "${CLAUDE_PLUGIN_ROOT}", "start"]}}})
    [spec] = plugin_servers(manifest, "tg@mkt", [root], {})
    assert spec.name == "plugin:tg:telegram" and spec.plugin_roots == (root,)
    assert spec.args == ("run", "--cwd", root, "start")


@pytest.mark.parametrize(("form", "argv"), [
    (("python3", "/opt/s.py", "--x"), ("python3", "/opt/s.py", "--x")),
    (("python3", "/opt/s.py"), ("/root/.pyenv/versions/3.11.7/bin/python3", "/opt/s.py")),
    (("/opt/run.sh", "--spool", "/d"), ("/bin/sh", "/opt/run.sh", "--spool", "/d")),
    (("run.sh", "a"), ("/usr/bin/env", "bash", "/usr/local/bin/run.sh", "a")),
])
def test_an_argv_matches_as_the_kernel_shows_the_registration(
        form: tuple[str, ...], argv: tuple[str, ...]) -> None:
    assert argv_matches(form, argv)


@pytest.mark.parametrize(("form", "argv"), [
    (("python3", "/opt/s.py"), ("grep", "companion", "/opt/s.py")),
    (("python3", "/opt/s.py", "--port", "1"), ("python3", "/opt/s.py", "--port", "2")),
    (("python3", "/opt/s.py"), ("python3", "/opt/s.py.bak")),
    (("python3", "/opt/s.py"), ("vim", "-c", "x", "python3", "/opt/s.py")),
    (("/opt/run.sh",), ("/bin/sh", "/other/run.sh")),
])
def test_an_argv_that_merely_mentions_the_registration_does_not_match(
        form: tuple[str, ...], argv: tuple[str, ...]) -> None:
    assert not argv_matches(form, argv)


def test_wrappers_are_seen_through_env_sh_c_and_uv_run() -> None:
    assert ("python3", "s.py", "--a") in spawn_forms(("env", "A=1", "-u", "B", "python3", "s.py",
                                                      "--a"))
    forms = spawn_forms(("sh", "-c", 'cd "/opt/x y" && exec python3 server.py --v', "sh"))
    assert ("python3", "server.py", "--v") in forms
    assert ("python3", "server.py") in spawn_forms(("uv", "run", "--quiet", "python3",
                                                     "server.py"))
    assert ("server.js", "1") in spawn_forms(("bash", "-c", 'exec "$@"', "bash", "server.js",
                                              "1"))


def test_a_directory_marketplace_runs_its_plugin_in_place() -> None:
    # known_marketplaces.json and marketplace.json as 2.1.328 wrote / read them (captured).
    known = json.dumps({"offline-mkt": {"source": {"source": "directory", "path": "/m"},
                                        "installLocation": "/m", "lastUpdated": "x"}})
    market = marketplace_dir(known, "tgx@offline-mkt")
    assert market == "/m" and marketplace_dir(known, "tgx@other") is None
    listing = json.dumps({"name": "offline-mkt", "plugins": [
        {"name": "tgx", "source": "./plugins/bridge", "version": "1.0.0"}]})
    assert in_place_root(listing, market, "tgx@offline-mkt") == "/m/plugins/bridge"
    github = json.dumps({"m": {"source": {"source": "github", "repo": "a/b"},
                               "installLocation": "/c/marketplaces/m"}})
    assert marketplace_dir(github, "p@m") is None


def _tree(*rows: tuple[int, int, tuple[str, ...], dict[str, str] | None]) -> list[Proc]:
    return [Proc(pid, ppid, argv, env) for pid, ppid, argv, env in rows]


def test_recognise_finds_the_server_through_an_exec_chain_and_ignores_lookalikes() -> None:
    spec = ServerSpec("companion", "env", ("TOKEN_FILE=/t", "python3", "/opt/c/server.py"))
    procs = _tree(
        (10, 1, ("/usr/bin/python3", "/opt/c/server.py"), {}),  # env exec'd python
        (11, 1, ("tail", "-f", "/var/log/companion.log"), {}),
        (12, 1, ("python3", "/opt/c/server.py", "--debug"), {}),
    )
    assert recognise(spec, procs) == [10]


def test_the_registrations_env_values_must_be_in_the_process_environment() -> None:
    spec = ServerSpec("a", "node", ("s.js",), env=(("ROLE", "a"),))
    procs = _tree((5, 1, ("node", "s.js"), {"ROLE": "b"}), (6, 1, ("node", "s.js"),
                                                           {"ROLE": "a"}))
    assert recognise(spec, procs) == [6]


def test_a_plugin_server_is_recognised_by_its_root_and_session_not_by_argv() -> None:
    spec = ServerSpec("plugin:tg:telegram", "bun", ("start",), plugin_roots=("/c/tg/1.0.0",))
    procs = _tree(
        (20, 1, ("bun", "run", "start"), {"CLAUDE_PLUGIN_ROOT": "/c/tg/1.0.0",
                                           "CLAUDE_CODE_SESSION_ID": "new"}),
        (21, 20, ("bun", "server.ts"), {"CLAUDE_PLUGIN_ROOT": "/c/tg/1.0.0/",
                                         "CLAUDE_CODE_SESSION_ID": "new"}),
        (22, 1, ("bun", "server.ts"), {"CLAUDE_PLUGIN_ROOT": "/c/other",
                                        "CLAUDE_CODE_SESSION_ID": "new"}),
        (23, 1, ("bun", "server.ts"), {"CLAUDE_PLUGIN_ROOT": "/c/tg/1.0.0",
                                        "CLAUDE_CODE_SESSION_ID": "old"}),
        (24, 1, ("bun", "server.ts"), None),
    )
    found = recognise(spec, procs, session_id="new")
    assert found == [20, 21]
    assert outermost(found, procs) == [20]


def test_a_wrapper_script_that_execs_is_followed_to_what_it_runs() -> None:
    script = ('#!/bin/sh\n# start the bridge\ncd "$(dirname "$0")"\n'
              'exec "$PY" /opt/c/server.py --spool /s "$@"\n')
    forms = script_forms(script, ["--v"], {"PY": "/usr/bin/python3"})
    assert forms == [("/usr/bin/python3", "/opt/c/server.py", "--spool", "/s", "--v")]
    spec = ServerSpec("companion", "/opt/c/run.sh", ("--v",), exec_forms=tuple(forms))
    procs = _tree((30, 1, ("/usr/bin/python3", "/opt/c/server.py", "--spool", "/s", "--v"), {}))
    assert recognise(spec, procs) == [30]


def test_a_script_line_only_the_shell_could_compute_is_not_guessed() -> None:
    assert script_forms('#!/bin/sh\nexec $(which python3) s.py\n', [], {}) == []
    assert script_forms('#!/bin/sh\nexec "$UNSET" s.py\n', [], {}) == []
    assert script_forms('#!/usr/bin/python3\nexec x\n', [], {}) == []


def test_an_npx_server_is_recognised_by_the_title_npm_gives_itself() -> None:
    # Captured: `npx -y /tmp/hx/npxt --port 5 -v` runs as one cmdline token (npm sets its
    # process title), its child `sh -c tlnpxt` and grandchild `node …/.bin/tlnpxt`.
    spec = ServerSpec("notes", "npx", ("-y", "/tmp/hx/npxt", "--port", "5", "-v"))
    procs = _tree((40, 1, ("npm exec /tmp/hx/npxt --port 5 -v",), {}),
                  (41, 40, ("sh", "-c", "tlnpxt"), {}),
                  (42, 1, ("npm exec /tmp/hx/npxt --port 6 -v",), {}))
    assert recognise(spec, procs) == [40]
    assert spawn_forms(("npm", "exec", "--package=x", "--", "srv"))[-1] == ("npm exec srv",)
