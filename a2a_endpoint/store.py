"""Task persistence: every ORM write and read of tasks, converting rows to wire types.

Writes lock the task row (``select_for_update``), check the move with ``lifecycle``, write
the change and its numbered ``TaskEvent`` in one transaction, and hand the event to the
publisher only after commit, so a subscriber never sees an event that was rolled back.
"""

from __future__ import annotations

import functools
import logging
import operator
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

import msgspec
from asgiref.sync import sync_to_async
from django.core import signing
from django.db import IntegrityError, close_old_connections, connection, transaction
from django.db.models import Field, Model, Q
from django.utils import timezone

from a2a_endpoint import models, types
from a2a_endpoint.conf import app_settings
from a2a_endpoint.errors import (
    InvalidParamsError,
    TaskNotCancelableError,
    TaskNotFoundError,
    TaskStateError,
    UnsupportedOperationError,
)
from a2a_endpoint.lifecycle import CANCELABLE_STATES, TERMINAL_STATES, TaskState, transition

logger = logging.getLogger("a2a_endpoint.store")

DEFAULT_PAGE_SIZE = 50
_CURSOR_SALT = "a2a_endpoint.list_tasks.cursor"


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


class TaskStore:
    """The Django ORM task store. ``publisher`` receives each event after its commit."""

    def __init__(self, publisher: Publisher | None = None) -> None:
        self.publisher = publisher

    # --- reads --------------------------------------------------------------------------

    def get_task(
        self, task_id: str, owner: str, tenant: str, *, history_length: int | None = None
    ) -> types.Task:
        if connection.vendor == "postgresql":
            return self._snapshot_in_one_query(task_id, owner, tenant, history_length)[0]
        task = self._visible(task_id, owner, tenant)
        return self.snapshots([task], history_length=history_length, include_artifacts=True)[0]

    def snapshot(
        self, task_id: str, owner: str, tenant: str, *, history_length: int | None = None
    ) -> tuple[types.Task, int]:
        """The task and the seq of the last event it includes, read as one consistent view.

        A stream sends this first and then only events with a greater seq (A2A §3.1.6), so
        the task row, history and artifacts must come from the same database snapshot: on
        PostgreSQL one statement (which sees one snapshot), elsewhere one transaction.
        """
        if connection.vendor == "postgresql":
            return self._snapshot_in_one_query(task_id, owner, tenant, history_length)
        with transaction.atomic():  # SQLite: one transaction is one snapshot
            task = self._visible(task_id, owner, tenant)
            snapshot = self.snapshots(
                [task], history_length=history_length, include_artifacts=True
            )[0]
        return snapshot, task.seq

    def events_after(self, task_id: str, after: int, upto: int | None = None) -> list[StoredEvent]:
        """Logged events with ``after < seq <= upto``, in order (gap filling and resume)."""
        rows = models.TaskEvent.objects.filter(task_id=_parse_uuid(task_id), seq__gt=after)
        if upto is not None:
            rows = rows.filter(seq__lte=upto)
        return [
            StoredEvent(
                task_id=str(row.task_id),
                seq=row.seq,
                state=TaskState(row.state),
                payload=row.payload,
            )
            for row in rows.order_by("seq")
        ]

    def get_record(self, task_id: str, owner: str, tenant: str) -> TaskRecord:
        return _record(self._visible(task_id, owner, tenant))

    def load(self, task_id: str) -> TaskRecord | None:
        task = models.Task.objects.filter(pk=_parse_uuid(task_id)).first()
        return _record(task) if task else None

    def history(self, task_id: str) -> list[types.Message]:
        rows = models.Message.objects.filter(task_id=_parse_uuid(task_id)).order_by("position")
        return [msgspec.convert(row.payload, types.Message) for row in rows]

    def direct_reply(self, task_id: str) -> types.Message | None:
        """The Message a task was answered with instead of task updates, if it was."""
        payload = (
            models.TaskEvent.objects.filter(task_id=_parse_uuid(task_id), kind="message")
            .values_list("payload", flat=True)
            .first()
        )
        return msgspec.convert(payload["message"], types.Message) if payload else None

    def task_for_message(self, owner: str, tenant: str, message_id: str) -> str | None:
        """The task a user message already started, so a retried send is not run twice."""
        # Two index lookups, messages first: as one join, a planner without fresh statistics
        # walked all of the caller's tasks (21 ms at 7,000 tasks) to find none.
        with connection.cursor() as cursor:
            cursor.execute(_message_tasks_sql(), [message_id, types.Role.USER.value])
            candidates = [task_id for (task_id,) in cursor.fetchall()]
        if not candidates:
            return None  # a new message: the usual case, one query
        row = (
            models.Task.objects.visible_to(owner, tenant)
            .filter(pk__in=candidates)
            .values_list("id", flat=True)
            .first()
        )
        return str(row) if row else None

    def snapshots(
        self,
        tasks: list[models.Task],
        *,
        history_length: int | None,
        include_artifacts: bool,
    ) -> list[types.Task]:
        """Whole Task values for ``tasks`` in two more queries at most, whatever their number."""
        history = self._history_by_task(tasks, history_length)
        artifacts = self._artifacts_by_task(tasks) if include_artifacts else {}
        return [
            types.Task(
                id=str(task.id),
                context_id=task.context_id,
                status=_status(task),
                artifacts=artifacts.get(task.id, []),
                history=history.get(task.id, []),
                metadata=task.metadata,
            )
            for task in tasks
        ]

    def list_tasks(
        self, owner: str, tenant: str, request: types.ListTasksRequest
    ) -> types.ListTasksResponse:
        page_size = request.page_size or DEFAULT_PAGE_SIZE
        state = request.status.value if request.status is not TaskState.UNSPECIFIED else ""
        cursor = _read_cursor(request.page_token) if request.page_token else None
        include_artifacts = bool(request.include_artifacts)
        if connection.vendor == "postgresql":
            return self._list_in_one_query(
                owner, tenant, request, state, cursor, page_size, include_artifacts
            )
        matching = models.Task.objects.visible_to(owner, tenant).matching(
            context_id=request.context_id,
            state=state,
            status_after=request.status_timestamp_after,
        )
        page = matching.newest_first()
        if cursor is not None:
            page = page.after_cursor(*cursor)
        rows = list(page[: page_size + 1])
        tasks = _within_budget(
            self.snapshots(
                rows[:page_size],
                history_length=request.history_length,
                include_artifacts=include_artifacts,
            )
        )
        next_page_token = ""
        if len(rows) > len(tasks):  # more to come (or cut by the budget)
            last = rows[len(tasks) - 1]
            next_page_token = _make_cursor(last.status_timestamp, last.id)
        return types.ListTasksResponse(
            tasks=tasks,
            next_page_token=next_page_token,
            page_size=page_size,
            total_size=matching.count(),
        )

    # --- writes -------------------------------------------------------------------------

    def create_task(
        self,
        *,
        task_id: str | None = None,
        owner: str,
        tenant: str,
        context_id: str,
        message: types.Message,
        metadata: dict[str, Any] | None = None,
    ) -> TaskRecord:
        """Store a new SUBMITTED task whose history starts with ``message``, its job owed
        (``handoff_deadline``: the caller hands the job to the backend after the commit, and
        ``hand_off_owed_jobs`` again if no worker claimed it in time).

        A task that ``message`` (same owner, tenant and messageId) already started wins: its
        record is returned instead, so concurrent retries of one send make one task.
        """
        try:
            with transaction.atomic():
                # Three INSERTs: the row already counts its first message and first event,
                # and the snapshot in that event is built here, not read back.
                now = timezone.now()
                task = models.Task(
                    id=_parse_uuid(task_id) if task_id else uuid.uuid4(),
                    context_id=context_id,
                    owner=owner,
                    tenant=tenant,
                    origin_message_id=message.message_id,
                    state=TaskState.SUBMITTED.value,
                    status_timestamp=now,
                    metadata=metadata,
                    history_size=1,
                    seq=1,
                    handoff_deadline=_handoff_deadline(now),
                )
                _insert(task)
                message = msgspec.structs.replace(
                    message, task_id=str(task.id), context_id=context_id
                )
                _insert(
                    models.Message(
                        task=task,
                        position=0,
                        message_id=message.message_id,
                        role=message.role.value,
                        payload=_to_builtins(message),
                    )
                )
                snapshot = types.Task(
                    id=str(task.id),
                    context_id=context_id,
                    status=_status(task),
                    history=[message],
                    metadata=metadata,
                )
                # Logged, not published: no one can be subscribed to a task before it exists
                # (its id is new), and whoever subscribes after the commit starts from a
                # snapshot that already holds this event.
                self._log_event(task, {"task": _to_builtins(snapshot)}, publish=False)
        except IntegrityError:
            existing = models.Task.objects.filter(
                owner=owner, tenant=tenant, origin_message_id=message.message_id
            ).first()
            if existing is None:
                raise
            return _record(existing)
        return _record(task)

    def continue_task(
        self, task_id: str, owner: str, tenant: str, message: types.Message
    ) -> tuple[TaskRecord, bool]:
        """Append a user message to an interrupted task and set it WORKING.

        Returns ``(record, resumed)``; ``resumed`` is False when the message was already
        taken (same ``messageId``), so the caller must not run the agent again.
        """
        with transaction.atomic():
            task = self._visible(task_id, owner, tenant, lock=True)
            if task.messages.filter(message_id=message.message_id).exists():
                return _record(task), False
            state = TaskState(task.state)
            if state.is_terminal:
                raise UnsupportedOperationError(
                    f"Task is in terminal state {state.value} and cannot be continued",
                    taskId=task_id,
                )
            if not state.is_interrupted:
                raise UnsupportedOperationError(
                    f"Task is {state.value}, not waiting for input", taskId=task_id
                )
            # A2A §3.4: a message with only taskId belongs to the task's context.
            message = msgspec.structs.replace(
                message, task_id=str(task.id), context_id=task.context_id
            )
            self._append_history(task, [message])
            task.handoff_deadline = _handoff_deadline(timezone.now())  # its job is owed
            task.handoffs = 0
            self._change_status(task, TaskState.WORKING, None)
        return _record(task), True

    def update_status(
        self, task_id: str, state: TaskState, message: types.Message | None = None
    ) -> StoredEvent:
        """Move a task to ``state`` (raises TaskStateError once it is terminal)."""
        with transaction.atomic():
            task = self._locked(task_id)
            return self._change_status(task, state, message)

    def reply(self, task_id: str, message: types.Message) -> StoredEvent:
        """Finish the task with a direct Message answer instead of task updates (A2A §3.1.1).

        The event is ``{"message": …}`` without ``taskId``: to the client no task was created.
        """
        with transaction.atomic():
            task = self._locked(task_id)
            return self._change_status(task, TaskState.COMPLETED, message, as_message=True)

    def add_artifact(
        self, task_id: str, artifact: types.Artifact, *, append: bool, last_chunk: bool
    ) -> StoredEvent:
        with transaction.atomic():
            task = self._locked(task_id)
            if TaskState(task.state).is_terminal:
                raise TaskStateError(f"Task {task_id} is finished", taskId=task_id)
            self._merge_artifact(task, artifact, append=append, last_chunk=last_chunk)
            event = self._record_event(
                task, _artifact_update(task, artifact, append=append, last_chunk=last_chunk)
            )
            _save_fields(task, "seq", "updated_at")
        return event

    def cancel(self, task_id: str, owner: str, tenant: str) -> types.Task:
        """CancelTask: CANCELED in one transaction, or TaskNotCancelableError (A2A §3.1.5)."""
        with transaction.atomic():
            task = self._visible(task_id, owner, tenant, lock=True)
            if TaskState(task.state) not in CANCELABLE_STATES:
                raise TaskNotCancelableError(
                    f"Task is in state {task.state} and cannot be canceled", taskId=task_id
                )
            self._change_status(task, TaskState.CANCELED, None)
            return self.snapshots([task], history_length=None, include_artifacts=True)[0]

    # --- leased jobs (out-of-process workers: execution.jobs) -----------------------------

    def claim_job(self, task_id: str, job_id: str, lease: float) -> ClaimedJob | None:
        """Claim the newest user message of the task for ``job_id``, under a lease; the
        task and its history as they were claimed.

        None when there is nothing to run: the task is terminal, or this message was
        claimed before (by a running job, a finished one, or a lost one).
        """
        with transaction.atomic():
            task = self._locked(task_id)
            if TaskState(task.state).is_terminal:
                return None
            # The whole history: its newest user message is the one to claim, and the
            # agent's context is built from it.
            rows = _history_rows(task.pk)
            user = types.Role.USER.value
            position = max((row[0] for row in rows if row[1] == user), default=-1) + 1
            if task.job_position >= position:
                # Claimed before: a duplicate or redelivered job. If its job was lost, the
                # lapsed lease is the sweeper's to retry or fail (recover_lost_jobs).
                return None
            task.job_position = position
            task.job_id = job_id
            task.lease_expires_at = timezone.now() + timedelta(seconds=lease)
            task.handoff_deadline = None  # handed over: the lease watches it from now on
            task.handoffs = 0
            _save_fields(
                task, "job_position", "job_id", "lease_expires_at", "handoff_deadline", "handoffs"
            )
        history = [msgspec.convert(payload, types.Message) for _, _, payload in rows]
        return ClaimedJob(_record(task), history, attempt=task.job_attempts + 1)

    def renew_job(self, task_id: str, job_id: str, lease: float) -> TaskState | None:
        """Extend the lease of a running job; returns the task state (None: not its job)."""
        expires = timezone.now() + timedelta(seconds=lease)
        updated = models.Task.objects.filter(pk=_parse_uuid(task_id), job_id=job_id).update(
            lease_expires_at=expires
        )
        if not updated:
            return None
        state = models.Task.objects.filter(pk=_parse_uuid(task_id)).values_list("state", flat=True)
        return TaskState(state.first())

    def release_job(self, task_id: str, job_id: str) -> None:
        """The job ended (whatever the outcome): no lease to watch any more."""
        key = models.Task._meta.pk.get_db_prep_value(_parse_uuid(task_id), connection)
        with connection.cursor() as cursor:
            cursor.execute(_release_sql(), [key, job_id])

    def job_of_finished_task(self, task_id: str) -> str | None:
        """The job still holding a live lease on a task that is already terminal."""
        row = (
            models.Task.objects.filter(
                pk=_parse_uuid(task_id),
                state__in=[state.value for state in TERMINAL_STATES],
                lease_expires_at__gt=timezone.now(),
            )
            .exclude(job_id="")
            .values_list("job_id", flat=True)
            .first()
        )
        return row

    def jobs_outliving_their_tasks(self, grace: float) -> list[tuple[str, str]]:
        """(task id, job id) of jobs still leasing a task that ended over ``grace`` s ago."""
        now = timezone.now()
        rows = (
            models.Task.objects.filter(
                state__in=[state.value for state in TERMINAL_STATES],
                lease_expires_at__gt=now,
                status_timestamp__lt=now - timedelta(seconds=grace),
            )
            .exclude(job_id="")
            .values_list("id", "job_id")[:100]
        )
        return [(str(task_id), job_id) for task_id, job_id in rows]

    def hand_off_owed_jobs(self, submit: Callable[[str], None], *, limit: int = 100) -> list[str]:
        """Hand to ``submit`` again each job owed past its hand-off deadline; their task ids.

        A job is owed from the commit of its message until a worker claims it. It is still
        owed past the deadline when the hand-off after the commit failed (the broker was
        unreachable), never happened (the process died in between), or the broker lost it.
        A job handed twice runs once (the second finds its message claimed). Each further
        hand-off of one task waits twice as long, so a long queue is not flooded with copies
        of the jobs waiting in it. ``submit`` failing (the broker still down) ends this
        sweep: what was handed so far is committed, the rest waits for the next.
        """
        handed: list[str] = []
        now = timezone.now()
        with transaction.atomic():
            owed = (
                models.Task.objects.select_for_update(skip_locked=True)
                .filter(handoff_deadline__lt=now)
                .order_by("handoff_deadline")[:limit]
            )
            for task in owed:
                if TaskState(task.state).is_settled:  # finished or waiting: nothing to run
                    task.handoff_deadline = None
                    task.save(update_fields=["handoff_deadline"])
                    continue
                try:
                    submit(str(task.id))
                except Exception:
                    logger.warning(
                        "Could not hand the owed job of task %s to the backend; the next "
                        "sweep tries again",
                        task.id,
                        exc_info=True,
                    )
                    break
                task.handoffs += 1
                task.handoff_deadline = _handoff_deadline(now, task.handoffs)
                task.save(update_fields=["handoff_deadline", "handoffs"])
                handed.append(str(task.id))
        return handed

    def recover_lost_jobs(self, *, retry: bool, max_retries: int) -> list[str]:
        """Tasks whose job's lease lapsed: retried (returned; their job is owed at once, for
        ``hand_off_owed_jobs`` to enqueue) or failed."""
        retried: list[str] = []
        with transaction.atomic():
            lost = (
                models.Task.objects.select_for_update(skip_locked=True)
                .filter(lease_expires_at__lt=timezone.now())
                .order_by("lease_expires_at")[:100]
            )
            for task in lost:
                if self._recover(task, retry=retry and task.job_attempts < max_retries):
                    retried.append(str(task.id))
        return retried

    def _recover(self, task: models.Task, *, retry: bool) -> bool:
        task.lease_expires_at = None
        task.job_id = ""
        if TaskState(task.state).is_settled:
            task.save(update_fields=["lease_expires_at", "job_id"])
            return False
        if retry:
            lost = task.job_attempts + 1
            self._supersede(task, lost)
            task.job_attempts += 1
            task.job_position = 0  # unclaimed: the next job may run the message again
            # Owed at once: hand_off_owed_jobs enqueues it, and again should that fail.
            task.handoff_deadline = timezone.now()
            task.handoffs = 0
            task.save(
                update_fields=[
                    "lease_expires_at",
                    "job_id",
                    "job_attempts",
                    "job_position",
                    "handoff_deadline",
                    "handoffs",
                ]
            )
            notice = types.Message(
                message_id=str(uuid.uuid4()),
                role=types.Role.AGENT,
                parts=[
                    types.Part(
                        text=f"The worker running this task was lost; it runs again "
                        f"(attempt {lost + 1}). Output of attempt {lost} is superseded."
                    )
                ],
                metadata={RETRY_KEY: {"attempt": lost + 1, "lostAttempt": lost}},
            )
            self._change_status(task, TaskState.WORKING, notice)
            return True
        task.save(update_fields=["lease_expires_at", "job_id"])
        message = types.Message(
            message_id=str(uuid.uuid4()),
            context_id=task.context_id,
            task_id=str(task.id),
            role=types.Role.AGENT,
            parts=[types.Part(text="The worker running this task was lost.")],
        )
        self._change_status(task, TaskState.FAILED, message)
        return False

    def _supersede(self, task: models.Task, attempt: int) -> None:
        """Mark what the lost run ``attempt`` wrote as superseded, each artifact closed with
        a last chunk (an empty text part) whose metadata says so: clients following the task
        see it end, and GetTask tells it from the retry's output. An artifact the retry
        writes again from its start (same artifactId, ``append`` false) loses the mark."""
        rows = task.artifacts.filter(attempt=attempt).order_by("position")
        for artifact_id, name in rows.values_list("artifact_id", "name"):
            closing = types.Artifact(
                artifact_id=artifact_id,
                name=name,
                parts=[types.Part(text="")],
                metadata={RETRY_KEY: {"attempt": attempt, "superseded": True}},
            )
            self._merge_artifact(task, closing, append=True, last_chunk=True, attempt=attempt)
            self._record_event(task, _artifact_update(task, closing, append=True, last_chunk=True))
        # task.seq is saved by the status change that follows (the retry's notice).

    # --- internals ----------------------------------------------------------------------

    def _snapshot_in_one_query(
        self, task_id: str, owner: str, tenant: str, history_length: int | None
    ) -> tuple[types.Task, int]:
        """``get_task`` on PostgreSQL: the row, its history window and its artifacts in one
        statement, the lists aggregated to JSON text and decoded by msgspec.

        The hot read of the API (GetTask, a stream's first snapshot, a SendMessage's reply):
        one round trip and no ORM query building, instead of three of each. The same values
        as ``snapshots`` (tests/test_store_snapshot.py compares the two).
        """
        with connection.cursor() as cursor:
            key = _parse_uuid(task_id)
            cursor.execute(_snapshot_sql(), [history_length, key, owner, tenant])
            row = cursor.fetchone()
        if row is None:
            # A task that exists but belongs to someone else is "not found" too (A2A §3.3.2).
            raise TaskNotFoundError(taskId=task_id)
        *columns, seq = row
        return _row_task(*columns), seq

    def _list_in_one_query(
        self,
        owner: str,
        tenant: str,
        request: types.ListTasksRequest,
        state: str,
        cursor: tuple[datetime, uuid.UUID] | None,
        page_size: int,
        include_artifacts: bool,
    ) -> types.ListTasksResponse:
        """``list_tasks`` on PostgreSQL: the page, each task's lists and ``totalSize`` in one
        statement, which also makes the total and the page one snapshot.

        ListTasks is a hot read like GetTask: one round trip and no ORM query building
        (``tests/test_store_snapshot.py`` compares every page with the ORM path's).
        """
        # In _ListFilters' order; a filter not set is None.
        optional = (request.context_id or None, state or None, request.status_timestamp_after)
        filters = _ListFilters(*(value is not None for value in optional))
        where = [owner, tenant, *(value for value in optional if value is not None)]
        keyset = [cursor[0], cursor[0], cursor[1]] if cursor is not None else []
        budget = int(app_settings.MAX_RESPONSE_BYTES)
        params = [request.history_length, *where, *where, *keyset, page_size + 1, budget]
        counted = task_counts_kept()
        with connection.cursor() as db:
            db.execute(_list_sql(filters, counted, cursor is not None, include_artifacts), params)
            rows = db.fetchall()
            if rows:
                total, fetched = rows[0][-2:]
            elif cursor is None:
                total = fetched = 0  # no page without a cursor: nothing matches
            else:  # a page past the end still reports the total
                db.execute(_count_sql(filters, counted), where)
                total, fetched = db.fetchone()[0], 0
        tasks = [_row_task(*row[:-2]) for row in rows[:page_size]]
        next_page_token = ""
        if len(rows) > page_size or len(rows) < fetched:  # more to come (or cut by the budget)
            task_id, _, _, _, timestamp, *_ = rows[len(tasks) - 1]
            next_page_token = _make_cursor(timestamp, task_id)
        return types.ListTasksResponse(
            tasks=tasks, next_page_token=next_page_token, page_size=page_size, total_size=total
        )

    def _visible(self, task_id: str, owner: str, tenant: str, *, lock: bool = False) -> models.Task:
        if lock and connection.vendor == "postgresql":
            task = _lock_row(_parse_uuid(task_id), owner, tenant)
        else:
            queryset = models.Task.objects.visible_to(owner, tenant)
            if lock:
                queryset = queryset.select_for_update()
            task = queryset.filter(pk=_parse_uuid(task_id)).first()
        if task is None:
            # A task that exists but belongs to someone else is "not found" too (A2A §3.3.2).
            raise TaskNotFoundError(taskId=task_id)
        return task

    def _locked(self, task_id: str) -> models.Task:
        """The task row, locked until the end of the transaction (every write starts here)."""
        if connection.vendor == "postgresql":
            task = _lock_row(_parse_uuid(task_id))
        else:
            task = models.Task.objects.select_for_update().filter(pk=_parse_uuid(task_id)).first()
        if task is None:
            raise TaskNotFoundError(taskId=task_id)
        return task

    def _change_status(
        self,
        task: models.Task,
        state: TaskState,
        message: types.Message | None,
        *,
        as_message: bool = False,
    ) -> StoredEvent:
        transition(TaskState(task.state), state)
        if message is not None:
            message = msgspec.structs.replace(
                message, task_id=str(task.id), context_id=task.context_id
            )
            self._append_history(task, [message])
        task.state = state.value
        task.status_message = _to_builtins(message) if message is not None else None
        task.status_timestamp = timezone.now()
        if state.is_settled:
            task.handoff_deadline = None  # its run is over (a continuation owes a new one)
        if as_message and message is not None:
            payload = {"message": _to_builtins(msgspec.structs.replace(message, task_id=""))}
        else:
            update = types.TaskStatusUpdateEvent(
                task_id=str(task.id), context_id=task.context_id, status=_status(task)
            )
            payload = {"statusUpdate": _to_builtins(update)}
        event = self._record_event(task, payload)
        _save_fields(task, *_STATUS_CHANGES)
        return event

    def _append_history(self, task: models.Task, messages: Iterable[types.Message]) -> None:
        known = set(
            task.messages.filter(message_id__in=[m.message_id for m in messages]).values_list(
                "message_id", flat=True
            )
        )
        rows = []
        for message in messages:
            if message.message_id in known:
                continue  # an agent re-sending the same message: history keeps one copy
            rows.append(
                models.Message(
                    task=task,
                    position=task.history_size,
                    message_id=message.message_id,
                    role=message.role.value,
                    payload=_to_builtins(message),
                )
            )
            task.history_size += 1
        models.Message.objects.bulk_create(rows)

    def _merge_artifact(
        self,
        task: models.Task,
        artifact: types.Artifact,
        *,
        append: bool,
        last_chunk: bool,
        attempt: int | None = None,
    ) -> None:
        parts = [_to_builtins(part) for part in artifact.parts]
        row, count = _artifact_row(task, artifact.artifact_id)
        if row is None:
            row = models.Artifact(task=task, artifact_id=artifact.artifact_id, position=count)
            row.parts = []
        if append:
            row.parts = [*row.parts, *parts]
        else:
            row.parts = parts
            if row.metadata and RETRY_KEY in row.metadata:  # written anew: no longer superseded
                row.metadata = {k: v for k, v in row.metadata.items() if k != RETRY_KEY} or None
        row.attempt = attempt or task.job_attempts + 1
        row.name = artifact.name or row.name
        row.description = artifact.description or row.description
        if artifact.metadata is not None:
            row.metadata = {**(row.metadata or {}), **artifact.metadata}
        row.extensions = artifact.extensions or row.extensions
        row.complete = last_chunk
        if row._state.adding:
            _insert(row)
        else:
            _save_fields(row, *_ARTIFACT_CHANGES)

    def _record_event(self, task: models.Task, payload: dict[str, Any]) -> StoredEvent:
        """Number ``payload`` as the task's next event (the caller saves ``task.seq``)."""
        task.seq += 1
        return self._log_event(task, payload)

    def _log_event(
        self, task: models.Task, payload: dict[str, Any], *, publish: bool = True
    ) -> StoredEvent:
        """Write ``payload`` as event ``task.seq`` and publish it once committed."""
        kind = next(iter(payload))
        _insert(
            models.TaskEvent(task=task, seq=task.seq, kind=kind, state=task.state, payload=payload)
        )
        event = StoredEvent(
            task_id=str(task.id), seq=task.seq, state=TaskState(task.state), payload=payload
        )
        if publish and self.publisher is not None:
            publisher = self.publisher
            # robust: a failing bus (Redis down) is a lost message, which streams recover
            # from the log; it must not fail the committed write nor skip later hooks (the
            # job's submit).
            transaction.on_commit(lambda: publisher(event), robust=True)
        return event

    def _history_by_task(
        self, tasks: list[models.Task], history_length: int | None
    ) -> dict[Any, list[types.Message]]:
        if history_length == 0 or not tasks:
            return {}
        # One query for all tasks, each bounded to its window of the rows just read: the
        # newest ``history_length`` messages at most (A2A §3.2.4), none appended since.
        windows = [
            Q(task_id=task.id, position__gte=start, position__lt=task.history_size)
            for task in tasks
            if (start := _history_window(task, history_length)) < task.history_size
        ]
        if not windows:
            return {}
        window = functools.reduce(operator.or_, windows)
        result: dict[Any, list[types.Message]] = {}
        for row in models.Message.objects.filter(window).order_by("task_id", "position"):
            result.setdefault(row.task_id, []).append(msgspec.convert(row.payload, types.Message))
        return result

    def _artifacts_by_task(self, tasks: list[models.Task]) -> dict[Any, list[types.Artifact]]:
        if not tasks:
            return {}
        rows = models.Artifact.objects.filter(task_id__in=[task.id for task in tasks])
        result: dict[Any, list[types.Artifact]] = {}
        for row in rows.order_by("task_id", "position"):
            result.setdefault(row.task_id, []).append(_artifact(row))
        return result


