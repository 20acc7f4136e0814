"""MCP registration (provision/tasks/mcp.py): parsers from captured output, then the real claude.

The registration tests run the pinned Claude Code CLI from npm (``claude_bin``) in a temp HOME:
``claude mcp add/get/remove`` need no network. Nothing here writes ``.claude.json`` except claude.
"""

from __future__ import annotations

import getpass
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from provision.errors import FactError, McpRegistrationError
from provision.host import LocalHost
from provision.profile import profile_from_mapping
from provision.result import Context
from provision.tasks.mcp import (
    EXPECTED_TOOLS,
    McpServer,
    McpTools,
    ServerSpec,
    claude_prefix,
    list_mcp_tools,
    parse_mcp_get,
    stored_servers,
)
from tests.fixtures.claude_cli import claude_bin, claude_env  # noqa: F401  (fixture)

# Captured from claude 2.1.328 (`claude mcp get threadline`).
GET_USER = """threadline:
  Scope: User config (available in all your projects)
  Status: ✘ Failed to connect
  Issue: ENOENT: no such file or directory, posix_spawn '/usr/bin/tl-rebuild'
  Type: stdio
  Command: /usr/bin/tl-rebuild
  Args: mcp --config /etc/x.toml
  Environment:

To remove this server, run: claude mcp remove threadline -s user
"""
GET_PROJECT = """tl:
  Scope: Project config (shared via .mcp.json)
  Status: ⏸ Pending approval (run `claude` to approve)
  Type: stdio
"""
GET_MISSING = 'No MCP server named "threadline". Run `claude mcp add` to add one.\n'


# ---- pure parsers ----

def test_mcp_get_output_gives_scope_and_status():
    found = parse_mcp_get(0, GET_USER)
    assert (found.found, found.scope, found.status) == (True, "user", "✘ Failed to connect")
    assert not found.connected
    assert parse_mcp_get(0, GET_PROJECT).scope == "project"
    assert parse_mcp_get(0, "x:\n  Scope: Local config (private to you in this project)\n"
                            "  Status: ✓ Connected\n").connected


def test_mcp_get_not_found_is_absent_but_other_failures_raise():
    assert parse_mcp_get(1, "", GET_MISSING).found is False
    with pytest.raises(FactError, match="claude mcp get failed"):
        parse_mcp_get(1, "", "TypeError: boom\n")


def test_stored_servers_reads_every_scope_in_precedence_order():
    entry = {"type": "stdio", "command": "/b/tl-rebuild", "args": ["mcp"], "env": {}}
    claude_json = json.dumps({"mcpServers": {"tl": entry},
                              "projects": {"/srv/app": {"mcpServers": {"tl": entry}}}}).encode()
    mcp_json = json.dumps({"mcpServers": {"tl": dict(entry, env={"K": "V"})}}).encode()
    found = stored_servers("tl", "/srv/app", claude_json, mcp_json, "/h/.claude.json",
                           "/srv/app/.mcp.json")
    assert [scope for scope, _ in found] == ["local", "project", "user"]
    assert found[1][1].env == (("K", "V"),)
    assert stored_servers("tl", "/elsewhere", claude_json, None, "a", "b") == (
        ("user", ServerSpec("stdio", "/b/tl-rebuild", ("mcp",))),)


def test_stored_spec_with_other_fields_differs_from_the_plain_one():
    plain = ServerSpec.from_json({"command": "x", "args": []}, "w")
    assert plain == ServerSpec("stdio", "x")
    assert ServerSpec.from_json({"type": "stdio", "command": "x", "timeout": 5}, "w") != plain


def test_unreadable_claude_json_is_a_fact_error_not_a_rewrite():
    with pytest.raises(FactError, match="not valid JSON"):
        stored_servers("tl", "/w", b"{broken", None, "/h/.claude.json", "/w/.mcp.json")


def test_claude_runs_as_the_claude_user_with_its_home_and_no_inherited_config_dir():
    profile = _profile("/home/c", "/srv/app", "/etc/t.toml", "/opt/tl", "/usr/bin/claude",
                       user="claude")
    assert claude_prefix(profile, "/usr/bin/claude", "root") == (
        "runuser", "-u", "claude", "--", "env", "-u", "CLAUDE_CONFIG_DIR", "HOME=/home/c",
        "/usr/bin/claude")
    assert claude_prefix(profile, "/usr/bin/claude", "claude")[:2] == ("env", "-u")


