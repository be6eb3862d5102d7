"""The task state machine (A2A §4.1.3): pure logic, no database."""

from __future__ import annotations

import itertools

import pytest

from a2a_endpoint.errors import TaskStateError
from a2a_endpoint.lifecycle import (
    INTERRUPTED_STATES,
    TERMINAL_STATES,
    TRANSITIONS,
    TaskState,
    can_transition,
    transition,
)

TERMINAL = {TaskState.COMPLETED, TaskState.FAILED, TaskState.CANCELED, TaskState.REJECTED}
INTERRUPTED = {TaskState.INPUT_REQUIRED, TaskState.AUTH_REQUIRED}
NON_TERMINAL = {TaskState.SUBMITTED, TaskState.WORKING} | INTERRUPTED
NEVER_ENTERED = {TaskState.SUBMITTED, TaskState.UNSPECIFIED}


def test_terminal_and_interrupted_sets_are_the_specs():
    assert TERMINAL_STATES == TERMINAL
    assert INTERRUPTED_STATES == INTERRUPTED
    assert {state for state in TaskState if state.is_terminal} == TERMINAL
    assert {state for state in TaskState if state.is_interrupted} == INTERRUPTED
    # Where a blocking send returns and SendStreamingMessage closes.
    assert {state for state in TaskState if state.is_settled} == TERMINAL | INTERRUPTED


def test_wire_names_are_the_proto_enum_names():
    assert {state.value for state in TaskState} == {
        "TASK_STATE_UNSPECIFIED",
        "TASK_STATE_SUBMITTED",
        "TASK_STATE_WORKING",
        "TASK_STATE_COMPLETED",
        "TASK_STATE_FAILED",
        "TASK_STATE_CANCELED",
        "TASK_STATE_INPUT_REQUIRED",
        "TASK_STATE_REJECTED",
        "TASK_STATE_AUTH_REQUIRED",
    }


@pytest.mark.parametrize(("current", "new"), list(itertools.product(sorted(TERMINAL), TaskState)))
def test_terminal_states_have_no_way_out(current, new):
    assert TRANSITIONS[current] == frozenset()
    assert not can_transition(current, new)
    with pytest.raises(TaskStateError) as caught:
        transition(current, new)
    assert caught.value.metadata == {"current": current.value, "requested": new.value}


@pytest.mark.parametrize(
    ("current", "new"), list(itertools.product(sorted(NON_TERMINAL), TaskState))
)
def test_non_terminal_states_go_anywhere_but_back_to_the_start(current, new):
    if new in NEVER_ENTERED:
        assert not can_transition(current, new)
        with pytest.raises(TaskStateError):
            transition(current, new)
    else:
        assert can_transition(current, new)
        assert transition(current, new) is new


@pytest.mark.parametrize("new", list(TaskState))
def test_unspecified_is_not_a_state_a_task_can_be_in(new):
    with pytest.raises(TaskStateError):
        transition(TaskState.UNSPECIFIED, new)


def test_every_real_state_has_a_transition_entry():
    assert set(TRANSITIONS) == set(TaskState) - {TaskState.UNSPECIFIED}
