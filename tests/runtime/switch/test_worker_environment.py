# ruff: noqa: F811 - the tmux_server fixture is imported by name and injected as a parameter
"""The switch carries the launch environment (issue 10 §5) through a real tmux server.

The stand-in claude finds sessions like claude: in ``$CLAUDE_CONFIG_DIR/projects/…``, and a
``--resume`` of a session it cannot find prints "No conversation found" and exits. The pane's
command sets ``CLAUDE_CONFIG_DIR`` and a secret inline; the tmux server (and so every shell a
respawn starts) has neither. The switch and the rollback must start the new process with both,
and no value may appear in the store, the timeline or the worker log.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
from pathlib import Path

import pytest

from runtime.procfs import environ, value_digest
from runtime.switch import ops
from tests.fixtures.standin_claude import append_events, exchange, last_uuid
from tests.fixtures.switch_world import CHANNEL, TL_REBUILD, World, tmux_world
from tests.fixtures.tmux import TmuxServer, tmux_server, wait_for  # noqa: F401 - fixture

pytestmark = pytest.mark.real_tmux

SECRET = "sk-launch-secret-31337"
CARRIED = ("CLAUDE_CONFIG_DIR", "TL_TOKEN")


def inline_world(root: Path, tmux: TmuxServer, names: tuple[str, ...] = CARRIED,
                 exit_delay: str = "0") -> World:
    """A world whose claude gets its config dir and a token only from the pane's command."""
    tmux.env = {k: v for k, v in os.environ.items() if k != "CLAUDE_CONFIG_DIR"}
    world = tmux_world(root, tmux)
    world.env["STANDIN_EXIT_DELAY"] = exit_delay
    text = world.config_path.read_text().replace(
        "[switch]\n", f"[switch]\nenvironment = {list(names)!r}\n".replace("'", '"'), 1)
    world.config_path.write_text(text)
    config_dir = world.project_dir.parent.parent
    command = (f"cd {shlex.quote(str(world.workdir))} && "
               f"CLAUDE_CONFIG_DIR={shlex.quote(str(config_dir))} TL_TOKEN={SECRET} "
               f"exec {shlex.join(world.standin_argv(world.old_session))}")
    # the session's environment (new-session -e) must not hold it either: a respawned shell
    # would inherit it there and hide a resume that does not carry it
    session_env = {k: v for k, v in world.env.items() if k != "CLAUDE_CONFIG_DIR"}
    world.tmux, world.target = tmux, tmux.new_session("claude", command, cwd=str(world.workdir),
                                                      env=session_env)
    wait_for(lambda: "ready" in tmux.capture(world.target), what="stand-in ready")
    for scope in (("-g",), ("-t", "claude")):
        shown = tmux.cmd("show-environment", *scope).stdout
        assert "CLAUDE_CONFIG_DIR" not in shown and SECRET not in shown, scope
    return world


def no_value_stored(world: World) -> list[str]:
    """Files of the state dir (records, timelines, worker log) that hold a carried value."""
    return [str(p) for p in world.state_dir.rglob("*") if p.is_file()
            and p.name != "source.jsonl" and SECRET.encode() in p.read_bytes()]


def rebuild_at_stop(world: World) -> str:
    """Request a rebuild of the old session and let claude stop; the operation id."""
    op_id = str(ops.request(world.config, "test", "REBUILD",
                            session_id=world.old_session)["operation_id"])
    world.send("stop")
    return op_id


def test_the_switch_starts_the_new_process_with_the_inline_launch_environment(
        tmp_path: Path, tmux_server: TmuxServer) -> None:
    world = inline_world(tmp_path, tmux_server)
    op_id = rebuild_at_stop(world)

    assert world.wait_state(op_id) == "activated", world.store.read(op_id).failure
    env = environ(tmux_server.pane_pid(world.target)) or {}
    assert env.get("TL_TOKEN") == SECRET
    assert env.get("CLAUDE_CONFIG_DIR") == str(world.project_dir.parent.parent)
    events = {e["phase"]: e for e in world.store.events(op_id)}
    assert events["identity"]["environment"]["TL_TOKEN"] == value_digest(SECRET)
    assert events["health"]["environment"]["TL_TOKEN"] == value_digest(SECRET)
    assert no_value_stored(world) == []


def test_the_rollback_resumes_the_old_session_with_the_same_environment(
        tmp_path: Path, tmux_server: TmuxServer) -> None:
    world = inline_world(tmp_path, tmux_server)
    op_id = rebuild_at_stop(world)
    assert world.wait_state(op_id) == "activated", world.store.read(op_id).failure
    new_id = str(world.store.read(op_id).fact("new_session_id"))
    new_file = world.project_dir / f"{new_id}.jsonl"
    append_events(new_file, exchange(new_id, "one more thing", "ok", last_uuid(new_file),
                                     str(world.workdir)))
    ops.rollback_request(world.config, op_id, "ROLLBACK")
    world.hook(session_id=new_id)

    assert world.wait_state(op_id) == "rolled_back", world.store.read(op_id).failure
    pid = tmux_server.pane_pid(world.target)
    assert world.old_session in (open(f"/proc/{pid}/cmdline", "rb").read().decode())
    assert (environ(pid) or {}).get("TL_TOKEN") == SECRET
    assert no_value_stored(world) == []


