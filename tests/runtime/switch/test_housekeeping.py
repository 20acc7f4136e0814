"""runtime.switch.housekeeping: artifacts beyond keep_operations go, the evidence and the rollback
stay."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.switch.housekeeping import prune_artifacts
from runtime.switch.state import State
from tests.fixtures.switch_world import World, make_world


@pytest.fixture
def world(tmp_path: Path) -> World:
    return make_world(tmp_path)


def _finished(world: World, state: State) -> str:
    op = world.store.create(reason={"reason": "old", "source": "test"}, bound_session_id=None,
                            door="tmux", state=state)
    (world.store.artifacts(op.operation_id) / "source.jsonl").write_bytes(b"backup")
    return op.operation_id


def test_pruning_drops_old_artifacts_but_keeps_records_the_newest_activated_and_the_finisher(
    world: World,
) -> None:
    config = world.config.replace(switch=world.config.switch.replace(keep_operations=2))
    activated = _finished(world, State.ACTIVATED)
    old = [_finished(world, State.FAILED) for _ in range(3)]
    finisher = _finished(world, State.ROLLED_BACK)

    pruned = prune_artifacts(config, world.store, finisher)

    assert pruned == old[:2]
    artifacts = world.store.artifacts_dir
    assert sorted(p.name for p in artifacts.iterdir()) == [activated, old[2], finisher]
    assert world.store.ids() == [activated, *old, finisher]  # records stay: the evidence
    assert "artifacts_pruned" in world.events(old[0])
    assert prune_artifacts(config, world.store, finisher) == []