# Django reads jsonb as text on PostgreSQL (JSONField decodes it): msgspec decodes it here.
_MESSAGE = msgspec.json.Decoder(types.Message)
_MESSAGES = msgspec.json.Decoder(list[types.Message])
_ARTIFACTS = msgspec.json.Decoder(list[types.Artifact])


def _with_lists(
    *,
    id: str,
    context_id: str,
    status: types.TaskStatus,
    metadata: dict[str, Any] | None,
    history_json: str | None,
    artifacts_json: str | None,
) -> types.Task:
    """A Task whose history and artifacts come as JSON arrays from ``_lists_sql`` (or NULL)."""
    return types.Task(
        id=id,
        context_id=context_id,
        status=status,
        artifacts=_ARTIFACTS.decode(artifacts_json) if artifacts_json else [],
        history=_MESSAGES.decode(history_json) if history_json else [],
        metadata=metadata,
    )


def _row_task(
    task_id: uuid.UUID,
    context_id: str,
    state: str,
    status_message: str | None,
    status_timestamp: datetime,
    metadata: str | None,
    history_json: str | None,
    artifacts_json: str | None,
) -> types.Task:
    """A Task from the columns of ``_TASK_COLUMNS`` and ``_lists_sql``, read by a raw cursor
    (jsonb as text, decoded here by msgspec)."""
    message = _MESSAGE.decode(status_message) if status_message else None
    return _with_lists(
        id=str(task_id),
        context_id=context_id,
        status=_status_of(state, message, status_timestamp),
        metadata=msgspec.json.decode(metadata) if metadata is not None else None,
        history_json=history_json,
        artifacts_json=artifacts_json,
    )


