"""The switch worker: one detached process per scheduled operation.

``python -m runtime.worker OP_ID --config C`` runs the rebuild job (runtime.rebuild) for a
``scheduled`` operation or the rollback job (runtime.rollback) for a ``rollback_scheduled`` one.
Every path ends in a terminal state; every phase is a timeline line.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from runtime.config import Config, load_config
from runtime.doors.base import Door, open_door
from runtime.errors import StoreError, ThreadlineError
from runtime.job import FAULT_ENV, log
from runtime.state import State
from runtime.store import Operation, Store

__all__ = ["FAULT_ENV", "main", "run"]


def run(config: Config, operation_id: str) -> Operation:
    """Carry out the scheduled work of ``operation_id`` and return its final record."""
    if config.state_dir is None:
        raise StoreError("state_dir is not configured")
    store = Store(config.state_dir)
    op = store.read(operation_id)
    if op.state not in (State.SCHEDULED, State.ROLLBACK_SCHEDULED):
        log(f"{operation_id}: nothing to do in state {op.state.value!r}")
        return op
    try:
        door = open_door(config)
    except ThreadlineError as exc:
        code = "config"
        store.transition(operation_id, State.FAILED, phase="failed",
                         evidence={"code": code, "message": str(exc)},
                         failure={"code": code, "message": str(exc)})
        return store.read(operation_id)
    from runtime.rebuild import Rebuild
    from runtime.rollback import Rollback

    job_cls = Rebuild if op.state == State.SCHEDULED else Rollback
    try:
        job_cls(config, store, op, door).run()
    finally:
        _settle(door, operation_id)
    return store.read(operation_id)


def _settle(door: Door, operation_id: str) -> None:
    """Give the user's target back what the switch borrowed, whatever the outcome."""
    try:
        door.settle()
    except ThreadlineError as exc:
        log(f"{operation_id}: {exc}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runtime.worker")
    parser.add_argument("operation_id")
    parser.add_argument("--config", required=True)
    args = parser.parse_args(argv)
    try:
        final = run(load_config(args.config), args.operation_id)
    except ThreadlineError as exc:
        log(f"{args.operation_id}: {exc}")
        return 1
    log(f"{args.operation_id}: finished in state {final.state.value}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
