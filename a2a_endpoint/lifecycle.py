"""The task state machine: states, terminal/interrupted sets, allowed transitions (A2A §4.1.3)."""

from __future__ import annotations

import enum

from a2a_endpoint.errors import TaskStateError


class TaskState(enum.StrEnum):
    """Wire names of ``lf.a2a.v1.TaskState`` (ProtoJSON enum strings)."""

    UNSPECIFIED = "TASK_STATE_UNSPECIFIED"
    SUBMITTED = "TASK_STATE_SUBMITTED"
    WORKING = "TASK_STATE_WORKING"
    COMPLETED = "TASK_STATE_COMPLETED"
    FAILED = "TASK_STATE_FAILED"
    CANCELED = "TASK_STATE_CANCELED"
    INPUT_REQUIRED = "TASK_STATE_INPUT_REQUIRED"
    REJECTED = "TASK_STATE_REJECTED"
    AUTH_REQUIRED = "TASK_STATE_AUTH_REQUIRED"

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL_STATES

    @property
    def is_interrupted(self) -> bool:
        return self in INTERRUPTED_STATES

    @property
    def is_settled(self) -> bool:
        """Terminal or interrupted: where a blocking SendMessage returns (A2A §3.2.2) and
        SendStreamingMessage closes."""
        return self in TERMINAL_STATES or self in INTERRUPTED_STATES


TERMINAL_STATES = frozenset(
    {TaskState.COMPLETED, TaskState.FAILED, TaskState.CANCELED, TaskState.REJECTED}
)
INTERRUPTED_STATES = frozenset({TaskState.INPUT_REQUIRED, TaskState.AUTH_REQUIRED})
ACTIVE_STATES = frozenset({TaskState.SUBMITTED, TaskState.WORKING}) | INTERRUPTED_STATES
CANCELABLE_STATES = ACTIVE_STATES

_FROM_ACTIVE = frozenset(TaskState) - {TaskState.UNSPECIFIED, TaskState.SUBMITTED}

# Terminal states have no way out (A2A §3.4: terminal tasks are immutable). A task may
# report the same non-terminal state again (e.g. WORKING with a new progress message).
TRANSITIONS: dict[TaskState, frozenset[TaskState]] = {
    TaskState.SUBMITTED: _FROM_ACTIVE,
    TaskState.WORKING: _FROM_ACTIVE,
    TaskState.INPUT_REQUIRED: _FROM_ACTIVE,
    TaskState.AUTH_REQUIRED: _FROM_ACTIVE,
    TaskState.COMPLETED: frozenset(),
    TaskState.FAILED: frozenset(),
    TaskState.CANCELED: frozenset(),
    TaskState.REJECTED: frozenset(),
}


def can_transition(current: TaskState, new: TaskState) -> bool:
    return new in TRANSITIONS.get(current, frozenset())


def transition(current: TaskState, new: TaskState) -> TaskState:
    """Return ``new`` if the move is allowed, else raise :class:`TaskStateError`."""
    if not can_transition(current, new):
        raise TaskStateError(
            f"Cannot move a task from {current.value} to {new.value}",
            current=current.value,
            requested=new.value,
        )
    return new