#: What ``_row_task`` reads of a task row ``t``, before its history and artifacts.
_TASK_COLUMNS = "t.id, t.context_id, t.state, t.status_message, t.status_timestamp, t.metadata"


class _ListFilters(NamedTuple):
    """Which of ListTasks' optional filters a request sets (each adds one ``%s``)."""

    context: bool
    state: bool
    after: bool

    def where(self, task: str) -> str:
        """Conditions on task row ``task``: owner, tenant, then the filters set, in order."""
        conditions = [f"{task}.owner = %s", f"{task}.tenant = %s"]
        if self.context:
            conditions.append(f"{task}.context_id = %s")
        if self.state:
            conditions.append(f"{task}.state = %s")
        if self.after:
            conditions.append(f"{task}.status_timestamp >= %s")
        return " AND ".join(conditions)


_NO_FILTERS = _ListFilters(context=False, state=False, after=False)


#: PostgreSQL: each caller's number of tasks, kept by the triggers of migration 0003.
TASK_COUNT_TABLE = "a2a_endpoint_task_count"

#: (connection alias, database name) → whether that database keeps the counts.
_counts_found: dict[tuple[str, str], bool] = {}


def task_counts_kept() -> bool:
    """Whether the PostgreSQL database of ``connection`` keeps the task counts.

    Migration 0003 creates the table and its triggers together. A database built without
    migrations (pytest-django's ``--nomigrations``) has neither, and ListTasks counts there.
    Looked up once per database and process; a migration run clears what was found.
    """
    key = (connection.alias, str(connection.settings_dict["NAME"]))
    found = _counts_found.get(key)
    if found is None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [TASK_COUNT_TABLE])
            found = _counts_found[key] = bool(cursor.fetchone()[0])
    return found


