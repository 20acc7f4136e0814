"""The operation store: atomic 0600 records, revisions, one active operation, timelines."""

from __future__ import annotations

import json
import stat
import threading
from pathlib import Path

import pytest

from runtime.errors import BusyError, IllegalTransitionError, StoreError
from runtime.state import State
from runtime.store import Store


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
