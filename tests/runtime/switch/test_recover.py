# ruff: noqa: F811 - the tmux_server fixture is imported by name and injected as a parameter
"""Recovery: a worker killed in any phase never blocks the next request; the operation ends
in the state that matches what really runs."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import pytest

from runtime import procfs as identity
from runtime.switch import ops
from tests.fixtures.switch_world import World, tmux_world
from tests.fixtures.tmux import TmuxServer, tmux_server, wait_for  # noqa: F401 - fixture

pytestmark = pytest.mark.real_tmux


def kill_worker_at(world: World, phase: str) -> str:
    op_id = ops.request(world.config, "r", "REBUILD", session_id=world.old_session)[
        "operation_id"]
    assert world.hook(extra_env={"THREADLINE_WORKER_FAULT": f"kill:{phase}"}).returncode == 0

    def dead_worker() -> bool:
        op = world.store.read(op_id)
        worker = op.worker or {}
        return bool(worker.get("start_time")) and not identity.alive(
            worker["pid"], worker["start_time"]) and phase in _reached(world, op_id, phase)

    wait_for(dead_worker, what=f"worker killed at {phase}")
    return op_id


def _reached(world: World, op_id: str, phase: str) -> list[str]:
    # A phase is "reached" once its timeline line (or the one right before the fault) exists.
    before = {"running": "worker_started", "frozen": "frozen", "verified": "verified",
              "activating": "activating", "switched": "switched", "resumed": "resumed_old",
              "rollback_switched": "switched"}
    return [phase] if before[phase] in world.events(op_id) else []


@pytest.mark.parametrize(
    ("phase", "final", "runs"),
    [
        ("running", "failed", "old"),
        ("frozen", "failed", "old"),
        ("verified", "failed", "old"),
        ("activating", "failed", "old"),
        ("switched", "activated", "new"),
    ],
)
def test_worker_killed_in_a_phase_is_recovered_to_the_matching_end(
    tmp_path: Path, tmux_server: TmuxServer, phase: str, final: str, runs: str
) -> None:
    world = tmux_world(tmp_path, tmux_server)
    world.start_pane(tmux_server)
    op_id = kill_worker_at(world, phase)
    result = ops.recover(world.config)
    assert result["recovered"] == op_id and result["state"] == final
    op = world.store.read(op_id)
    argv = identity.cmdline(tmux_server.pane_pid(world.target)) or ()
    expected = world.old_session if runs == "old" else op.fact("new_session_id")
    assert expected in argv
    if final == "failed":
        assert op.failure is not None and op.failure["code"] == "worker_lost"
        candidate = op.fact("candidate_path")
        assert candidate is None or not Path(candidate).exists()
    assert "recovered" in world.events(op_id)
    # the same ISO-8601 form (with milliseconds) as every other time in the record
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", op.fact("recovered_at"))


def test_worker_killed_after_resuming_the_old_session_is_recovered_as_rolled_back(
    tmp_path: Path, tmux_server: TmuxServer
) -> None:
    world = tmux_world(tmp_path, tmux_server, resume_channels=())  # deaf: health fails
    world.start_pane(tmux_server)
    op_id = kill_worker_at(world, "resumed")
    assert ops.recover(world.config)["state"] == "rolled_back"
    assert world.store.read(op_id).failure["code"] == "worker_lost"  # type: ignore[index]
    assert world.old_session in (identity.cmdline(tmux_server.pane_pid(world.target)) or ())


def test_recovery_after_the_switch_resumes_the_old_session_when_the_new_one_is_deaf(
    tmp_path: Path, tmux_server: TmuxServer
) -> None:
    # The configured resume argv lost the channel flag: the new claude names the new session
    # in its argv but would never hear the channel again. Recovery must not call it activated.
    world = tmux_world(tmp_path, tmux_server, resume_channels=())
    world.start_pane(tmux_server)
    op_id = kill_worker_at(world, "switched")
    new_id = world.store.read(op_id).fact("new_session_id")
    assert new_id in (identity.cmdline(tmux_server.pane_pid(world.target)) or ())
    result = ops.recover(world.config)
    assert result["state"] == "rolled_back", result
    op = world.store.read(op_id)
    assert op.failure is not None and op.failure["code"] == "unhealthy"
    assert "missing channel flag" in op.failure["message"]
    assert op.fact("resumed_healthy") is True  # the old session came back with its flag
    argv = identity.cmdline(tmux_server.pane_pid(world.target)) or ()
    assert world.old_session in argv and "server:companion" in argv
    phases = world.events(op_id)
    assert phases.index("recovered_health") < phases.index("resumed_old")


def test_recovery_after_the_switch_checks_the_channel_servers_too(
    tmp_path: Path, tmux_server: TmuxServer
) -> None:
    world = tmux_world(tmp_path, tmux_server, servers=("companion",))
    world.start_pane(tmux_server)
    op_id = kill_worker_at(world, "switched")
    assert ops.recover(world.config)["state"] == "activated"
    health = [e for e in world.store.events(op_id) if e["phase"] == "recovered_health"][0]
    assert health["ok"] and health["channel_servers"]["companion"]["status"] == "running"


def test_worker_killed_during_a_rollback_is_recovered_from_what_runs(
    tmp_path: Path, tmux_server: TmuxServer
) -> None:
    world = tmux_world(tmp_path, tmux_server)
    world.start_pane(tmux_server)
    op_id = ops.request(world.config, "r", "REBUILD", session_id=world.old_session)[
        "operation_id"]
    world.hook()
    assert world.wait_state(op_id) == "activated"
    new_id = world.store.read(op_id).fact("new_session_id")
    ops.rollback_request(world.config, op_id, "ROLLBACK")
    world.hook(session_id=new_id, extra_env={"THREADLINE_WORKER_FAULT": "kill:rollback_switched"})
    wait_for(lambda: "switched" in world.events(op_id)[-3:] and not identity.alive(
        (world.store.read(op_id).worker or {}).get("pid"),
        (world.store.read(op_id).worker or {}).get("start_time")), what="rollback worker dead")
    assert ops.recover(world.config)["state"] == "rolled_back"


def test_the_next_request_recovers_a_lost_worker_by_itself(
    tmp_path: Path, tmux_server: TmuxServer
) -> None:
    world = tmux_world(tmp_path, tmux_server)
    world.start_pane(tmux_server)
    stuck = kill_worker_at(world, "frozen")
    fresh = ops.request(world.config, "again", "REBUILD", session_id=world.old_session)
    assert fresh["operation_id"] != stuck and fresh["state"] == "pending"
    assert world.store.read(stuck).state.value == "failed"


def test_the_next_stop_recovers_a_lost_worker_and_nothing_blocks(
    tmp_path: Path, tmux_server: TmuxServer
) -> None:
    world = tmux_world(tmp_path, tmux_server)
    world.start_pane(tmux_server)
    stuck = kill_worker_at(world, "verified")
    assert world.hook().returncode == 0
    assert world.store.read(stuck).state.value == "failed"
    assert world.store.active() is None


def test_recover_with_nothing_active_says_so(tmp_path: Path, tmux_server: TmuxServer) -> None:
    world = tmux_world(tmp_path, tmux_server)
    assert ops.recover(world.config)["message"] == "no active operation"


def test_a_scheduled_operation_whose_worker_never_started_is_failed_by_recover(
    tmp_path: Path, tmux_server: TmuxServer
) -> None:
    import subprocess

    from runtime.switch.state import State

    world = tmux_world(tmp_path, tmux_server)
    op_id = ops.request(world.config, "r", "REBUILD")["operation_id"]
    gone = subprocess.Popen(["true"])
    gone.wait()
    world.store.transition(op_id, State.SCHEDULED, phase="scheduled",
                           worker={"pid": gone.pid, "start_time": None})
    result = ops.recover(world.config)
    assert result["state"] == "failed" and result["failure"]["code"] == "worker_lost"
    assert "nothing was switched" in result["failure"]["message"]


def test_doctor_reads_the_door_identity_and_the_store(
    tmp_path: Path, tmux_server: TmuxServer
) -> None:
    world = tmux_world(tmp_path, tmux_server)
    world.start_pane(tmux_server)
    report = ops.doctor(world.config)
    assert report["ok"], report
    assert report["checks"]["door"]["detail"]["identity"] == str(
        tmux_server.pane_pid(world.target))
    bad = tmux_world(tmp_path / "b", tmux_server, target="nowhere:9.9", resume_channels=())
    checks = ops.doctor(bad.config)["checks"]
    assert not checks["door"]["ok"] and not checks["resume_argv_channels"]["ok"]
    done = bad.cli("doctor", "--json")
    assert done.returncode == 1

    # claude exited and tmux kept the pane: the door check fails and says what brings it back
    tmux_server.cmd("set-option", "-p", "-t", world.target, "remain-on-exit", "on")
    dead_pid = tmux_server.pane_pid(world.target)
    os.killpg(dead_pid, signal.SIGKILL)
    wait_for(lambda: tmux_server.display(world.target, "#{pane_dead}") == "1",
             what="the pane dead")
    door = ops.doctor(world.config)["checks"]["door"]
    assert not door["ok"]
    assert door["detail"]["error"] == (
        f"tmux pane {world.target!r} is dead (pid {dead_pid} exited); tl-rebuild restart "
        f"[--session ID] starts claude there again")


def test_a_worker_killed_after_the_switch_still_gets_the_users_remain_on_exit_back(
    tmp_path: Path, tmux_server: TmuxServer
) -> None:
    world = tmux_world(tmp_path, tmux_server)
    world.start_pane(tmux_server)
    tmux_server.cmd("set-option", "-p", "-t", world.target, "remain-on-exit", "off")
    before = tmux_server.cmd("show-options", "-p", "-t", world.target).stdout
    op_id = kill_worker_at(world, "switched")
    assert "@threadline-remain-on-exit" in tmux_server.cmd(
        "show-options", "-p", "-t", world.target).stdout  # borrowed, and the worker is gone
    result = ops.recover(world.config)
    assert result["recovered"] == op_id and result["state"] == "activated"
    assert tmux_server.cmd("show-options", "-p", "-t", world.target).stdout == before


def test_a_worker_that_died_before_recording_itself_is_gone_even_once_its_pid_is_reused(
    tmp_path: Path, tmux_server: TmuxServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hook records the start time of the worker it spawned: when that worker dies before
    its own first record (here: its Python cannot start) and the kernel hands the pid to
    another process, recover must not take that process for the worker forever."""
    import os

    from runtime.switch.schedule import on_stop

    world = tmux_world(tmp_path, tmux_server)
    op_id = ops.request(world.config, "r", "REBUILD", session_id=world.old_session)[
        "operation_id"]
    monkeypatch.setenv("PYTHONHOME", str(tmp_path / "no-python-here"))  # the worker only
    on_stop(world.config, {"session_id": world.old_session,
                           "transcript_path": str(world.transcript),
                           "hook_event_name": "Stop", "stop_hook_active": False})
    worker = dict(world.store.read(op_id).worker or {})
    assert worker["spawned_by"] == "hook" and worker["start_time"] is not None
    wait_for(lambda: not identity.alive(worker["pid"]), what="the worker to exit")
    assert world.store.read(op_id).state.value == "scheduled"  # it never recorded itself

    reused = {**worker, "pid": os.getpid()}  # the pid now names another, live process
    world.store.update(op_id, worker=reused)
    result = ops.recover(world.config)
    assert result["recovered"] == op_id and result["state"] == "failed"
    assert result["failure"]["code"] == "worker_lost"
