"""Operation states: one enum, one transition table, one check.

    pending → scheduled → running → verifying → activating → activated
    activated → rollback_pending → rollback_scheduled → rolled_back
    activated → rollback_scheduled → rolled_back   (the watch after activation failed)

``cancelled``, ``failed`` (with ``failure.code = "session_conflict"`` when a third party changed
the session) and ``rolled_back`` end an operation. ``activated`` ends the rebuild but may still
be rolled back. ``runtime.switch.store.Store.transition`` is the one function that changes state; it
calls ``check_transition`` under the store lock.
"""

from __future__ import annotations

from enum import StrEnum

from runtime.errors import IllegalTransitionError


class State(StrEnum):
    """Where an operation is in its life."""

    PENDING = "pending"
    SCHEDULED = "scheduled"
    RUNNING = "running"
    VERIFYING = "verifying"
    ACTIVATING = "activating"
    ACTIVATED = "activated"
    CANCELLED = "cancelled"
    FAILED = "failed"
    ROLLBACK_PENDING = "rollback_pending"
    ROLLBACK_SCHEDULED = "rollback_scheduled"
    ROLLED_BACK = "rolled_back"


S = State
TRANSITIONS: dict[State, frozenset[State]] = {
    S.PENDING: frozenset({S.SCHEDULED, S.CANCELLED, S.FAILED}),
    S.SCHEDULED: frozenset({S.RUNNING, S.FAILED}),
    S.RUNNING: frozenset({S.VERIFYING, S.FAILED}),
    S.VERIFYING: frozenset({S.ACTIVATING, S.FAILED}),
    # activating -> rolled_back: the new session was unhealthy and the old one was resumed.
    S.ACTIVATING: frozenset({S.ACTIVATED, S.ROLLED_BACK, S.FAILED}),
    # activated -> rollback_scheduled: the activated claude died or lost a channel server
    # within healthcheck_seconds (post_activation_failure); its worker resumes the old session.
    S.ACTIVATED: frozenset({S.ROLLBACK_PENDING, S.ROLLBACK_SCHEDULED}),
    # rollback_pending -> activated: the rollback request was cancelled.
    S.ROLLBACK_PENDING: frozenset({S.ROLLBACK_SCHEDULED, S.ACTIVATED, S.FAILED}),
    # rollback_scheduled -> activated: the rollback was refused (CAS) and nothing was touched.
    S.ROLLBACK_SCHEDULED: frozenset({S.ROLLED_BACK, S.ACTIVATED, S.FAILED}),
    S.CANCELLED: frozenset(),
    S.FAILED: frozenset(),
    S.ROLLED_BACK: frozenset(),
}

# States that hold the one active slot: a new request coalesces or waits while one exists.
ACTIVE: frozenset[State] = frozenset(
    {S.PENDING, S.SCHEDULED, S.RUNNING, S.VERIFYING, S.ACTIVATING,
     S.ROLLBACK_PENDING, S.ROLLBACK_SCHEDULED}
)
# States in which a worker process is responsible for the operation.
WORKER_STATES: frozenset[State] = frozenset(
    {S.SCHEDULED, S.RUNNING, S.VERIFYING, S.ACTIVATING, S.ROLLBACK_SCHEDULED}
)
TERMINAL: frozenset[State] = frozenset({S.CANCELLED, S.FAILED, S.ROLLED_BACK})


def parse_state(value: str) -> State:
    """Return the State named ``value``; an unknown name is an IllegalTransitionError."""
    try:
        return State(value)
    except ValueError as exc:
        raise IllegalTransitionError(f"unknown operation state {value!r}") from exc


def check_transition(current: State | str, target: State | str, operation_id: str = "") -> None:
    """Raise IllegalTransitionError unless the table allows ``current → target``."""
    src, dst = parse_state(str(current)), parse_state(str(target))
    if dst not in TRANSITIONS[src]:
        allowed = ", ".join(sorted(TRANSITIONS[src])) or "nothing (final)"
        where = f" for operation {operation_id!r}" if operation_id else ""
        raise IllegalTransitionError(
            f"illegal state change {src.value!r} → {dst.value!r}{where}; allowed: {allowed}"
        )


def is_active(state: State | str) -> bool:
    """True while the operation holds the one active slot."""
    return parse_state(str(state)) in ACTIVE
