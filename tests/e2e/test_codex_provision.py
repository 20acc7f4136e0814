"""``tl-provision apply`` on a Codex host (issue 17), with the real Codex 0.169.0.

A TUI runs in a private tmux against the loopback fake Responses API, in a scratch CODEX_HOME
whose config.toml already has the user's own ``notify`` program. Apply from a Codex host profile
introspects the pane, renders the runtime config (agent codex, the resume argv with
``resume {session_id}`` inserted) and merges config.toml. The oracles are Codex itself:
``codex mcp list`` lists the threadline server, and a real ``codex exec`` turn runs the notify
chain, so the user's program receives the turn's payload through ``tl-rebuild hook-notify``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from provision.cli import main
from tests.e2e.codex_cli import RUN_TIMEOUT_SECONDS, CodexHome, codex_bin  # noqa: F401
from tests.e2e.codex_fake_api import CodexFakeApi
from tests.e2e.codex_tui import CodexTui
from tests.fixtures.switch_world import TL_REBUILD
from tests.fixtures.tmux import TmuxServer, tmux_server, wait_for  # noqa: F401 - fixture

USER_NOTIFY = '''import json, sys
with open(sys.argv[1], "a", encoding="utf-8") as out:
    out.write(json.dumps(sys.argv[2:]) + "\\n")
'''


@pytest.fixture
def api() -> Iterator[CodexFakeApi]:
    with CodexFakeApi() as fake:
        yield fake


@pytest.fixture
def tui(tmp_path: Path, codex_bin: Path, api: CodexFakeApi,  # noqa: F811
        tmux_server: TmuxServer) -> Iterator[CodexTui]:  # noqa: F811
    home = CodexHome.create(tmp_path / "codex-home", codex_bin, api.url)
    driver = CodexTui(home, tmux_server)
    yield driver
    driver.close()


def host_profile(root: Path, tui: CodexTui) -> Path:
    import getpass

    path = root / "codex-host.yml"
    path.write_text(json.dumps({
        "host": "scratch", "agent": "codex",
        "codex": {"user": getpass.getuser(), "home": str(tui.home.root)},
        "door": {"kind": "tmux", "tmux": {"target": tui.target,
                                          "socket_name": tui.tmux.socket_name}},
        "install": {"config_path": str(root / "threadline.toml"),
                    "state_dir": str(root / "state"),
                    "prefix": str(Path(sys.executable).parent.parent)},
    }))
    return path


def test_apply_wires_notify_and_the_mcp_server_that_the_real_codex_uses(
        tmp_path: Path, tui: CodexTui, capsys: pytest.CaptureFixture[str]) -> None:
    seen = tmp_path / "user-notify.jsonl"
    (tmp_path / "user_notify.py").write_text(USER_NOTIFY)
    theirs = ["python3", str(tmp_path / "user_notify.py"), str(seen)]
    config = tui.home.root / "config.toml"
    config.write_text(f"notify = {json.dumps(theirs)}\n" + config.read_text())
    config.chmod(0o600)
    launch = tui.argv("--no-daemon")
    tui.start(launch)
    before = config.read_text()  # after the start: the TUI itself adds [tui] to the file
    profile = host_profile(tmp_path, tui)

    assert main(["apply", "--check", "--diff", str(profile)]) == 0, capsys.readouterr().out
    checked = capsys.readouterr().out
    assert config.read_text() == before and not (tmp_path / "threadline.toml").exists()
    assert "changed: [scratch] CodexConfig — would update" in checked, checked
    assert "+[mcp_servers.threadline]" in checked and "-notify = [\"python3\"" in checked
    assert "ok: [scratch] Verify" in checked  # nothing merged yet: said, not failed

    assert main(["apply", str(profile)]) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    assert "changed: [scratch] CodexConfig — update" in out, out
    assert f"ok: [scratch] LaunchCommand — tmux pane {tui.target} start command (live pid " \
        f"{tui.pane_pid()} agrees): {' '.join(launch)}" in out, out
    runtime = tomllib.loads((tmp_path / "threadline.toml").read_text())
    assert (runtime["agent"], runtime["codex_home"]) == ("codex", str(tui.home.root))
    assert runtime["switch"]["resume_argv"] == [
        launch[0], "resume", "{session_id}", *launch[1:]]
    assert runtime["switch"]["launch_argv"] == launch
    assert "CODEX_HOME" in runtime["switch"]["environment"]
    merged = tomllib.loads(config.read_text())
    cfg = str(tmp_path / "threadline.toml")
    assert merged["notify"] == [TL_REBUILD, "hook-notify", "--config", cfg, "--", *theirs]
    assert config.stat().st_mode & 0o777 == 0o600
    rest = before.split("\n", 1)[1]  # everything after the user's notify line, untouched
    assert config.read_text().split("\n", 1)[1] == rest + (
        f'\n[mcp_servers.threadline]\ncommand = "{TL_REBUILD}"\n'
        f'args = ["mcp", "--config", "{cfg}"]\n\n')

    assert "ok: [scratch] Verify — 6 checks passed" in out, out
    assert main(["apply", "-v", str(profile)]) == 0
    again = capsys.readouterr().out
    assert f"pass: codex mcp list shows threadline — {TL_REBUILD} mcp --config {cfg}" \
        in again, again
    assert "codex identified by the @openai/codex package layout" in again
    assert "changed:" not in again.replace("changed=0", ""), again
    assert "ok: [scratch] CodexConfig — notify runs tl-rebuild hook-notify, chained to" in again

    listed = subprocess.run([str(tui.home.binary), "mcp", "list", "--json"],
                            env=tui.home.env(), capture_output=True, text=True, timeout=60,
                            stdin=subprocess.DEVNULL)
    servers = {entry["name"]: entry for entry in json.loads(listed.stdout)}
    assert servers["threadline"]["transport"]["command"] == TL_REBUILD
    assert servers["threadline"]["transport"]["args"] == ["mcp", "--config", cfg]

    turn = subprocess.run(
        [str(tui.home.binary), "exec", "--skip-git-repo-check", "say hi"],
        env=tui.home.env(), cwd=tui.home.work, capture_output=True, text=True,
        timeout=RUN_TIMEOUT_SECONDS, stdin=subprocess.DEVNULL)
    assert turn.returncode == 0, turn.stderr[-2000:]
    wait_for(lambda: seen.exists() and seen.read_text().strip() or None, timeout=30,
             what="the user's notify program, chained behind tl-rebuild hook-notify")
    payload = json.loads(json.loads(seen.read_text().splitlines()[0])[-1])
    assert payload["type"] == "agent-turn-complete"
    assert payload["input-messages"] == ["say hi"]


def test_drift_is_clean_after_apply_then_names_the_lost_trigger_and_a_changed_launch(
        tmp_path: Path, tui: CodexTui, capsys: pytest.CaptureFixture[str]) -> None:
    tui.start(tui.argv("--no-daemon"))
    profile = host_profile(tmp_path, tui)
    assert main(["apply", str(profile)]) == 0, capsys.readouterr().out
    capsys.readouterr()
    assert main(["drift", str(profile)]) == 0, capsys.readouterr().out
    assert capsys.readouterr().out.endswith("scratch : no drift since the last apply\n")

    config = tui.home.root / "config.toml"
    text = config.read_text()
    ours = next(line for line in text.splitlines(keepends=True) if line.startswith("notify ="))
    table = text[text.index("[mcp_servers.threadline]"):].split("\n\n", 1)[0] + "\n"
    config.write_text(text.replace(ours, 'notify = ["python3", "/x.py"]\n').replace(table, ""))
    tui.close()
    tui.start(tui.argv("--no-daemon", "-c", "model_auto_compact_token_limit=900000"))
    assert main(["drift", str(profile)]) == 1
    out = capsys.readouterr().out
    assert "DRIFT resume argv stale: " in out and "model_auto_compact_token_limit" in out
    assert "DRIFT Codex config.toml: the notify program is not Threadline's" in out
    assert "DRIFT Codex config.toml: [mcp_servers.threadline] is gone" in out


def test_introspect_refuses_a_profile_whose_codex_home_is_not_the_one_codex_runs_with(
        tmp_path: Path, tui: CodexTui, capsys: pytest.CaptureFixture[str]) -> None:
    tui.start(tui.argv())
    profile = host_profile(tmp_path, tui)
    data = json.loads(profile.read_text())
    data["codex"]["home"] = str(tmp_path / "elsewhere")
    (tmp_path / "elsewhere").mkdir()
    profile.write_text(json.dumps(data))
    assert main(["introspect", str(profile)]) == 2
    out = capsys.readouterr().out
    assert f"codex runs with CODEX_HOME={tui.home.root} but the profile says codex.home: " \
        f"{tmp_path / 'elsewhere'}" in out, out


def test_a_switch_after_apply_activates_in_the_restarted_tui(
        tmp_path: Path, tui: CodexTui, api: CodexFakeApi,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The operator's path end to end: apply on a live ``codex --no-daemon``, restart codex so
    it reads the merged config.toml, talk, request a rebuild; the next turn end switches the
    pane to the rebuilt thread."""

    from runtime.procfs import codex_writer_locks
    from runtime.switch.store import Store
    from tests.e2e.test_codex_switch import request_rebuild

    apply_restart_and_talk(tmp_path, tui, ("--no-daemon",), capsys)
    # the thread the model was asked on (at start the TUI can briefly lock a rollout-less
    # helper thread, so the pane's lock is not read here)
    old = api.thread_asked("please remember the blue door")
    store = Store(tmp_path / "state")
    op_id = request_rebuild(tui, tmp_path / "threadline.toml", store, old)
    op = store.read(op_id)
    assert op.state.value == "activated", (op.state.value, op.failure, tui.capture()[-2000:])
    pid = tui.pane_pid()
    tui.pids.add(pid)
    assert codex_writer_locks(tui.home.root, pid) == (str(op.fact("new_session_id")),)


