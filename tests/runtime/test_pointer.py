"""The pointer door: a runner loop that resumes ``$(cat pointer)`` picks up the new session."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from runtime import ops
from runtime.doors.pointer import PointerDoor, read_pointer, write_pointer
from runtime.errors import IdentityConflictError
from tests.fixtures.switch_world import STANDIN, TL_REBUILD, World, make_world

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


def test_pointer_naming_another_session_is_a_conflict(world: World) -> None:
    op_id = ops.request(world.config, "x", "REBUILD", session_id=world.old_session)[
        "operation_id"]
    other = world.project_dir / "someone-else.jsonl"
    other.write_text(world.transcript.read_text())
    write_pointer(world.root / "pointer", "someone-else")
    payload = {"session_id": world.old_session, "transcript_path": str(world.transcript)}
    done = subprocess.run([TL_REBUILD, "hook-stop", "--config", str(world.config_path)],
                          input=json.dumps(payload), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    op = world.store.read(op_id)
    assert op.state.value == "failed" and op.failure is not None
    assert op.failure["code"] == "session_conflict"


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
