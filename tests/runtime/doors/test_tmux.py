# ruff: noqa: F811 - the tmux_server fixture is imported by name and injected as a parameter
"""The tmux door leaves the user's tmux as it found it: every option and hook the user set on
the pane or its window is exactly as before once a real switch (stand-in claude, real tmux on a
private socket, the real worker) has ended — activated or rolled back."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from runtime.doors.tmux import SAVED_OPTION, TmuxDoor
from runtime.switch import ops
from tests.fixtures.switch_world import World, tmux_world
from tests.fixtures.tmux import TmuxServer, tmux_server, wait_for  # noqa: F401 - fixture

pytestmark = pytest.mark.real_tmux

# (window-level remain-on-exit, pane-level remain-on-exit) the user had; None = unset there.
USER_SETTINGS = [(None, None), (None, "on"), (None, "off"), ("on", None), ("on", "off"),
                 ("off", None), ("failed", "on")]


def tmux_state(tmux: TmuxServer, target: str) -> dict[str, str]:
    """Everything the user set on the pane and its window, plus the value that applies."""
    window = target.rsplit(".", 1)[0]
    return {
        "pane options": tmux.cmd("show-options", "-p", "-t", target).stdout,
        "window options": tmux.cmd("show-options", "-w", "-t", window).stdout,
        "pane hooks": tmux.cmd("show-hooks", "-p", "-t", target).stdout,
        "window hooks": tmux.cmd("show-hooks", "-w", "-t", window).stdout,
        "effective": tmux.display(target, "#{remain-on-exit}"),
    }


def set_user_tmux(tmux: TmuxServer, target: str, window_value: str | None,
                  pane_value: str | None, marker: Path) -> None:
    window = target.rsplit(".", 1)[0]
    if window_value is not None:
        tmux.cmd("set-option", "-w", "-t", window, "remain-on-exit", window_value)
    if pane_value is not None:
        tmux.cmd("set-option", "-p", "-t", target, "remain-on-exit", pane_value)
    tmux.cmd("set-hook", "-w", "-t", window, "pane-exited", f"run-shell 'touch {marker}'")
    tmux.cmd("set-hook", "-p", "-t", target, "pane-died", "display-message died")


def switch(world: World) -> str:
    op_id = str(ops.request(world.config, "test rebuild", "REBUILD",
                            session_id=world.old_session)["operation_id"])
    world.send("stop")
    return op_id


@pytest.mark.parametrize(("window_value", "pane_value"), USER_SETTINGS)
def test_an_activated_switch_leaves_the_users_remain_on_exit_and_hooks_exactly_as_found(
    tmp_path: Path, tmux_server: TmuxServer, window_value: str | None, pane_value: str | None
) -> None:
    world = tmux_world(tmp_path, tmux_server)
    world.start_pane(tmux_server)
    set_user_tmux(tmux_server, world.target, window_value, pane_value, tmp_path / "exited")
    before = tmux_state(tmux_server, world.target)
    pid_before = tmux_server.pane_pid(world.target)

    op_id = switch(world)

    assert world.wait_state(op_id) == "activated", world.store.read(op_id).failure
    assert tmux_server.pane_pid(world.target) != pid_before
    wait_for(lambda: tmux_state(tmux_server, world.target) == before, timeout=30,
             what="the pane's options and hooks to be as the user set them")
    assert SAVED_OPTION not in tmux_state(tmux_server, world.target)["pane options"]


def test_a_rolled_back_switch_also_gives_back_the_users_remain_on_exit(
    tmp_path: Path, tmux_server: TmuxServer
) -> None:
    world = tmux_world(tmp_path, tmux_server)
    world.start_pane(tmux_server)
    set_user_tmux(tmux_server, world.target, "off", None, tmp_path / "exited")
    before = tmux_state(tmux_server, world.target)
    op_id = str(ops.request(world.config, "t", "REBUILD", session_id=world.old_session)
                ["operation_id"])
    gate = tmp_path / "gate"
    world.hook(extra_env={"THREADLINE_WORKER_FAULT": f"pause:switch:{gate}"})
    wait_for(lambda: Path(str(gate) + ".reached").exists(), what="worker at the switch")
    Path(world.store.read(op_id).fact("candidate_path")).unlink()  # "No conversation found"
    gate.touch()

    assert world.wait_state(op_id) == "rolled_back", world.store.events(op_id)
    wait_for(lambda: tmux_state(tmux_server, world.target) == before, timeout=30,
             what="the pane's options and hooks to be as the user set them")
    assert tmux_server.display(world.target, "#{pane_dead}") == "0"


def test_the_users_pane_exited_hook_fires_again_after_a_switch(
    tmp_path: Path, tmux_server: TmuxServer
) -> None:
    world = tmux_world(tmp_path, tmux_server)
    world.start_pane(tmux_server)
    marker = tmp_path / "exited"
    set_user_tmux(tmux_server, world.target, None, None, marker)
    # A second pane keeps the window, so its pane-exited hook runs when claude's pane closes.
    tmux_server.cmd("split-window", "-d", "-t", world.target, "sleep 600")
    before = tmux_state(tmux_server, world.target)
    op_id = switch(world)
    assert world.wait_state(op_id) == "activated", world.store.read(op_id).failure
    wait_for(lambda: tmux_state(tmux_server, world.target) == before, timeout=30,
             what="the pane's options to be as the user set them")

    os.kill(tmux_server.pane_pid(world.target), signal.SIGTERM)  # the new claude ends

    wait_for(marker.exists, timeout=30, what="the user's pane-exited hook to run")


def test_settle_without_a_borrowed_option_changes_nothing(tmux_server: TmuxServer) -> None:
    target = tmux_server.new_session("s", "sleep 600", cwd="/")
    tmux_server.cmd("set-option", "-p", "-t", target, "remain-on-exit", "failed")
    before = tmux_state(tmux_server, target)
    TmuxDoor(target, tmux_server.socket_name).settle()
    assert tmux_state(tmux_server, target) == before


def test_a_second_switch_before_settle_keeps_the_first_saved_value(
    tmux_server: TmuxServer
) -> None:
    target = tmux_server.new_session("s", "sleep 600", cwd="/")
    before = tmux_state(tmux_server, target)
    door = TmuxDoor(target, tmux_server.socket_name)
    door.switch("x", ["sleep", "601"], Path("/"))
    door.switch("y", ["sleep", "602"], Path("/"))  # the rollback, before anything settled
    assert tmux_server.display(target, "#{remain-on-exit}") == "on"
    door.settle()
    assert tmux_state(tmux_server, target) == before
