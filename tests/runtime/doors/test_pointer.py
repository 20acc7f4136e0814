"""The pointer door: a runner loop that resumes ``$(cat pointer)`` picks up the new session."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.doors.pointer import PointerDoor, pointed_session, read_pointer, write_pointer
from runtime.errors import IdentityConflictError
from runtime.switch import ops
from tests.fixtures.switch_world import STANDIN, TL_REBUILD, World, make_world
from tests.fixtures.tmux import wait_for

SESSION = "5f0c1d2e-3a4b-4c5d-8e6f-7a8b9c0d1e2f"
RUNNER = """#!/bin/sh
# One iteration of a runner loop: resume the pointer's session, then run the Stop hook.
set -eu
cd "$WORKDIR"
session=$(head -n 1 "$POINTER")
"$PYTHON" "$STANDIN" -p --resume "$session" "$1"
"$TL_REBUILD" hook-stop --config "$CONFIG" < /dev/null
"""


@pytest.fixture
def world(tmp_path: Path) -> World:
    pointer = tmp_path / "pointer"
    w = make_world(tmp_path, door="pointer", pointer=pointer, resume_channels=(),
                   channel_flags=())
    write_pointer(pointer, w.old_session)
    return w


def run_once(world: World, message: str) -> subprocess.CompletedProcess[str]:
    script = world.root / "runner.sh"
    script.write_text(RUNNER)
    script.chmod(0o755)
    env = {"WORKDIR": str(world.workdir), "POINTER": str(world.root / "pointer"),
           "PYTHON": sys.executable, "STANDIN": str(STANDIN), "TL_REBUILD": TL_REBUILD,
           "CONFIG": str(world.config_path), **world.env}
    return subprocess.run([str(script), message], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=120)


def test_runner_loop_picks_up_the_new_session_on_its_next_call(world: World) -> None:
    first = run_once(world, "before the rebuild")
    assert first.returncode == 0 and first.stdout.endswith("{}\n"), first.stderr
    op_id = ops.request(world.config, "full", "REBUILD", session_id=world.old_session)[
        "operation_id"]
    old_bytes = world.transcript.read_bytes()
    second = run_once(world, "the turn that asked")
    assert second.returncode == 0, second.stderr
    op = world.store.read(op_id)
    assert op.state.value == "activated", op.failure
    new_id = op.fact("new_session_id")
    assert read_pointer(world.root / "pointer") == new_id
    after_request = world.transcript.read_bytes()
    assert after_request.startswith(old_bytes)
    third = run_once(world, "after the rebuild")
    assert third.returncode == 0, third.stderr
    starts = [s["argv"] for s in world.starts()]
    assert starts[2][starts[2].index("--resume") + 1] == new_id
    new_file = world.project_dir / f"{new_id}.jsonl"
    assert "after the rebuild" in new_file.read_text()
    assert world.transcript.read_bytes() == after_request  # the old session is untouched
    assert "the turn that asked" in new_file.read_text()  # carried over verbatim


def test_pointer_writes_are_atomic_0600_and_empty_pointer_is_a_conflict(tmp_path: Path) -> None:
    path = tmp_path / "pointer"
    door = PointerDoor(path)
    with pytest.raises(IdentityConflictError, match="cannot read"):
        door.identity()
    path.write_text("\n")
    with pytest.raises(IdentityConflictError, match="holds no session id"):
        door.identity()
    door.switch("abc-123", (), tmp_path)
    assert door.identity() == "abc-123" and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert not list(tmp_path.glob(".*.tmp"))


def runner_hook(world: World, extra_env: dict[str, str] | None = None
                ) -> subprocess.Popen[str]:
    """The runner's own ``tl-rebuild hook-stop < /dev/null`` between two claude calls."""
    return subprocess.Popen([TL_REBUILD, "hook-stop", "--config", str(world.config_path)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **world.env, **(extra_env or {})})


def test_pointer_naming_another_session_is_a_conflict(world: World) -> None:
    op_id = ops.request(world.config, "x", "REBUILD", session_id=world.old_session)[
        "operation_id"]
    other = world.project_dir / "someone-else.jsonl"
    other.write_text(world.transcript.read_text())
    gate = world.root / "gate"
    hook = runner_hook(world, {"THREADLINE_WORKER_FAULT": f"pause:running:{gate}"})
    wait_for(lambda: Path(f"{gate}.reached").exists(), what="the worker to start")
    write_pointer(world.root / "pointer", "someone-else")  # a third party moved the pointer
    gate.touch()
    out, _ = hook.communicate(timeout=120)
    assert hook.returncode == 0 and out.endswith("{}\n")
    op = world.store.read(op_id)
    assert op.state.value == "failed" and op.failure is not None
    assert op.failure["code"] == "session_conflict"
    assert "someone-else" in op.failure["message"]
    assert read_pointer(world.root / "pointer") == "someone-else"  # nothing switched