def _facts(stored, get, scope="user", previous=()):
    from provision.tasks.mcp import McpFacts

    wanted = ServerSpec("stdio", "/b/tl-rebuild", ("mcp", "--config", "/c.toml"))
    return McpFacts("threadline", scope, "/w", "/h/.claude.json", stored, get, wanted,
                    ("env", "HOME=/h", "/usr/bin/claude"), previous)


def test_another_companions_server_of_the_same_name_is_never_replaced():
    from provision.tasks.mcp import McpGet

    other = ServerSpec("stdio", "/b/tl-rebuild", ("mcp", "--config", "/other.toml"))
    with pytest.raises(McpRegistrationError, match="belongs to another companion "
                       "\\(config '/other.toml'\\); give this profile its own mcp.name"):
        McpServer().plan(_facts((("user", other),), McpGet(True, "user")), None)
    moved = McpServer().plan(_facts((("user", other),), McpGet(True, "user"),
                                    previous=("/other.toml",)), None)
    assert [a.argv[4] for a in moved] == ["remove", "add"]  # this profile's own, moved file
    upgraded = ServerSpec("stdio", "/old/bin/tl-rebuild", ("mcp", "--config", "/c.toml"))
    assert [a.argv[4] for a in McpServer().plan(
        _facts((("user", upgraded),), McpGet(True, "user")), None)] == ["remove", "add"]


def test_plan_from_canned_facts_covers_add_replace_ok_and_every_clash():
    from provision.tasks.mcp import McpGet

    ctx = None  # plan() is pure and does not look at the context
    wanted = _facts((), McpGet(False)).wanted
    add = McpServer().plan(_facts((), McpGet(False)), ctx)
    assert [a.argv[3:6] for a in add] == [("mcp", "add", "--transport")]
    old = ServerSpec("stdio", "/old/tl-rebuild", ("mcp",))
    replace = McpServer().plan(_facts((("user", old),), McpGet(True, "user")), ctx)
    assert [a.argv[4] for a in replace] == ["remove", "add"]
    assert McpServer().plan(_facts((("user", wanted),), McpGet(True, "user")), ctx) == []
    with pytest.raises(McpRegistrationError, match="exists in local and project scope"):
        McpServer().plan(_facts((("local", old), ("project", old), ("user", wanted)),
                                McpGet(True, "local")), ctx)
    with pytest.raises(McpRegistrationError, match="exists in plugin:x scope"):
        McpServer().plan(_facts((), McpGet(True, "plugin:x")), ctx)
    with pytest.raises(FactError, match="holds no such entry"):
        McpServer().plan(_facts((), McpGet(True, "user")), ctx)


# ---- the real claude CLI in a temp HOME ----

def _profile(home, workdir, config_path, prefix, claude, scope="user", user=None):
    return profile_from_mapping({
        "host": "test",
        "claude": {"user": user or getpass.getuser(), "home": str(home),
                   "workdir": str(workdir), "binary": str(claude)},
        "door": {"kind": "tmux", "tmux": {"target": "main:0.0"}},
        "install": {"config_path": config_path, "state_dir": "/var/lib/tl",
                    "prefix": str(prefix)},
        "mcp": {"name": "threadline", "scope": scope},
    })


def _apply(task, host, ctx):
    """What the engine does for one task: facts → plan → execute → re-read → plan again."""
    facts = task.facts(host, ctx)
    actions = task.plan(facts, ctx)
    for action in actions:
        action.execute(host)
    assert task.plan(task.facts(host, ctx), ctx) == [], "still differs after apply"
    return facts, actions


