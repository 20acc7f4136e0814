# ruff: noqa: F811 - the tmux_server fixture is imported by name and injected as a parameter
"""The watch after activation, through a real tmux server and the stand-in claude: a claude
that dies or loses its channel server after ``activated`` is rolled back to the old session
(recorded as ``post_activation_failure``); a third party's process is recorded and left."""

from __future__ import annotations

import os
import signal
from typing import Any

import pytest

from runtime.procfs import cmdline
from runtime.switch import ops
from tests.fixtures.switch_world import CHANNEL, World, tmux_world
from tests.fixtures.tmux import TmuxServer, tmux_server, wait_for  # noqa: F401 - fixture

pytestmark = pytest.mark.real_tmux

WATCH = 10.0  # healthcheck_seconds: every test below acts well inside the watch (the
# resume of the old session is judged over the same window, restart.ready)


def activated_world(tmp_path: Any, tmux: TmuxServer, healthcheck: float = WATCH
                    ) -> tuple[World, str, int]:
    """A switch that has just been activated (its worker now watches): world, op id, pid."""
    world = tmux_world(tmp_path, tmux, servers=("companion",), healthcheck=healthcheck)
    world.start_pane(tmux)
    op_id = str(ops.request(world.config, "test", "REBUILD",
                            session_id=world.old_session)["operation_id"])
    world.send("stop")
    assert world.wait_state(op_id, ("activated", "rolled_back", "failed")) == "activated", \
        world.store.read(op_id).failure
    pid = tmux.pane_pid(world.target)
    argv = cmdline(pid) or ()
    assert world.store.read(op_id).fact("new_session_id") in argv
    return world, op_id, pid


def phases(world: World, op_id: str) -> list[str]:
    return world.events(op_id)


def event(world: World, op_id: str, phase: str) -> dict[str, Any]:
    return next(e for e in world.store.events(op_id) if e["phase"] == phase)


def assert_old_session_back(world: World, tmux: TmuxServer) -> None:
    argv = cmdline(tmux.pane_pid(world.target)) or ()
    assert world.old_session in argv and all(flag in argv for flag in CHANNEL), argv


def test_a_claude_that_dies_after_activation_is_rolled_back_and_the_timeline_says_when(
    tmp_path: Any, tmux_server: TmuxServer
) -> None:
    world, op_id, pid = activated_world(tmp_path, tmux_server)

    os.kill(pid, signal.SIGTERM)  # the stand-in exits (its servers with it), like a crash

    assert world.wait_state(op_id) == "rolled_back"
    # the record changes first, then its timeline line is appended
    wait_for(lambda: "rolled_back" in phases(world, op_id), what="the rolled_back line")
    seen = phases(world, op_id)
    order = ["activated", "post_activation_failure", "resumed_old", "resumed_health",
             "rolled_back"]
    assert [p for p in seen if p in order] == order, seen
    failed = event(world, op_id, "post_activation_failure")
    assert failed["previous"] == "activated" and failed["state"] == "rollback_scheduled"
    assert failed["outcome"] == "failed" and str(pid) in failed["reason"]
    op = world.store.read(op_id)
    assert op.failure is not None and op.failure["code"] == "unhealthy"
    assert op.failure["message"] == failed["reason"]
    assert op.fact("post_activation_failure") == failed["reason"]
    assert op.fact("resumed_healthy") is True
    assert_old_session_back(world, tmux_server)
    status = world.cli("status", "--operation", op_id, "-v")  # a fact: shown with -v
    assert status.returncode == 0 and "post_activation_failure" in status.stdout


def test_a_channel_server_lost_after_activation_is_rolled_back(
    tmp_path: Any, tmux_server: TmuxServer
) -> None:
    world, op_id, pid = activated_world(tmp_path, tmux_server)
    [server] = event(world, op_id, "health")["channel_servers"]["companion"]["pids"]

    os.kill(server, signal.SIGKILL)  # claude lives on, deaf to its channel

    assert world.wait_state(op_id) == "rolled_back"
    op = world.store.read(op_id)
    assert op.failure is not None
    assert op.failure["message"] == (f"channel server(s) not running: companion (started as "
                                     f"pid {server}, then exited)")
    assert event(world, op_id, "post_activation_failure")["pid"] == pid
    assert not os.path.exists(f"/proc/{pid}")  # the deaf claude was replaced
    assert_old_session_back(world, tmux_server)


def test_a_third_party_respawn_during_the_watch_is_recorded_and_left_alone(
    tmp_path: Any, tmux_server: TmuxServer
) -> None:
    world, op_id, _ = activated_world(tmp_path, tmux_server)

    tmux_server.cmd("respawn-pane", "-k", "-t", world.target, "sleep 600")
    third = tmux_server.pane_pid(world.target)

    assert world.wait_state(op_id) == "activated"
    ended = event(world, op_id, "watch_ended")
    assert ended["outcome"] == "replaced" and ended["identity"] == str(third)
    assert "left as it is" in ended["reason"]
    assert "post_activation_failure" not in phases(world, op_id)
    assert "resumed_old" not in phases(world, op_id)
    assert tmux_server.pane_pid(world.target) == third
    assert "sleep" in " ".join(cmdline(third) or ())


def test_a_claude_that_holds_through_the_watch_stays_activated(
    tmp_path: Any, tmux_server: TmuxServer
) -> None:
    world, op_id, pid = activated_world(tmp_path, tmux_server, healthcheck=1.0)

    assert world.wait_state(op_id) == "activated"
    ended = event(world, op_id, "watch_ended")
    assert ended["outcome"] == "held" and ended["pid"] == pid
    assert ended["channel_servers"]["companion"]["status"] == "running"
    assert world.store.read(op_id).fact("watch_ended_at")
    assert phases(world, op_id)[-2:] == ["activated", "watch_ended"]
    assert tmux_server.pane_pid(world.target) == pid


def test_a_rollback_requested_during_the_watch_ends_the_watch_and_is_carried_out(
    tmp_path: Any, tmux_server: TmuxServer
) -> None:
    world, op_id, _ = activated_world(tmp_path, tmux_server)
    new_id = str(world.store.read(op_id).fact("new_session_id"))

    assert ops.rollback_request(world.config, op_id, "ROLLBACK")["state"] == "rollback_pending"
    wait_for(lambda: "watch_ended" in phases(world, op_id), what="the watch to end")
    assert event(world, op_id, "watch_ended")["outcome"] == "superseded"
    world.hook(session_id=new_id)

    assert world.wait_state(op_id) == "rolled_back"
    assert "post_activation_failure" not in phases(world, op_id)
    assert_old_session_back(world, tmux_server)