def forget_task_counts(**kwargs: Any) -> None:
    """Look the task counts up again (a ``post_migrate`` receiver: apps.py)."""
    _counts_found.clear()


#: Each caller whose kept count differs from its number of tasks: (owner, tenant, kept,
#: counted). One statement: both sides are read in one snapshot.
_WRONG_COUNTS_SQL = f"""
    SELECT owner, tenant, COALESCE(k.tasks, 0), COALESCE(c.tasks, 0)
    FROM (SELECT owner, tenant, SUM(tasks)::bigint AS tasks FROM {TASK_COUNT_TABLE}
          GROUP BY owner, tenant) k
    FULL JOIN (SELECT owner, tenant, COUNT(*) AS tasks FROM a2a_endpoint_task
               GROUP BY owner, tenant) c USING (owner, tenant)
    WHERE COALESCE(k.tasks, 0) <> COALESCE(c.tasks, 0)
    ORDER BY owner, tenant
"""


def wrong_task_counts() -> list[tuple[str, str, int, int]]:
    """PostgreSQL: each caller whose kept task count is wrong, as (owner, tenant, kept,
    counted). Triggers keep the counts, so this is empty unless they were bypassed (a
    replica applying changes with ``session_replication_role = replica``, triggers disabled
    by hand, a restore of one table without the other)."""
    with connection.cursor() as cursor:
        cursor.execute(_WRONG_COUNTS_SQL)
        return [(owner, tenant, int(kept), counted) for owner, tenant, kept, counted in cursor]


