"""The switch worker: one detached process per scheduled operation.

``python -m runtime.switch.worker OP_ID --config C`` runs the rebuild job (runtime.switch.rebuild)
for a
``scheduled`` operation or the rollback job (runtime.switch.rollback) for a ``rollback_scheduled``
one.
Every path ends in a terminal state; every phase is a timeline line.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from runtime.agents.kind import AgentKind
from runtime.config import Config, load_config
from runtime.doors.base import Door, open_door
from runtime.errors import StoreError, ThreadlineError
from runtime.switch.job import FAULT_ENV, log
from runtime.switch.state import WORKER_STATES, State
from runtime.switch.store import Operation, Store

if TYPE_CHECKING:
    from runtime.switch.rebuild import Rebuild
    from runtime.switch.rollback import Rollback

__all__ = ["FAULT_ENV", "main", "run"]


def job_classes(agent: AgentKind) -> tuple[type[Rebuild], type[Rollback]]:
    """The rebuild and rollback jobs that switch ``agent`` (the worker's and recover's choice)."""
    if agent is AgentKind.CODEX:
        from runtime.switch.codex import CodexRebuild, CodexRollback

        return CodexRebuild, CodexRollback
    from runtime.switch.rebuild import Rebuild
    from runtime.switch.rollback import Rollback

    return Rebuild, Rollback


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
    rebuild, rollback = job_classes(config.agent)
    job_cls: type[Rebuild] | type[Rollback] = rebuild if op.state == State.SCHEDULED else rollback
    try:
        job_cls(config, store, op, door).run()
    finally:
        _settle(door, store, operation_id)
    final = store.read(operation_id)
    if not final.active:
        _prune(config, store, operation_id)
    return final


def _prune(config: Config, store: Store, operation_id: str) -> None:
    """Drop artifacts beyond keep_operations; a failure here never changes the outcome."""
    from runtime.switch.housekeeping import prune_artifacts

    try:
        pruned = prune_artifacts(config, store, operation_id)
    except ThreadlineError as exc:
        log(f"{operation_id}: pruning old artifacts failed: {exc}")
        return
    if pruned:
        log(f"{operation_id}: pruned the artifacts of {', '.join(pruned)}")


def scheduled_operation(config: Config) -> str:
    """The id of the one operation waiting for a worker (exactly one is active at a time)."""
    if config.state_dir is None:
        raise StoreError("state_dir is not configured")
    op = Store(config.state_dir).active()
    if op is None or op.state not in (State.SCHEDULED, State.ROLLBACK_SCHEDULED):
        raise StoreError(f"no scheduled operation in {str(config.state_dir)!r}")
    return op.operation_id


def _settle(door: Door, store: Store, operation_id: str) -> None:
    """Give the user's target back what the switch borrowed, whatever the outcome — unless
    another worker took the operation over meanwhile (a rollback requested during the watch
    after activation): that worker gives it back when it ends."""
    try:
        if store.read(operation_id).state in WORKER_STATES:
            log(f"{operation_id}: another worker holds the target; it settles it")
            return
        door.settle()
    except ThreadlineError as exc:
        log(f"{operation_id}: {exc}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runtime.switch.worker")
    parser.add_argument("operation_id", nargs="?")
    parser.add_argument("--scheduled", action="store_true",
                        help="the one scheduled operation (how sudo starts the worker)")
    parser.add_argument("--config", required=True)
    args = parser.parse_args(argv)
    if (args.operation_id is None) == (not args.scheduled):
        parser.error("give an operation id or --scheduled, not both")
    try:
        config = load_config(args.config)
        if args.scheduled:
            args.operation_id = scheduled_operation(config)
            if os.fork() != 0:
                # Under sudo: sudo stays behind in the unit's cgroup as our parent and relays
                # the restart's SIGTERM to its command (measured: the worker died right after
                # ``systemctl restart``). Returning at once lets sudo exit; the child keeps the
                # scope (its cgroup) and records its own pid at worker_started.
                return 0
            os.setsid()
        final = run(config, args.operation_id)
    except ThreadlineError as exc:
        log(f"{args.operation_id}: {exc}")
        return 1
    log(f"{args.operation_id}: finished in state {final.state.value}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
