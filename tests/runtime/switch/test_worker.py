"""runtime.switch.worker: every run ends terminal, and then the old artifacts are pruned."""

from __future__ import annotations

from pathlib import Path

from runtime.switch import worker
from runtime.switch.state import State
from tests.fixtures.switch_world import make_world


def test_a_worker_that_ends_its_operation_prunes_artifacts_beyond_keep_operations(
    tmp_path: Path,
) -> None:
    world = make_world(tmp_path)
    store = world.store.ensure()
    config = world.config.replace(switch=world.config.switch.replace(keep_operations=1))
    older = []
    for _ in range(3):
        op = store.create(reason={"reason": "old", "source": "test"}, bound_session_id=None,
                          door="tmux", state=State.FAILED)
        (store.artifacts(op.operation_id) / "source.jsonl").write_bytes(b"old backup")
        older.append(op.operation_id)
    missing = world.transcript.with_name("gone.jsonl")
    op = store.create(reason={"reason": "now", "source": "test"}, bound_session_id="gone",
                      door="tmux", state=State.SCHEDULED,
                      facts={"transcript_path": str(missing), "old_session_id": "gone"})

    final = worker.run(config, op.operation_id)

    assert final.state == State.FAILED and final.failure is not None
    assert final.failure["code"] == "source_missing"
    left = sorted(p.name for p in store.artifacts_dir.iterdir())
    assert left == sorted([op.operation_id])  # the finisher stays, older ones beyond 1 go
    assert store.ids() == [*older, op.operation_id]
    assert all("artifacts_pruned" in world.events(i) for i in older)