def recount_tasks() -> list[tuple[str, str, int, int]]:
    """PostgreSQL: count every caller's tasks again and keep those counts (one row each).

    Writers of tasks wait while it runs (about 0.4 s a million tasks), readers do not.
    Returns what ``wrong_task_counts`` found, in the same transaction.
    """
    table = connection.ops.quote_name(TASK_COUNT_TABLE)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("LOCK TABLE a2a_endpoint_task IN SHARE ROW EXCLUSIVE MODE")
        wrong = wrong_task_counts()
        cursor.execute(f"DELETE FROM {table}")
        cursor.execute(
            f"INSERT INTO {table} (owner, tenant, slot, tasks) "
            "SELECT owner, tenant, 0, COUNT(*) FROM a2a_endpoint_task GROUP BY owner, tenant"
        )
    return wrong


@functools.cache
def _lists_sql(task: str) -> tuple[str, str]:
    """PostgreSQL subqueries of the task row ``task`` (an alias or the quoted table name):
    its newest ``%s`` messages (NULL: all) and its artifacts, each a JSON array (NULL: none).

    The history window is read against the row's own ``history_size`` (messages appended
    since are not in it), as ``_history_by_task`` does; ``GREATEST`` ignores the NULL of an
    unbounded window. ``''`` name/description and ``[]`` extensions are the columns'
    defaults, omitted on the wire as ``_artifact`` values are.
    """
    message = models.Message._meta.db_table
    artifact = models.Artifact._meta.db_table
    history = f"""(SELECT json_agg(m.payload ORDER BY m.position)::text FROM {message} m
        WHERE m.task_id = {task}.id AND m.position < {task}.history_size
          AND m.position >= GREATEST({task}.history_size - %s, 0))"""
    artifacts = f"""(SELECT json_agg(json_build_object(
            'artifactId', a.artifact_id, 'name', a.name, 'description', a.description,
            'parts', a.parts, 'metadata', a.metadata, 'extensions', a.extensions)
        ORDER BY a.position)::text FROM {artifact} a WHERE a.task_id = {task}.id)"""
    return history, artifacts


