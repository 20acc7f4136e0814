"""The shared worker-job plumbing: which argv resumes the OLD session after a failed switch."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.doors.pointer import PointerDoor
from runtime.switch import ops
from runtime.switch.job import Job
from tests.fixtures.switch_world import CHANNEL, make_world

OLD = "0e0e0e0e-0000-4000-8000-00000000000a"


@pytest.fixture
def job(tmp_path: Path) -> Job:
    world = make_world(tmp_path, resume_channels=())  # the configured resume argv is deaf
    op_id = ops.request(world.config, "x", "REBUILD", session_id=world.old_session)[
        "operation_id"]
    return Job(world.config, world.store, world.store.read(op_id), PointerDoor(tmp_path / "p"))


def test_old_session_is_resumed_with_the_old_process_argv_and_its_channel_flags(
        job: Job) -> None:
    old_argv = ["/usr/bin/claude", "--continue", *CHANNEL, "--model", "opus"]
    argv, source = job.old_resume_argv(OLD, old_argv)
    assert source == "old_process"
    assert list(argv) == ["/usr/bin/claude", "--resume", OLD, *CHANNEL, "--model", "opus"]


def test_an_existing_resume_of_the_new_session_is_replaced_by_the_old_one(job: Job) -> None:
    argv, source = job.old_resume_argv(OLD, ["/usr/bin/claude", "--resume", "new-id", *CHANNEL])
    assert (source, list(argv)) == ("old_process",
                                    ["/usr/bin/claude", "--resume", OLD, *CHANNEL])


@pytest.mark.parametrize("old_argv", [
    [],  # unknown (the door has no process, or /proc was unreadable)
    ["/bin/sh", "-c", "claude --continue"],  # a shell: cannot be rewritten safely
    ["/usr/bin/claude", "--continue", "--resume", "x"],  # two session choices
])
def test_unknown_or_unusable_old_argv_falls_back_to_the_configured_resume_argv(
        job: Job, old_argv: list[str]) -> None:
    argv, source = job.old_resume_argv(OLD, old_argv)
    assert source == "configured"
    assert argv == job.resume_argv(OLD) and OLD in argv
    assert not any(flag in argv for flag in CHANNEL)