def test_stop_from_inside_claude_p_defers_and_the_runner_call_without_payload_switches(
        world: World) -> None:
    op_id = ops.request(world.config, "x", "REBUILD", session_id=world.old_session)[
        "operation_id"]
    inside = world.hook()  # Claude Code's Stop payload: claude -p waits for this hook
    assert inside.returncode == 0 and inside.stdout == "{}\n", inside.stderr
    op = world.store.read(op_id)
    assert op.state.value == "pending" and op.worker is None
    events = world.store.events(op_id)
    deferred = [e for e in events if e["phase"] == "stop_deferred"]
    assert len(deferred) == 1 and deferred[0]["session_id"] == world.old_session
    assert deferred[0]["reason"] == (
        "pointer door: the runner's hook-stop between calls switches")
    assert deferred[0]["pointer_adopted"] is False  # the pointer already named the session
    assert "worker_started" not in [e["phase"] for e in events]
    assert read_pointer(world.root / "pointer") == world.old_session

    runner = runner_hook(world)
    out, err = runner.communicate(timeout=120)
    assert runner.returncode == 0 and out.endswith("{}\n"), err
    op = world.store.read(op_id)
    assert op.state.value == "activated", op.failure
    assert read_pointer(world.root / "pointer") == op.fact("new_session_id")


def test_stop_from_inside_claude_p_without_a_pointer_adopts_the_stopping_session(
        world: World) -> None:
    (world.root / "pointer").unlink()  # the runner started claude with its launch argv
    op_id = ops.request(world.config, "x", "REBUILD", session_id=world.old_session)[
        "operation_id"]
    assert world.hook().returncode == 0
    op = world.store.read(op_id)
    assert op.state.value == "pending"
    deferred = [e for e in world.store.events(op_id) if e["phase"] == "stop_deferred"]
    assert deferred[0]["pointer_adopted"] is True
    assert read_pointer(world.root / "pointer") == world.old_session
    runner = runner_hook(world)
    runner.communicate(timeout=120)
    assert world.store.read(op_id).state.value == "activated"


def test_stop_from_another_session_inside_claude_p_adopts_nothing(world: World) -> None:
    (world.root / "pointer").unlink()
    other = world.project_dir / "someone-else.jsonl"
    other.write_text(world.transcript.read_text())
    op_id = ops.request(world.config, "x", "REBUILD", session_id=world.old_session)[
        "operation_id"]
    assert world.hook(session_id="someone-else").returncode == 0
    assert world.store.read(op_id).state.value == "pending"
    assert not (world.root / "pointer").exists()


def test_rollback_through_the_runner_points_back_at_the_old_session(world: World) -> None:
    run_once(world, "first")
    op_id = ops.request(world.config, "full", "REBUILD", session_id=world.old_session)[
        "operation_id"]
    run_once(world, "second")
    new_id = world.store.read(op_id).fact("new_session_id")
    run_once(world, "said in the new session")
    result = ops.rollback_request(world.config, op_id, "ROLLBACK")
    assert result["turns_since_switch"] == 1
    done = run_once(world, "last word in the new session")
    assert done.returncode == 0, done.stderr
    op = world.store.read(op_id)
    assert op.state.value == "rolled_back", op.failure
    assert read_pointer(world.root / "pointer") == world.old_session
    run_once(world, "back in the old session")
    assert "back in the old session" in world.transcript.read_text()
    assert "back in the old session" not in (world.project_dir / f"{new_id}.jsonl").read_text()


def test_tl_launch_reads_the_first_line_and_treats_missing_or_blank_as_none(tmp_path: Path) -> None:
    pointer = tmp_path / "pointer"
    assert pointed_session(pointer) is None
    pointer.write_text("\n  \n")
    assert pointed_session(pointer) is None
    pointer.write_text(f"  {SESSION}\nignored\n")
    assert pointed_session(pointer) == SESSION


def test_the_doors_read_the_line_a_runner_loop_reads(tmp_path: Path) -> None:
    pointer = tmp_path / "pointer"
    pointer.write_text(f"{SESSION}\nleftover\n")
    head = subprocess.run(["head", "-n", "1", str(pointer)], capture_output=True, text=True,
                          check=True).stdout.strip()
    assert read_pointer(pointer) == pointed_session(pointer) == head == SESSION


@pytest.mark.skipif(os.geteuid() != 0, reason="only root writes a pointer for another user")
def test_root_writes_the_pointer_0600_as_the_claude_users_file(tmp_path: Path) -> None:
    folder = tmp_path / "pointers"  # the pointer dir apply makes: the claude user's, 0700
    folder.mkdir(mode=0o700)
    os.chown(folder, 54321, 54322)
    pointer = folder / "session.pointer"
    write_pointer(pointer, SESSION)
    st = pointer.stat()
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (54321, 54322, 0o600)
    os.chown(pointer, 54323, 54324)  # a pointer already there keeps its owner
    write_pointer(pointer, "abc-123")
    st = pointer.stat()
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (54323, 54324, 0o600)
    assert pointed_session(pointer) == "abc-123"
