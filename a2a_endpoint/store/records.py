"""What the store hands out (events, records, claimed jobs) and how it builds wire types
from model rows; ``in_thread`` for the callers that must not hold a request thread."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
from asgiref.sync import sync_to_async
from django.db import close_old_connections

from a2a_endpoint import models, types
from a2a_endpoint.conf import app_settings
from a2a_endpoint.errors import (
    TaskNotFoundError,
)
from a2a_endpoint.lifecycle import TaskState

DEFAULT_PAGE_SIZE = 50


@dataclass(frozen=True)
class StoredEvent:
    """A change as written to the log: what subscribers and the blocking wait receive."""

    task_id: str
    seq: int
    state: TaskState
    payload: dict[str, Any]  # a ProtoJSON StreamResponse

    @functools.cached_property
    def payload_json(self) -> bytes:
        """The payload as JSON, encoded once however many streams send this event."""
        return msgspec.json.encode(self.payload)


@dataclass(frozen=True, slots=True)
class TaskRecord:
    """The identity and state of a task, without its history."""

    id: str
    context_id: str
    owner: str
    tenant: str
    state: TaskState
    seq: int
    metadata: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class ClaimedJob:
    """What a job's claim read under the task's row lock: the task and its whole history,
    all an agent's context needs (no second read of either when the job starts)."""

    record: TaskRecord
    history: list[types.Message]
    #: Which run of the message's job this is: 1, then 2 for a retry after a lost worker.
    attempt: int = 1


Publisher = Callable[[StoredEvent], None]
#: Told the id of a task after a commit that owed its webhooks an event.
Pusher = Callable[[str], None]


def in_thread(func: Callable[..., Any]) -> Callable[..., Any]:
    """``func`` as a coroutine run in a pooled worker thread (the ORM is synchronous).

    Not "thread sensitive": a long-lived stream must not hold a thread of its own. The
    thread's connection is released afterwards as at the end of a request (CONN_MAX_AGE).
    """

    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        finally:
            close_old_connections()

    return sync_to_async(run, thread_sensitive=False)


def _to_builtins(value: msgspec.Struct) -> dict[str, Any]:
    return msgspec.to_builtins(value)  # ProtoJSON dict (bytes → base64, enums → names)


def canonical_task_id(task_id: str) -> str:
    """The stored spelling of a task id; TaskNotFoundError when it cannot be one of ours."""
    return str(_parse_uuid(task_id))


def _parse_uuid(task_id: str) -> uuid.UUID:
    try:
        return uuid.UUID(str(task_id))
    except (TypeError, ValueError, AttributeError):
        raise TaskNotFoundError(taskId=task_id) from None


def _within_budget(tasks: list[types.Task]) -> list[types.Task]:
    """The first of ``tasks`` whose JSON fits ``MAX_RESPONSE_BYTES`` together (one at least):
    a ListTasks page returns fewer tasks rather than an unbounded answer (A2A §3.1.4: the
    service may return fewer than ``pageSize``)."""
    budget = int(app_settings.MAX_RESPONSE_BYTES)
    used = 0
    for count, task in enumerate(tasks):
        used += len(msgspec.json.encode(task))
        if used > budget and count:
            return tasks[:count]
    return tasks


def _handoff_deadline(now: datetime, handoffs: int = 0) -> datetime:
    """When the job owed from ``now`` must have been claimed: ``JOB_HANDOFF_TIMEOUT``,
    doubled for each hand-off already made (at most 64 times)."""
    timeout = float(app_settings.JOB_HANDOFF_TIMEOUT) * 2 ** min(handoffs, 6)
    return now + timedelta(seconds=timeout)


def _record(task: models.Task) -> TaskRecord:
    return TaskRecord(
        id=str(task.id),
        context_id=task.context_id,
        owner=task.owner,
        tenant=task.tenant,
        state=TaskState(task.state),
        seq=task.seq,
        metadata=task.metadata,
    )


def _status(task: models.Task) -> types.TaskStatus:
    message = task.status_message
    return _status_of(
        task.state,
        msgspec.convert(message, types.Message) if message else None,
        task.status_timestamp,
    )


def _status_of(state: str, message: types.Message | None, timestamp: datetime) -> types.TaskStatus:
    return types.TaskStatus(
        state=TaskState(state),
        message=message,
        timestamp=types.format_timestamp(timestamp.astimezone(UTC)),
    )


def _artifact(row: models.Artifact) -> types.Artifact:
    return types.Artifact(
        artifact_id=row.artifact_id,
        name=row.name,
        description=row.description,
        parts=msgspec.convert(row.parts, list[types.Part]),
        metadata=row.metadata,
        extensions=row.extensions,
    )


def _history_window(task: models.Task, history_length: int | None) -> int:
    """First history position to return: the tail of ``history_length`` (A2A §3.2.4)."""
    if history_length is None:
        return 0
    return max(task.history_size - history_length, 0)