def apply_restart_and_talk(tmp_path: Path, tui: CodexTui, options: tuple[str, ...],
                           capture: pytest.CaptureFixture[str]) -> Path:
    """The operator's install: ``codex OPTIONS`` in the pane, apply (which says to restart
    codex), codex restarted the same way so it reads config.toml, one prompt answered, our MCP
    server running below it, apply again (nothing to restart now); the profile."""
    from runtime.procfs import cmdline, descendants
    from tests.e2e.codex_fake_api import reply_text

    tmux_env = {"TMUX_TMPDIR": os.environ["TMUX_TMPDIR"]}
    tui.start(tui.argv(*options), extra_env=tmux_env)
    profile = host_profile(tmp_path, tui)
    assert main(["apply", str(profile)]) == 0, capture.readouterr().out
    out = capture.readouterr().out
    # a running codex keeps the notify and MCP servers it started with (measured in
    # tests/e2e/test_codex_config_reload.py): apply says to restart it
    assert f"ok: [scratch] RestartClaude — restart codex (pid {tui.pane_pid()}," in out, out
    tui.close()
    tui.start([*tui.argv(*options), "please remember the blue door"], extra_env=tmux_env)
    wait_for(lambda: reply_text(0) in tui.capture(), timeout=60, what="the first reply")
    wait_for(lambda: any(TL_REBUILD in (cmdline(pid) or ()) for pid in
                         descendants(tui.pane_pid())),
             timeout=60, what="codex to start our MCP server (tl-rebuild mcp)")
    assert main(["apply", str(profile)]) == 0, capture.readouterr().out
    again = capture.readouterr().out
    assert f"ok: [scratch] RestartClaude — nothing to restart: the live codex (pid " \
        f"{tui.pane_pid()}) runs our MCP server" in again, again
    return profile