@pytest.fixture
def sandbox(tmp_path: Path, request: pytest.FixtureRequest):
    """A temp HOME, workdir and install prefix holding a stand-in tl-rebuild script."""
    binary = request.getfixturevalue("claude_bin")
    home, workdir, prefix = tmp_path / "home", tmp_path / "srv app", tmp_path / "prefix"
    for folder in (home, workdir, prefix / "bin"):
        folder.mkdir(parents=True)
    script = prefix / "bin" / "tl-rebuild"
    script.write_text("#!/bin/sh\nexit 0\n")
    script.chmod(0o755)

    def ctx(config_path="/etc/threadline/config.toml", scope="user"):
        return Context(profile=_profile(home, workdir, config_path, prefix, binary, scope))

    def claude(*args):
        return subprocess.run([str(binary), *args], env=claude_env(home), cwd=workdir,
                              capture_output=True, text=True, timeout=60)

    return home, workdir, script, ctx, claude


def _claude_json(home: Path) -> dict:
    return json.loads((home / ".claude.json").read_text())


def _entries(home: Path, workdir: Path) -> list:
    """Every stored ``threadline`` entry (user and local scope) as claude wrote it."""
    doc = _claude_json(home)
    tables = [doc.get("mcpServers", {}),
              doc.get("projects", {}).get(str(workdir), {}).get("mcpServers", {})]
    return [table["threadline"] for table in tables if "threadline" in table]


@pytest.mark.real_claude
def test_absent_server_is_added_in_user_scope_with_the_exact_spec(sandbox):
    home, workdir, script, ctx, claude = sandbox
    facts, actions = _apply(McpServer(), LocalHost(), ctx())
    assert not facts.get.found
    assert [a.summary.split(":")[0] for a in actions] == [
        "add MCP server 'threadline' (user scope)"]
    assert actions[0].argv[-6:] == ("threadline", "--", str(script), "mcp", "--config",
                                    "/etc/threadline/config.toml")
    assert _claude_json(home)["mcpServers"]["threadline"] == {
        "type": "stdio", "command": str(script),
        "args": ["mcp", "--config", "/etc/threadline/config.toml"], "env": {}}
    shown = claude("mcp", "get", "threadline")
    assert shown.returncode == 0 and "Scope: User config" in shown.stdout


@pytest.mark.real_claude
def test_second_run_finds_the_same_spec_and_plans_nothing(sandbox):
    home, _, _, ctx, _ = sandbox
    _apply(McpServer(), LocalHost(), ctx())
    before = (home / ".claude.json").read_bytes()
    task = McpServer()
    facts = task.facts(LocalHost(), ctx())
    assert task.plan(facts, ctx()) == []
    assert task.ok_message(facts, ctx()).startswith(
        "MCP server 'threadline' already registered in user scope")
    assert facts.get.found and facts.get.scope == "user"
    assert (home / ".claude.json").read_bytes() == before


@pytest.mark.real_claude
def test_engine_reports_would_add_in_check_mode_then_changed_then_ok(sandbox):
    from provision.engine import run_task
    from provision.result import Status

    home, _, _, ctx, _ = sandbox
    context = ctx()
    context.check = True
    checked = run_task(McpServer(), LocalHost(), context)
    assert checked.status is Status.CHANGED
    assert checked.message.startswith("would add MCP server 'threadline' (user scope)")
    assert "threadline" not in _claude_json(home).get("mcpServers", {})
    context.check = False
    assert run_task(McpServer(), LocalHost(), context).status is Status.CHANGED
    again = run_task(McpServer(), LocalHost(), context)
    assert again.status is Status.OK, again.message
    assert again.notes[0].startswith("claude mcp get threadline: user scope, status ")


@pytest.mark.real_claude
def test_changed_spec_is_replaced_by_remove_then_add(sandbox):
    home, _, script, ctx, claude = sandbox
    added = claude("mcp", "add", "--scope", "user", "threadline", "--", "/old/bin/tl-rebuild",
                   "mcp", "--config", "/etc/threadline/config.toml")
    assert added.returncode == 0, added.stderr
    _, actions = _apply(McpServer(), LocalHost(), ctx())
    assert [a.argv[a.argv.index("mcp") + 1] for a in actions] == ["remove", "add"]
    assert _claude_json(home)["mcpServers"]["threadline"]["command"] == str(script)


