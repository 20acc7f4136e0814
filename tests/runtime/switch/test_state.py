"""The operation state machine: one enum, one table, precise refusals."""

from __future__ import annotations

import pytest

from runtime.errors import IllegalTransitionError
from runtime.switch.state import ACTIVE, TERMINAL, TRANSITIONS, State, check_transition, is_active


def test_the_happy_path_of_spec_4_2_is_allowed_step_by_step() -> None:
    path = ["pending", "scheduled", "running", "verifying", "activating", "activated",
            "rollback_pending", "rollback_scheduled", "rolled_back"]
    for current, target in zip(path, path[1:], strict=False):
        check_transition(current, target)


def test_terminal_states_allow_nothing() -> None:
    for state in TERMINAL:
        assert TRANSITIONS[state] == frozenset()
        with pytest.raises(IllegalTransitionError, match="nothing"):
            check_transition(state, State.PENDING)


def test_an_illegal_change_names_both_states_the_operation_and_what_is_allowed() -> None:
    with pytest.raises(IllegalTransitionError) as err:
        check_transition("pending", "activated", "op-1")
    message = str(err.value)
    assert "'pending'" in message and "'activated'" in message and "op-1" in message
    assert "scheduled" in message


def test_every_state_is_in_the_table_and_every_target_is_a_state() -> None:
    assert set(TRANSITIONS) == set(State)
    assert all(target in State for targets in TRANSITIONS.values() for target in targets)


def test_every_active_state_can_reach_an_end() -> None:
    for state in ACTIVE:
        seen, todo = set(), [state]
        while todo:
            current = todo.pop()
            seen.add(current)
            todo.extend(t for t in TRANSITIONS[current] if t not in seen)
        assert seen & (TERMINAL | {State.ACTIVATED}), state


def test_activated_is_not_active_so_a_new_request_is_possible() -> None:
    assert not is_active("activated") and is_active("rollback_pending")


def test_an_unknown_state_name_is_refused() -> None:
    with pytest.raises(IllegalTransitionError, match="unknown operation state 'bogus'"):
        check_transition("bogus", "pending")


def test_a_failure_in_the_watch_after_activation_may_schedule_the_resume_of_the_old_session(
) -> None:
    for current, target in (("activated", "rollback_scheduled"),
                            ("rollback_scheduled", "rolled_back"),
                            ("rollback_scheduled", "activated")):  # a third party's process
        check_transition(current, target)
    with pytest.raises(IllegalTransitionError):
        check_transition("activated", "rolled_back")  # never without the resume step
