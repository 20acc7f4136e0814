"""The operation store: atomic 0600 records, revisions, one active operation, timelines."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from runtime.errors import BusyError, IllegalTransitionError, StoreError
from runtime.switch.state import State
from runtime.switch.store import Store, new_operation_id
from tests.fixtures.switch_world import TL_REBUILD, make_world


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def new(store: Store, session: str | None = "s-1") -> str:
    op = store.create(reason={"reason": "test", "source": "cli"}, bound_session_id=session,
                      door="tmux")
    return op.operation_id


def test_records_are_0600_in_0700_folders_and_the_active_file_names_the_operation(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path / "state")
    op_id = new(store)
    record = store.record_path(op_id)
    assert mode(record) == 0o600 and mode(store.events_path(op_id)) == 0o600
    assert mode(store.operations_dir) == 0o700 and mode(store.root) == 0o700
    assert mode(store.artifacts(op_id)) == 0o700
    assert json.loads(record.read_text())["revision"] == 1
    assert store.active_path.read_text() == op_id
    assert not list(store.operations_dir.glob(".*.tmp"))


def test_a_second_create_while_one_is_active_is_busy(tmp_path: Path) -> None:
    store = Store(tmp_path)
    first = new(store)
    with pytest.raises(BusyError, match=first):
        new(store)


def test_transition_checks_the_table_and_the_revision(tmp_path: Path) -> None:
    store = Store(tmp_path)
    op_id = new(store)
    with pytest.raises(IllegalTransitionError):
        store.transition(op_id, State.ACTIVATED, phase="x")
    op = store.transition(op_id, State.SCHEDULED, phase="scheduled", expect_revision=1)
    assert op.revision == 2
    with pytest.raises(StoreError, match="revision 2, expected 1"):
        store.transition(op_id, State.RUNNING, phase="x", expect_revision=1)
    with pytest.raises(StoreError, match="expected 'pending'"):
        store.update(op_id, expect_state=State.PENDING, facts={"a": 1})


def test_leaving_the_active_states_frees_the_slot(tmp_path: Path) -> None:
    store = Store(tmp_path)
    op_id = new(store)
    store.transition(op_id, State.CANCELLED, phase="cancelled")
    assert store.active() is None and not store.active_path.exists()
    assert new(store) != op_id


def test_every_change_appends_a_timeline_line_with_time_and_phase(tmp_path: Path) -> None:
    store = Store(tmp_path)
    op_id = new(store)
    store.transition(op_id, State.SCHEDULED, phase="scheduled", evidence={"pid": 7})
    store.event(op_id, "note", size=3)
    events = store.events(op_id)
    assert [e["phase"] for e in events] == ["created", "scheduled", "note"]
    assert events[1]["pid"] == 7 and events[1]["previous"] == "pending"
    assert all(e["at"].endswith("Z") for e in events)


def test_facts_merge_and_records_round_trip(tmp_path: Path) -> None:
    store = Store(tmp_path)
    op_id = new(store)
    store.update(op_id, facts={"a": 1})
    store.update(op_id, facts={"b": [1, 2]}, failure={"code": "x", "message": "y"})
    op = store.read(op_id)
    assert dict(op.facts) == {"a": 1, "b": [1, 2]} and op.failure == {"code": "x", "message": "y"}
    with pytest.raises(StoreError, match="unknown operation field"):
        store.update(op_id, state="activated")


def test_an_unknown_or_malicious_operation_id_is_a_store_error(tmp_path: Path) -> None:
    store = Store(tmp_path)
    with pytest.raises(StoreError, match="no operation"):
        store.read("op-nope")
    with pytest.raises(StoreError, match="invalid operation id"):
        store.read("../etc/passwd")


def test_concurrent_creates_from_threads_leave_exactly_one_active_operation(
    tmp_path: Path,
) -> None:
    created: list[str] = []
    refused: list[str] = []

    def attempt() -> None:
        try:
            created.append(new(Store(tmp_path)))
        except BusyError as exc:
            refused.append(str(exc))

    threads = [threading.Thread(target=attempt) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(created) == 1 and len(refused) == 7
    assert Store(tmp_path).ids() == created


def test_gc_delete_removes_record_timeline_and_artifacts(tmp_path: Path) -> None:
    store = Store(tmp_path)
    op_id = new(store)
    (store.artifacts(op_id) / "source.jsonl").write_text("x")
    store.transition(op_id, State.CANCELLED, phase="cancelled")
    store.delete(op_id)
    assert store.ids() == [] and not (store.artifacts_dir / op_id).exists()
    assert not store.events_path(op_id).exists()


def test_a_malformed_record_is_a_store_error_naming_its_file_and_the_field(tmp_path: Path) -> None:
    store = Store(tmp_path / "state").ensure()
    path = store.record_path("op-broken")
    path.write_text('{"operation_id": "op-broken", "state": "pending"}')
    named = r"malformed operation record '.*op-broken\.json'.*revision"
    with pytest.raises(StoreError, match=named):
        store.read("op-broken")


# -- issue 11 §1: ids never wait for the clock; strays are reported, not looped on ----------
def plant_record(store: Store, name: str, state: str = "cancelled") -> None:
    store.ensure()
    (store.operations_dir / f"{name}.json").write_text(json.dumps({
        "operation_id": name, "state": state, "revision": 1,
        "created_at": "x", "updated_at": "x"}))


def test_request_finishes_when_a_record_sorts_after_now_or_a_stray_name_is_present(
    tmp_path: Path,
) -> None:
    world = make_world(tmp_path)
    world_store = world.store
    future = "op-29991231T235959.999999Z-abcdef"
    plant_record(world_store, future)
    plant_record(world_store, "op-broken")
    argv = [TL_REBUILD, "request", "--confirm", "REBUILD", "--reason", "clock stepped back",
            "--json", "--config", str(world.config_path)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    created = json.loads(done.stdout)["operation_id"]
    assert created > future and world_store.ids() == [future, created]
    assert world_store.strays() == ["op-broken.json"]


def test_ids_keep_creation_order_when_the_clock_reads_earlier_than_the_newest_id() -> None:
    newest = "op-29991231T235959.999999Z-abcdef"
    following = new_operation_id(after=newest)
    assert following.startswith("op-30000101T000000.000000Z-") and following > newest
    assert new_operation_id(after="op-broken") > "op-2026"
    with pytest.raises(StoreError, match="end of year 9999"):
        new_operation_id(after="op-99991231T235959.999999Z-abcdef")


def test_a_stuck_lock_holder_gives_a_store_error_naming_its_pid(tmp_path: Path) -> None:
    store = Store(tmp_path / "state").ensure()
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys; from runtime import proc\n"
         f"with proc.locked({str(store.lock_path)!r}):\n"
         "    print('held', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(StoreError, match=rf"store .*lock' locked by pid {holder.pid} since "
                                             r"\d{4}-\d\d-\d\dT"):
            new(Store(store.root, lock_timeout=0.2))
    finally:
        holder.communicate("", timeout=30)
    assert new(Store(store.root, lock_timeout=0.2))


# -- issue 11 §10: the record and the active hint are crash-consistent ------------------------
CRASH_AT_WRITE = """
import os, sys
from runtime import proc
from runtime.switch.state import State
from runtime.switch.store import Store, new_operation_id
from tests.fixtures.switch_world import TL_REBUILD, make_world
count, limit = [0], int(sys.argv[2])
def dying(real):
    def step(*args, **kwargs):
        count[0] += 1
        if count[0] > limit:
            os._exit(9)
        return real(*args, **kwargs)
    return step