@pytest.mark.real_claude
def test_another_companions_server_of_the_same_name_fails_and_is_kept(sandbox):
    from provision.engine import run_task
    from provision.result import Status

    home, _, _, ctx, _ = sandbox
    _apply(McpServer(), LocalHost(), ctx())
    before = (home / ".claude.json").read_bytes()

    result = run_task(McpServer(), LocalHost(), ctx(config_path="/etc/tl/other.toml"))

    assert result.status is Status.FAILED
    assert "belongs to another companion (config '/etc/threadline/config.toml')" in \
        result.message
    assert (home / ".claude.json").read_bytes() == before


@pytest.mark.real_claude
@pytest.mark.parametrize(("existing", "wanted"), [("local", "user"), ("user", "local")])
def test_same_name_in_another_scope_fails_and_nothing_is_removed(sandbox, existing, wanted):
    home, workdir, _, ctx, claude = sandbox
    added = claude("mcp", "add", "--transport", "stdio", "--scope", existing, "threadline",
                   "--", "/usr/bin/foreign-server", "--flag")
    assert added.returncode == 0, added.stderr
    before = _entries(home, workdir)
    assert len(before) == 1
    task = McpServer()
    facts = task.facts(LocalHost(), ctx(scope=wanted))
    with pytest.raises(McpRegistrationError, match=f"already exists in {existing} scope"):
        task.plan(facts, ctx(scope=wanted))
    assert _entries(home, workdir) == before  # claude itself rewrites other keys on `get`
    assert "foreign-server" in claude("mcp", "get", "threadline").stdout


@pytest.mark.real_claude
def test_project_scope_mcp_json_clash_fails_too(sandbox):
    _, workdir, _, ctx, claude = sandbox
    added = claude("mcp", "add", "--transport", "stdio", "--scope", "project", "threadline",
                   "--", "/usr/bin/foreign-server")
    assert added.returncode == 0, added.stderr
    before = (workdir / ".mcp.json").read_bytes()
    task = McpServer()
    with pytest.raises(McpRegistrationError, match="already exists in project scope"):
        task.plan(task.facts(LocalHost(), ctx()), ctx())
    assert (workdir / ".mcp.json").read_bytes() == before


@pytest.mark.real_claude
def test_claude_config_dir_of_the_test_process_does_not_leak_into_claude(sandbox):
    home, _, _, ctx, _ = sandbox
    assert os.environ.get("CLAUDE_CONFIG_DIR")  # set by tests/conftest.py
    _apply(McpServer(), LocalHost(), ctx())
    assert "threadline" in _claude_json(home)["mcpServers"]
    leaked = Path(os.environ["CLAUDE_CONFIG_DIR"]) / ".claude.json"
    assert not leaked.exists() or "threadline" not in leaked.read_text()


# ---- verification over the real MCP protocol ----

STAND_IN_SERVER = """
import sys
from mcp.server.mcpserver import MCPServer

server = MCPServer("stand-in")
for tool_name in sys.argv[1:]:
    def tool(text: str = "") -> str:
        return text
    server.tool(name=tool_name)(tool)
server.run("stdio")
"""


def _stand_in(tmp_path: Path, tools) -> tuple[str, ...]:
    path = tmp_path / "stand_in_server.py"
    path.write_text(STAND_IN_SERVER)
    return (sys.executable, str(path), *tools)


def test_tool_lister_speaks_mcp_over_stdio_to_a_real_sdk_server(tmp_path):
    argv = _stand_in(tmp_path, ["alpha", "beta"])
    assert sorted(list_mcp_tools(argv, {}, str(tmp_path), 30.0)) == ["alpha", "beta"]


def test_tool_lister_names_a_server_that_cannot_start(tmp_path):
    with pytest.raises(McpRegistrationError, match="could not be queried"):
        list_mcp_tools((str(tmp_path / "missing-binary"),), {}, str(tmp_path), 10.0)


