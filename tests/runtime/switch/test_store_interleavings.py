"""The operations store under random interleavings (issue 11 lasting guard): requests from two
sessions, cancels, Stops (the real schedule + worker, failing on an impossible tmux target),
workers that die in any worker phase, and processes killed between two durable writes.

After every step at most one operation is active and the ``active`` hint names it; after
``recover`` no operation is left in a worker phase, and after cancelling what still waits for
a Stop every operation is terminal."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime.errors import BusyError, IllegalTransitionError, StoreError
from runtime.switch import ops
from runtime.switch.schedule import on_stop
from runtime.switch.state import ACTIVE, WORKER_STATES, State
from tests.fixtures.switch_world import World, make_world
from tests.runtime.switch.test_store import CRASH_AT_WRITE

SESSIONS = ("OLD", "s-2")  # OLD: the world's real session, whose transcript exists
PHASES = (State.SCHEDULED, State.RUNNING, State.VERIFYING, State.ACTIVATING)
STEPS = st.lists(st.one_of(
    st.tuples(st.just("request"), st.sampled_from(SESSIONS)),
    st.tuples(st.just("cancel"), st.just("")),
    st.tuples(st.just("stop"), st.sampled_from(SESSIONS)),
    st.tuples(st.just("worker_dies"), st.sampled_from(range(len(PHASES)))),
    st.tuples(st.just("killed_between_writes"), st.sampled_from(("0", "1"))),
), min_size=1, max_size=8)


def dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def step(world: World, action: str, arg: str | int) -> None:
    config, store = world.config, world.store
    active = store.active()
    arg = world.old_session if arg == "OLD" else arg
    if action == "request":
        try:
            ops.request(config, "fuzz", "REBUILD", session_id=str(arg))
        except BusyError:
            assert active is not None
    elif action == "cancel" and active is not None:
        try:
            ops.cancel(config, active.operation_id, "CANCEL")
        except IllegalTransitionError:
            assert active.state not in (State.PENDING, State.ROLLBACK_PENDING)
    elif action == "stop":
        on_stop(config, {"session_id": arg, "hook_event_name": "Stop",
                         "transcript_path": str(world.transcript)}, wait=True)
    elif action == "worker_dies" and active is not None and active.state == State.PENDING:
        op = active
        for phase in PHASES[: int(arg) + 1]:
            op = store.transition(op.operation_id, phase, phase=phase.value,
                                  worker={"pid": dead_pid(), "start_time": "0"})
    elif action == "killed_between_writes" and active is None:
        died = subprocess.run([sys.executable, "-c", CRASH_AT_WRITE, str(store.root), str(arg),
                               "create"], timeout=60, check=False)
        assert died.returncode == 9


def check_one_active(world: World) -> None:
    store = world.store
    active_records = [i for i in store.ids() if store.read(i).state in ACTIVE]
    assert len(active_records) <= 1, active_records
    hinted = store.active()
    assert active_records == ([hinted.operation_id] if hinted else [])


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(STEPS)
def test_random_interleavings_keep_one_active_operation_and_recover_settles_every_one(
    steps: list[tuple[str, str | int]],
) -> None:
    sandbox = os.environ.get("THREADLINE_TEST_SANDBOX")  # removed at the end of the run
    root = Path(tempfile.mkdtemp(prefix="tl-interleave-", dir=sandbox))
    world = make_world(root)
    world.store.ensure()
    for action, arg in steps:
        step(world, action, arg)
        check_one_active(world)
    try:
        ops.recover(world.config)
    except StoreError:
        pass
    store = world.store
    assert not [i for i in store.ids() if store.read(i).state in WORKER_STATES]
    waiting = store.active()
    if waiting is not None:
        ops.cancel(world.config, waiting.operation_id, "CANCEL")
    assert all(store.read(i).state not in ACTIVE for i in store.ids())