proc.atomic_write, proc.remove = dying(proc.atomic_write), dying(proc.remove)
store = Store(sys.argv[1])
if sys.argv[3] == "create":
    store.create(reason={"reason": "r", "source": "cli"}, bound_session_id="s", door="tmux")
else:
    store.transition(store.active().operation_id, State.CANCELLED, phase="cancelled")
"""


@pytest.mark.parametrize("action", ["create", "finish"])
@pytest.mark.parametrize("writes_before_crash", [0, 1])
def test_a_crash_between_the_record_and_the_active_hint_leaves_no_unseen_active_operation(
    tmp_path: Path, action: str, writes_before_crash: int,
) -> None:
    store = Store(tmp_path / "state")
    if action == "finish":
        new(store)
    died = subprocess.run([sys.executable, "-c", CRASH_AT_WRITE, str(store.root),
                           str(writes_before_crash), action], timeout=60, check=False)
    assert died.returncode == 9
    active_records = [i for i in store.ids() if store.read(i).active]
    hinted = store.active()
    assert active_records == ([hinted.operation_id] if hinted else [])
    if hinted is None:
        assert new(store)  # the next request creates the one active operation
    else:
        with pytest.raises(BusyError):
            new(store)
    assert sum(store.read(i).active for i in store.ids()) == 1


def test_doctor_reports_a_stray_record_name_once_as_a_failed_store_check(tmp_path: Path) -> None:
    from runtime.switch import ops

    world = make_world(tmp_path)
    plant_record(world.store, "op-broken")
    store_check = ops.doctor(world.config)["checks"]["store"]
    assert store_check["ok"] is False
    assert store_check["detail"]["not_operation_ids"] == ["op-broken.json"]


def test_recover_finds_an_active_record_that_no_hint_names_and_settles_it(
    tmp_path: Path,
) -> None:
    from runtime.switch import ops

    world = make_world(tmp_path)
    op_id = new(world.store, session=world.old_session)
    world.store.active_path.unlink()  # what a crash of an older version left behind
    assert world.store.active() is None
    result = ops.recover(world.config)
    assert result["operation_id"] == op_id and "hint_restored" in world.events(op_id)
    assert world.store.active() is not None and world.store.active().operation_id == op_id


def test_a_state_dir_that_is_a_file_is_an_error_not_an_empty_store(tmp_path: Path) -> None:
    """``tl-rebuild list`` once said "no operations" (exit 0) when state_dir named a file or
    sat below one, hiding a broken config; a missing state_dir is still an empty store."""
    afile = tmp_path / "state"
    afile.write_text("")
    for root in (afile, afile / "below"):
        with pytest.raises(StoreError, match="cannot list"):
            Store(root).ids()
    assert Store(tmp_path / "missing").ids() == []


def test_a_non_utf8_argv_byte_survives_the_record_and_the_timeline(tmp_path: Path) -> None:
    from runtime.agents import decode_cmdline

    argv = list(decode_cmdline(b"/usr/bin/claude\0--append-system-prompt\0caf\xe9\0"))
    store = Store(tmp_path / "state")
    op_id = new(store)
    store.update(op_id, phase="identity", evidence={"argv": argv}, facts={"old_argv": argv})
    assert store.read(op_id).fact("old_argv") == argv
    assert store.events(op_id)[-1]["argv"] == argv
    json.loads(store.record_path(op_id).read_text("utf-8"))  # still valid UTF-8 JSON


def test_a_forward_step_of_the_wall_clock_does_not_make_a_live_worker_hung(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A VPS's clock steps forward (NTP after a pause, a restored snapshot): the heartbeat's
    age was wall-clock minus the file's mtime, so a live worker mid-switch looked hung after a
    step of more than 300 s, and the next request killed it. The age is now read on the boot's
    monotonic clock; a heartbeat of another boot, or of an older release, still falls back to
    the mtime (checked after the step)."""
    import os
    import time

    from runtime import procfs
    from runtime.switch import recover

    world = make_world(tmp_path)
    store = world.store
    op_id = new(store, world.old_session)
    store.transition(op_id, State.SCHEDULED, phase="scheduled")
    store.update(op_id, worker={"pid": os.getpid(), "start_time": procfs.start_time(os.getpid()),
                                "spawned_by": "hook"})
    store.heartbeat(op_id, "stable_wait")
    op = store.read(op_id)
    assert recover.worker_state(world.config, store, op) == "alive"
    wall = time.time
    monkeypatch.setattr(time, "time", lambda: wall() + 3600.0)  # the clock steps an hour on
    age = store.heartbeat_age(op_id)
    assert age is not None and age < 60.0
    assert recover.worker_state(world.config, store, op) == "alive"

    beat = store.artifacts(op_id) / "heartbeat"
    written = json.loads(beat.read_text())
    for stale in ({**written, "boot_id": "another-boot"},
                  {"at": written["at"], "phase": "stable_wait"}):  # before this release
        beat.write_text(json.dumps(stale))
        age = store.heartbeat_age(op_id)
        assert age is not None and age > 3500.0
        assert recover.worker_state(world.config, store, op) == "hung"