@pytest.mark.real_claude
def test_tools_check_fails_naming_missing_tools_and_passes_with_all_seven(sandbox, tmp_path):
    home, _, script, ctx, _ = sandbox
    _apply(McpServer(), LocalHost(), ctx())
    seen = []

    def lister(tools):
        def listed(argv, env, cwd, timeout):
            seen.append(tuple(argv))
            return list_mcp_tools(_stand_in(tmp_path, tools), env, cwd, timeout)
        return listed

    task = McpTools(lister(EXPECTED_TOOLS[:5]))
    facts = task.facts(LocalHost(), ctx())
    with pytest.raises(McpRegistrationError,
                       match="missing thread_rebuild_cancel, thread_rebuild_rollback_request"):
        task.plan(facts, ctx())
    assert seen[0][-4:] == (str(script), "mcp", "--config", "/etc/threadline/config.toml")
    assert f"HOME={home}" in seen[0]
    task = McpTools(lister(EXPECTED_TOOLS))
    facts = task.facts(LocalHost(), ctx())
    assert task.plan(facts, ctx()) == []
    assert task.ok_message(facts, ctx()) == "MCP server lists its 7 tools over stdio"


@pytest.mark.real_claude
def test_tools_check_is_skipped_when_check_mode_did_not_register_the_server(sandbox, tmp_path):
    from provision.engine import run
    from provision.result import Status

    _, _, _, ctx, _ = sandbox

    def seven(argv, env, cwd, timeout):
        return list_mcp_tools(_stand_in(tmp_path, EXPECTED_TOOLS), env, cwd, timeout)

    context = ctx()
    context.check = True
    report = run([McpServer(), McpTools(seven)], LocalHost(), context)
    assert [r.status for r in report.results] == [Status.CHANGED, Status.SKIPPED]
    assert "is not registered as wanted in this run" in report.results[1].message
    context.check, context.facts = False, {}
    report = run([McpServer(), McpTools(seven)], LocalHost(), context)
    assert [r.status for r in report.results] == [Status.CHANGED, Status.OK]


@pytest.mark.real_claude
def test_registered_real_server_lists_the_seven_tools_and_claude_connects_to_it(
        tmp_path, claude_bin):  # noqa: F811 - pytest fixture
    """The real ``tl-rebuild mcp``: our verifier and claude's own health check both reach it."""
    home, workdir, state = tmp_path / "home", tmp_path / "work", tmp_path / "state"
    for folder in (home, workdir, state):
        folder.mkdir()
    config = tmp_path / "config.toml"
    config.write_text(f'state_dir = "{state}"\nworkdir = "{workdir}"\n')
    prefix = Path(sys.executable).parent.parent  # the installation running this test
    if not (prefix / "bin" / "tl-rebuild").exists():
        pytest.fail(f"tl-rebuild console script not found beside {sys.executable}")
    ctx = Context(profile=_profile(home, workdir, str(config), prefix, claude_bin))
    _apply(McpServer(), LocalHost(), ctx)
    registration = McpServer().facts(LocalHost(), ctx)
    assert registration.get.connected, registration.get.status
    task = McpTools()
    facts = task.facts(LocalHost(), ctx)
    assert sorted(facts.tools) == sorted(EXPECTED_TOOLS)
    assert facts.argv[-3:] == ("mcp", "--config", str(config))
    assert task.plan(facts, ctx) == []