def test_apply_refuses_a_codex_on_the_shared_daemon_naming_the_fix(
        tmp_path: Path, tui: CodexTui, api: CodexFakeApi,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A plain ``codex`` (no --no-daemon, no -c) keeps its thread in the shared
    ``codex app-server --managed-daemon``: measured here (the daemon, not the TUI, holds the
    thread's writer lock; it is the first TUI's child, so a respawn orphans it and the next TUI
    attaches to it from outside the pane), and apply's Verify fails naming the fix instead of
    installing a deployment whose every switch would roll back."""
    from runtime import procfs
    from tests.e2e.codex_fake_api import reply_text
    from tests.e2e.codex_tui import INPUT_HINT

    # not tui.start(): it waits for a lock under the pane, which this codex never holds
    tui.tmux.new_session(tui.session, tui.shell_command(tui.argv()), str(tui.home.work),
                         env=tui.home.env(), width=180, height=45)
    tui.pids.add(tui.pane_pid())
    wait_for(lambda: INPUT_HINT in tui.capture(), timeout=90, what="codex's composer")
    tui.type_prompt("please remember the blue door")
    wait_for(lambda: reply_text(0) in tui.capture(), timeout=60, what="the first reply")
    thread = api.thread_asked("please remember the blue door")
    holder = wait_for(lambda: procfs.codex_lock_holder(tui.home.root, thread), timeout=30,
                      what="the writer lock of the thread")
    argv = procfs.cmdline(holder) or ()
    assert "app-server" in argv and "--managed-daemon" in argv, argv  # not the TUI
    assert main(["apply", str(host_profile(tmp_path, tui))]) != 0
    out = capsys.readouterr().out
    assert "codex holds its thread in the pane (not the shared app-server daemon) (launched " \
        "without --no-daemon or -c" in out, out
    assert "add --no-daemon to the codex command" in out


def test_drift_names_a_relaunch_that_lost_an_option(
        tmp_path: Path, tui: CodexTui, capsys: pytest.CaptureFixture[str]) -> None:
    """The pane's codex is restarted by hand without one of its options: drift says the resume
    argv is stale (a switch would resume without the option) and shows both, with --json too."""
    option = ["-c", "model_auto_compact_token_limit=900000"]
    tui.start(tui.argv("--no-daemon", *option))
    profile = host_profile(tmp_path, tui)
    assert main(["apply", str(profile)]) == 0, capsys.readouterr().out
    capsys.readouterr()
    assert main(["drift", str(profile)]) == 0, capsys.readouterr().out
    capsys.readouterr()
    tui.close()
    tui.start(tui.argv("--no-daemon"))
    assert main(["drift", "--json", str(profile)]) == 1
    found = {f["check"]: f for f in json.loads(capsys.readouterr().out)["findings"]}
    stale = found["resume argv stale"]
    assert " ".join(option) in stale["before"] and " ".join(option) not in stale["after"]
    assert stale["after"].endswith("--no-daemon"), stale
    assert any(check.startswith("launch argv changed") for check in found), found
    assert main(["drift", str(profile)]) == 1
    assert "DRIFT resume argv stale: " in capsys.readouterr().out


def test_uninstall_takes_out_exactly_what_apply_put_in(
        tmp_path: Path, tui: CodexTui, capsys: pytest.CaptureFixture[str]) -> None:
    """apply, then uninstall: the real ``codex mcp list`` no longer lists our server, the
    user's notify, comments and tables come back byte for byte (mode kept, backup made), a
    second uninstall changes nothing, --check writes nothing."""
    config = tui.home.root / "config.toml"
    config.write_text('# mine\nnotify = ["python3", "/home/u/notify.py"]  # ping me\n'
                      + config.read_text() + '\n[mcp_servers.docs]\ncommand = "python3"\n'
                      'args = ["-c", "import sys; sys.stdin.read()"]\n')  # exits with codex
    config.chmod(0o600)
    tui.start(tui.argv("--no-daemon"))
    before = config.read_bytes()  # after the start: the TUI itself adds [tui] to the file
    profile = host_profile(tmp_path, tui)
    assert main(["apply", str(profile)]) == 0, capsys.readouterr().out
    capsys.readouterr()
    merged = config.read_bytes()
    assert merged != before

    assert main(["uninstall", "--check", "--diff", str(profile)]) == 0
    checked = capsys.readouterr().out
    assert "changed: [scratch] CodexConfig — would remove our notify head (yours restored: " \
        "['python3', '/home/u/notify.py']) and [mcp_servers.threadline] from" in checked, checked
    assert "-[mcp_servers.threadline]" in checked
    assert config.read_bytes() != before  # nothing written

    backups = set(tui.home.root.glob("config.toml.*"))
    assert main(["uninstall", str(profile)]) == 0, capsys.readouterr().out
    assert "changed=1" in capsys.readouterr().out
    assert config.read_bytes() == before
    assert config.stat().st_mode & 0o777 == 0o600
    made = set(tui.home.root.glob("config.toml.*")) - backups
    assert len(made) == 1 and made.pop().read_bytes() == merged  # the file it replaced
    listed = subprocess.run([str(tui.home.binary), "mcp", "list", "--json"],
                            env=tui.home.env(), capture_output=True, text=True, timeout=60,
                            stdin=subprocess.DEVNULL)
    names = [entry["name"] for entry in json.loads(listed.stdout)]
    assert names == ["docs"], listed.stdout
    assert main(["uninstall", str(profile)]) == 0
    again = capsys.readouterr().out
    assert "ok: [scratch] CodexConfig — no Threadline notify head or [mcp_servers.threadline]" \
        in again and "changed=0" in again, again
    assert config.read_bytes() == before