# A claude that exits at once after "No conversation found" is gone when the health check
# looks; one still exiting shows the words while it runs: the verdict must not differ.
@pytest.mark.parametrize("exit_delay", ["0", "1.0"], ids=["exits-at-once", "exits-slowly"])
def test_without_the_config_dir_carried_the_resume_finds_no_conversation_and_rolls_back(
        tmp_path: Path, tmux_server: TmuxServer, exit_delay: str) -> None:
    # What every switch did before: the config names nothing to carry.
    world = inline_world(tmp_path, tmux_server, names=(), exit_delay=exit_delay)
    op_id = rebuild_at_stop(world)

    assert world.wait_state(op_id) == "failed"
    op = world.store.read(op_id)
    failure = op.failure or {}
    # the new process died ("No conversation found") and so did the old one resumed without it
    assert failure.get("code") == "resume_failed", failure
    assert "new session unhealthy" in failure["message"]
    assert "resuming the old one failed" in failure["message"]
    rows = [json.loads(line) for line in world.record.read_text().splitlines()]
    not_found = [r["session"] for r in rows if r["event"] == "not_found"]
    assert not_found == [op.fact("new_session_id"), world.old_session]
    assert failure["message"].endswith(
        f"; start it again: tl-rebuild restart --session {world.old_session} --config "
        f"{world.config_path}"), failure


def restart(world: World, *session: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TL_REBUILD, "restart", *session, "--config", str(world.config_path)],
                          capture_output=True, text=True, timeout=90)


def test_after_a_failed_resume_the_dead_pane_is_restarted_once_tmux_has_the_environment(
        tmp_path: Path, tmux_server: TmuxServer) -> None:
    """The operator's way back after ``resume_failed``: the switch borrowed remain-on-exit, so
    the pane is left dead, started by the failed resume without the launch's variables. With
    the config fixed, ``restart`` refuses, naming them (their values died with the first
    claude), and starts nothing; once they are set in the pane's tmux session it resumes the
    old session there."""
    world = inline_world(tmp_path, tmux_server, names=())
    op_id = rebuild_at_stop(world)
    assert world.wait_state(op_id) == "failed"
    assert (world.store.read(op_id).failure or {}).get("code") == "resume_failed"
    wait_for(lambda: tmux_server.display(world.target, "#{pane_dead}") == "1",
             what="the pane left dead")
    dead_pid = tmux_server.pane_pid(world.target)
    text = world.config_path.read_text()
    assert "environment = []\n" in text
    world.config_path.write_text(text.replace(
        "environment = []\n", f"environment = {list(CARRIED)!r}\n".replace("'", '"'), 1))
    starts = len(world.starts())

    refused = restart(world, "--session", world.old_session)
    assert refused.returncode == 1, refused.stdout
    assert refused.stderr.startswith(
        "tl-rebuild: error: cannot carry CLAUDE_CONFIG_DIR, TL_TOKEN to claude in the dead tmux "
        "pane 'claude:0.0': the pane's start command does not set it and tmux's environment "
        "does not have it; nothing was restarted"), refused.stderr
    assert tmux_server.display(world.target, "#{pane_dead} #{pane_pid}") == f"1 {dead_pid}"
    assert len(world.starts()) == starts

    tmux_server.cmd("set-environment", "-t", "claude", "CLAUDE_CONFIG_DIR",
                    str(world.project_dir.parent.parent))
    tmux_server.cmd("set-environment", "-t", "claude", "TL_TOKEN", SECRET)
    done = restart(world, "--session", world.old_session)
    assert done.returncode == 0, done.stderr
    assert f"claude pid {dead_pid} had exited, its dead pane was respawned" in done.stdout
    assert (environ(tmux_server.pane_pid(world.target)) or {}).get("TL_TOKEN") == SECRET


def test_a_claude_that_crashed_in_a_pane_tmux_kept_is_restarted_there_with_its_environment(
        tmp_path: Path, tmux_server: TmuxServer) -> None:
    """A claude killed outright (a crash, the OOM killer) in a pane with the user's own
    ``remain-on-exit on`` leaves the pane dead. ``tl-rebuild restart`` resumes the session in
    it, with the launch's inline assignments read from the pane's start command — once the
    process is gone nothing else holds them, and without the config dir the resume finds no
    conversation — and leaves the user's remain-on-exit as it was. No ``--session``: the
    session is the one the dead claude was started to resume."""
    world = inline_world(tmp_path, tmux_server)
    tmux_server.cmd("set-option", "-p", "-t", world.target, "remain-on-exit", "on")
    dead_pid = tmux_server.pane_pid(world.target)
    os.killpg(dead_pid, signal.SIGKILL)  # the stand-in and its channel server, as a crash would
    wait_for(lambda: tmux_server.display(world.target, "#{pane_dead}") == "1",
             what="the pane dead")

    done = restart(world)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"ready: session {world.old_session} (pid "), done.stdout
    assert f"claude pid {dead_pid} had exited, its dead pane was respawned" in done.stdout
    pid = tmux_server.pane_pid(world.target)
    assert pid != dead_pid and tmux_server.display(world.target, "#{pane_dead}") == "0"
    env = environ(pid) or {}
    assert env.get("TL_TOKEN") == SECRET
    assert env.get("CLAUDE_CONFIG_DIR") == str(world.project_dir.parent.parent)
    argv = world.starts()[-1]["argv"]
    assert argv[argv.index("--resume") + 1] == world.old_session
    assert " ".join(CHANNEL) in " ".join(argv)  # the channel flag of the dead claude kept
    assert tmux_server.cmd("show-options", "-p", "-t", world.target,
                           "remain-on-exit").stdout.strip() == "remain-on-exit on"
    assert no_value_stored(world) == []