def test_the_spawn_grace_of_a_scheduled_operation_is_measured_on_the_monotonic_clock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A scheduled operation whose worker has not recorded itself yet gets a grace of
    ``SPAWN_GRACE_SECONDS`` before recover calls the worker gone. It was wall clock minus the
    record's mtime: a forward step of the clock settled a switch whose worker was starting,
    and a backward step of an hour kept a worker that never started "alive" for that hour,
    blocking every request. Scheduling stamps the boot's monotonic clock; a stamp of another
    boot (or none, an older release) still falls back to the mtime."""
    import os
    import time

    from runtime.switch import recover, schedule
    from runtime.switch.store import boot_id

    world = make_world(tmp_path)
    store = world.store
    op_id = new(store, world.old_session)
    payload = {"session_id": world.old_session, "transcript_path": str(world.transcript),
               "hook_event_name": "Stop", "stop_hook_active": False}
    op = schedule._schedule_rebuild(world.config, store, store.read(op_id), payload,  # noqa: SLF001 - the scheduling step alone, no worker spawned
                                    world.old_session)
    assert op is not None and op.state is State.SCHEDULED
    assert set(op.worker or {}) == {"boot_id", "monotonic"} and op.worker["boot_id"] == boot_id()
    assert recover.worker_state(world.config, store, op) == "alive"

    record = store.record_path(op_id)
    then = time.time() - 3600.0
    os.utime(record, (then, then))  # what a forward step of an hour looks like from here
    assert recover.worker_state(world.config, store, op) == "alive"
    store.update(op_id, worker={**op.worker, "boot_id": "another-boot"})
    os.utime(record, (then, then))
    assert recover.worker_state(world.config, store, store.read(op_id)) == "gone"

    store.update(op_id, worker={"boot_id": boot_id(),
                                "monotonic": time.monotonic() - recover.SPAWN_GRACE_SECONDS - 1})
    assert recover.worker_state(world.config, store, store.read(op_id)) == "gone"
    now = time.time() + 3600.0
    os.utime(record, (now, now))  # a backward step: the mtime lies in the future
    assert recover.worker_state(world.config, store, store.read(op_id)) == "gone"