@functools.cache
def _snapshot_sql() -> str:
    """PostgreSQL: a visible task with its history window (``%s``), artifacts and seq."""
    history, artifacts = _lists_sql("t")
    return f"""
        SELECT {_TASK_COLUMNS}, {history}, {artifacts}, t.seq
        FROM {models.Task._meta.db_table} t
        WHERE t.id = %s AND t.owner = %s AND t.tenant = %s
    """


@functools.cache
def _list_sql(filters: _ListFilters, counted: bool, cursor: bool, artifacts: bool) -> str:
    """PostgreSQL: a ListTasks page, newest first, with each task's lists and the total,
    cut where its tasks would pass the byte budget (the first task always comes).

    Parameters: the history window, the filters twice (the total, then the page), the
    cursor's ``(timestamp, timestamp, id)`` when ``cursor``, the row limit and the budget.
    The total is an uncorrelated scalar subquery: PostgreSQL evaluates it once (an InitPlan)
    and repeats it on every row. The keyset bound is ``TaskQuerySet.after_cursor``'s: the
    plain ``<=`` lets the owner index start its scan at the cursor.
    """
    table = connection.ops.quote_name(models.Task._meta.db_table)
    history, artifact_list = _lists_sql("t")
    keyset = (
        " AND t.status_timestamp <= %s AND (t.status_timestamp < %s OR t.id < %s)" if cursor else ""
    )
    # The page (innermost), each row's size and the sizes up to it (middle: each list is
    # built once), and the rows that fit the byte budget (outer; always the first row).
    return f"""
        SELECT id, context_id, state, status_message, status_timestamp, metadata,
            h, a, total, fetched
        FROM (
            SELECT page.*, COUNT(*) OVER () AS fetched,
                SUM({_ROW_BYTES}) OVER (ORDER BY status_timestamp DESC, id DESC
                    ROWS UNBOUNDED PRECEDING) AS upto,
                ROW_NUMBER() OVER (ORDER BY status_timestamp DESC, id DESC) AS n
            FROM (
                SELECT {_TASK_COLUMNS}, {history} AS h,
                    {artifact_list if artifacts else "NULL"} AS a,
                    ({_count_sql(filters, counted)}) AS total
                FROM {table} t
                WHERE {filters.where("t")}{keyset}
                ORDER BY t.status_timestamp DESC, t.id DESC
                LIMIT %s
            ) page
        ) sized
        WHERE n = 1 OR upto <= %s
        ORDER BY status_timestamp DESC, id DESC
    """