@pytest.mark.real_claude
def test_uninstall_takes_out_our_hook_and_server_and_keeps_the_users(sandbox):
    """``tl-provision uninstall``'s tasks on a claude profile, with the real claude: our Stop
    entry and MCP registration go, the user's own hook, keys and server stay, a second
    run is ok, another companion's server of our name is refused and kept."""
    from provision.cli import uninstall_tasks
    from provision.engine import run_task
    from provision.result import Status
    from provision.tasks.mcp import McpServerRemoved
    from provision.tasks.settings import StopHook

    home, _, _, ctx, claude = sandbox
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir()
    mine = {"hooks": [{"type": "command", "command": "python3 /home/u/stop.py"}]}
    settings.write_text(json.dumps({"model": "opus", "hooks": {"Stop": [mine]}}))
    # the user's own server: a stand-in that ends with its client (no listening socket)
    assert claude("mcp", "add", "--scope", "user", "mine", "--", "python3", "-c",
                  "import sys; sys.stdin.read()").returncode == 0
    _apply(StopHook(), LocalHost(), ctx())
    _apply(McpServer(), LocalHost(), ctx())
    assert "tl-rebuild hook-stop" in settings.read_text()

    results = [run_task(task, LocalHost(), ctx()) for task in uninstall_tasks()]
    assert [(r.task, r.status) for r in results] == [
        ("StopHook", Status.CHANGED), ("McpServer", Status.CHANGED),
        ("CodexConfig", Status.SKIPPED)], [r.message for r in results]
    assert json.loads(settings.read_text()) == {"model": "opus", "hooks": {"Stop": [mine]}}
    servers = _claude_json(home)["mcpServers"]
    assert "threadline" not in servers and servers["mine"]["args"] == [
        "-c", "import sys; sys.stdin.read()"]
    assert "No MCP server named" in claude("mcp", "get", "threadline").stderr + \
        claude("mcp", "get", "threadline").stdout
    again = [run_task(task, LocalHost(), ctx()) for task in uninstall_tasks()]
    assert [r.status for r in again] == [Status.OK, Status.OK, Status.SKIPPED]
    assert again[1].message == "no MCP server 'threadline' in user scope"

    assert claude("mcp", "add", "--scope", "user", "threadline", "--", "/b/tl-rebuild", "mcp",
                  "--config", "/other.toml").returncode == 0
    refused = run_task(McpServerRemoved(), LocalHost(), ctx())
    assert refused.status is Status.FAILED
    assert "is another companion's (config '/other.toml')" in refused.message
    assert "threadline" in _claude_json(home)["mcpServers"]


@pytest.mark.real_claude
@pytest.mark.parametrize("known_by", ["launch", "manifest"])
def test_the_claude_the_launch_runs_registers_the_server_when_none_is_on_our_path(
    sandbox, tmp_path, monkeypatch, known_by,
):
    """root (or sudo's secure_path) has no claude on PATH while the user's pane runs a native
    ~/.local/bin/claude: LaunchCommand found it, yet McpServer failed "claude not found on
    PATH; set claude.binary" (uninstall too, where the manifest records it)."""
    from dataclasses import replace

    from provision.introspect import Launch
    from runtime.doors.kind import DoorKind

    home, workdir, script, ctx, _ = sandbox
    binary = ctx().profile.claude.binary
    profile = replace(ctx().profile, claude=replace(ctx().profile.claude, binary=None),
                      install=replace(ctx().profile.install, state_dir=str(tmp_path / "state")))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # tl-provision's own PATH: no claude on it
    context = Context(profile)
    if known_by == "launch":
        context.launch = Launch(DoorKind.TMUX, "tmux pane main:0.0 start command",
                                (binary, "--continue"), str(workdir))
    else:
        (tmp_path / "state").mkdir()
        (tmp_path / "state" / "provision.json").write_text(
            json.dumps({"claude": {"binary": binary, "version": "2.1.328"}}))
    facts = McpServer().facts(LocalHost(), context)
    assert facts.prefix[-1] == binary and not facts.get.found


def test_accept_s_workdir_only_launch_runs_the_claude_the_manifest_recorded():
    """accept hands McpServer a stand-in launch with a workdir only (provision/accept/wiring.py):
    the claude to run then comes from the manifest, not from an ``argv`` it does not have."""
    from types import SimpleNamespace

    from tests.fakes import FakeHost

    native = "/home/claude/.local/bin/claude"
    profile = profile_from_mapping({
        "host": "h", "claude": {"user": "claude", "home": "/home/claude"},
        "door": {"kind": "tmux", "tmux": {"target": "main:0.0"}},
        "install": {"config_path": "/etc/tl/config.toml", "state_dir": "/var/lib/tl"}})
    host = FakeHost(path=("/usr/bin",), executables={"/usr/bin/tl-rebuild"}, files={
        "/var/lib/tl/provision.json": json.dumps({"claude": {"binary": native}}).encode()})
    host.add_command(["id", "-un"], "root\n")
    host.add_command([*claude_prefix(profile, native, "root"), "mcp", "get", "threadline"],
                     "", rc=1, stderr=GET_MISSING)
    ctx = Context(profile, check=True)
    ctx.launch = SimpleNamespace(workdir="/srv/app")  # type: ignore[assignment]
    facts = McpServer().facts(host, ctx)
    assert facts.prefix[-1] == native and not facts.get.found