#: What a ListTasks row adds to the answer, about: its lists, status message and metadata
#: as JSON, and a margin for the rest of the task (id, context, state, timestamp, keys).
_ROW_BYTES = (
    "COALESCE(octet_length(h), 0) + COALESCE(octet_length(a), 0)"
    " + COALESCE(octet_length(status_message::text), 0)"
    " + COALESCE(octet_length(metadata::text), 0) + 256"
)


@functools.cache
def _count_sql(filters: _ListFilters, counted: bool) -> str:
    """PostgreSQL: ListTasks' ``totalSize`` (in the page's statement, or alone for a page
    past the last task). Parameters: owner, tenant and the filters set.

    Without filters, and where the database keeps the counts (``counted``), it is the sum of
    the caller's rows in the table that triggers keep (migration 0003): at most 16 rows,
    where ``COUNT(*)`` reads an index entry per task. Filtered totals are counted.
    """
    if counted and filters == _NO_FILTERS:
        table = connection.ops.quote_name(TASK_COUNT_TABLE)
        return f"SELECT COALESCE(SUM(c.tasks), 0)::bigint FROM {table} c WHERE {filters.where('c')}"
    table = connection.ops.quote_name(models.Task._meta.db_table)
    return f"SELECT COUNT(*) FROM {table} c WHERE {filters.where('c')}"


#: What a status change writes of the task row.
_STATUS_CHANGES = (
    "state",
    "status_message",
    "status_timestamp",
    "seq",
    "history_size",
    "handoff_deadline",
    "handoffs",
    "updated_at",
)

#: What a later chunk of an artifact may change.
_ARTIFACT_CHANGES = (
    "parts",
    "name",
    "description",
    "metadata",
    "extensions",
    "complete",
    "attempt",
    "updated_at",
)

#: The metadata key of what the store writes about a retried job: on the status message
#: that announces the retry, and on each artifact of the lost run it supersedes.
RETRY_KEY = "a2aEndpointRetry"


def _artifact_update(
    task: models.Task, artifact: types.Artifact, *, append: bool, last_chunk: bool
) -> dict[str, Any]:
    """The ``artifactUpdate`` StreamResponse of a chunk of ``artifact``."""
    update = types.TaskArtifactUpdateEvent(
        task_id=str(task.id),
        context_id=task.context_id,
        artifact=artifact,
        append=append,
        last_chunk=last_chunk,
    )
    return {"artifactUpdate": _to_builtins(update)}


def _insert(instance: Model) -> None:
    """``instance.save()`` of a new row as one written-out INSERT.

    Each value goes through its field's ``pre_save`` (``auto_now_add`` and ``auto_now`` are
    set) and ``get_db_prep_save``, as the ORM's INSERT does, but without building the query,
    reading back an auto primary key (the store never uses an event's or a message's id), or
    sending model signals. The hot writes of a job and of SendMessage go through here and
    ``_save_fields``; ``tests/test_store_writes.py`` checks their rows equal the ORM's.
    """
    sql, fields = _insert_sql(type(instance))
    with connection.cursor() as cursor:
        cursor.execute(sql, _db_values(instance, fields, add=True))
    instance._state.adding = False
    instance._state.db = connection.alias


def _save_fields(instance: Model, *names: str) -> None:
    """``instance.save(update_fields=names)`` as one written-out UPDATE (see ``_insert``)."""
    sql, fields = _update_sql(type(instance), names)
    key = instance._meta.pk.get_db_prep_value(instance.pk, connection)
    with connection.cursor() as cursor:
        cursor.execute(sql, [*_db_values(instance, fields, add=False), key])


def _db_values(instance: Model, fields: list[Field], *, add: bool) -> list[Any]:
    """``fields`` of ``instance`` as the ORM's INSERT (``add``) or UPDATE sends them."""
    return [field.get_db_prep_save(field.pre_save(instance, add), connection) for field in fields]


@functools.cache
def _insert_sql(model: type[Model]) -> tuple[str, list[Field]]:
    """The INSERT of every concrete column of ``model`` but an auto primary key."""
    meta = model._meta
    fields = [f for f in meta.concrete_fields if not (f.primary_key and f.db_returning)]
    quote = connection.ops.quote_name
    columns = ", ".join(quote(field.column) for field in fields)
    marks = ", ".join("%s" for _ in fields)
    return f"INSERT INTO {quote(meta.db_table)} ({columns}) VALUES ({marks})", fields


@functools.cache
def _update_sql(model: type[Model], names: tuple[str, ...]) -> tuple[str, list[Field]]:
    """The UPDATE of the fields ``names`` of one ``model`` row, by primary key."""
    meta = model._meta
    fields = [meta.get_field(name) for name in names]
    quote = connection.ops.quote_name
    columns = ", ".join(f"{quote(field.column)} = %s" for field in fields)
    return f"UPDATE {quote(meta.db_table)} SET {columns} WHERE {quote(meta.pk.column)} = %s", fields


def _artifact_row(task: models.Task, artifact_id: str) -> tuple[models.Artifact | None, int]:
    """The task's artifact ``artifact_id`` (None: a new one) and the position a new one
    takes, the task's number of artifacts: on PostgreSQL one written-out statement (the
    ORM's two queries took most of a chunk's CPU to build; ``tests/test_store_writes.py``
    compares the two)."""
    if connection.vendor != "postgresql":
        row = task.artifacts.filter(artifact_id=artifact_id).first()
        return row, (task.artifacts.count() if row is None else 0)
    with connection.cursor() as cursor:
        cursor.execute(_artifact_sql(), [task.pk, task.pk, artifact_id])
        count, *row = cursor.fetchone()
    if row[0] is None:  # the artifact's primary key: no such artifact yet
        return None, count
    return _model_from_row(models.Artifact, row), count


def _history_rows(key: uuid.UUID) -> list[tuple[int, str, Any]]:
    """(position, role, payload) of every message of a task, oldest first: a job's claim
    reads them under the row lock, written out as the other hot statements are."""
    sql, decode = _history_sql()
    key = models.Task._meta.pk.get_db_prep_value(key, connection)
    with connection.cursor() as cursor:
        cursor.execute(sql, [key])
        rows = cursor.fetchall()
    return [(position, role, decode(payload, None, connection)) for position, role, payload in rows]


@functools.cache
def _history_sql() -> tuple[str, Callable[..., Any]]:
    """The statement of ``_history_rows`` and the payload column's ``from_db_value``."""
    table = connection.ops.quote_name(models.Message._meta.db_table)
    sql = f"SELECT position, role, payload FROM {table} WHERE task_id = %s ORDER BY position"
    return sql, models.Message._meta.get_field("payload").from_db_value


@functools.cache
def _message_tasks_sql() -> str:
    """The tasks of the messages with a messageId and role: ``task_for_message``'s first
    look, on every SendMessage (the ORM built it in four times the time it ran)."""
    quote = connection.ops.quote_name
    table = quote(models.Message._meta.db_table)
    return f"SELECT task_id FROM {table} WHERE message_id = %s AND role = %s"


@functools.cache
def _release_sql() -> str:
    """``release_job``: the job's lease ends (whoever holds the task now keeps theirs)."""
    table = connection.ops.quote_name(models.Task._meta.db_table)
    return f"UPDATE {table} SET lease_expires_at = NULL WHERE id = %s AND job_id = %s"


@functools.cache
def _artifact_sql() -> str:
    """The count of a task's artifacts and every column of one of them (NULLs if none)."""
    table = connection.ops.quote_name(models.Artifact._meta.db_table)
    return (
        f"SELECT n.total, {_model_columns(models.Artifact, 'a')} FROM (SELECT COUNT(*) AS "
        f"total FROM {table} WHERE task_id = %s) n "
        f"LEFT JOIN {table} a ON a.task_id = %s AND a.artifact_id = %s"
    )


def _lock_row(key: uuid.UUID, owner: str | None = None, tenant: str = "") -> models.Task | None:
    """PostgreSQL: ``select_for_update().filter(pk=key).first()`` (and ``visible_to`` when
    ``owner`` is given) as one written-out statement, the row made a model as the ORM does.

    Each write of a job locks its task row first (an echo job four times): building that
    query with the ORM took about twice the CPU of running it. ``tests/test_store_snapshot.py``
    checks that every field equals the ORM's read and that the row is really locked.
    """
    params: list[Any] = [key] if owner is None else [key, owner, tenant]
    with connection.cursor() as cursor:
        cursor.execute(_lock_sql(owner is not None), params)
        row = cursor.fetchone()
    return None if row is None else _model_from_row(models.Task, row)


@functools.cache
def _lock_sql(visible: bool) -> str:
    """The locking read of every column of a task row."""
    owner = " AND owner = %s AND tenant = %s" if visible else ""
    table = connection.ops.quote_name(models.Task._meta.db_table)
    return f"SELECT {_model_columns(models.Task)} FROM {table} WHERE id = %s{owner} FOR UPDATE"


def _model_columns(model: type[Model], alias: str = "") -> str:
    """Every concrete column of ``model``, in the order ``_model_from_row`` reads them."""
    prefix = f"{alias}." if alias else ""
    return ", ".join(f"{prefix}{connection.ops.quote_name(f.column)}" for f in _readers(model)[0])


def _model_from_row(model: type[Model], row: Sequence[Any]) -> Model:
    """A ``model`` instance from a row of ``_model_columns``, as the ORM makes one: each
    column through its ``from_db_value`` (the JSON fields decode their text)."""
    _, decoders, names = _readers(model)
    values = [
        value if decode is None else decode(value, None, connection)
        for decode, value in zip(decoders, row, strict=True)
    ]
    return model.from_db(connection.alias, names, values)


@functools.cache
def _readers(model: type[Model]) -> tuple[list[Field], list[Any], list[str]]:
    """``model``'s concrete fields, each one's ``from_db_value`` (None: the value is used
    as read) and attname."""
    fields = list(model._meta.concrete_fields)
    decoders = [getattr(field, "from_db_value", None) for field in fields]
    return fields, decoders, [field.attname for field in fields]


def _make_cursor(status_timestamp: datetime, task_id: uuid.UUID) -> str:
    """An opaque, signed keyset cursor: the sort key of the last task on the page."""
    return signing.dumps(
        [status_timestamp.astimezone(UTC).isoformat(), str(task_id)], salt=_CURSOR_SALT
    )


def _read_cursor(token: str) -> tuple[datetime, uuid.UUID]:
    try:
        timestamp, task_id = signing.loads(token, salt=_CURSOR_SALT)
        return datetime.fromisoformat(timestamp), uuid.UUID(task_id)
    except (signing.BadSignature, ValueError, TypeError):
        raise InvalidParamsError(
            "Invalid page token", field="pageToken", description="The page token is not valid"
        ) from None
