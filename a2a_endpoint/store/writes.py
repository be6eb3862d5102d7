"""Task writes: create, continue, status, replies, artifacts, cancel; each change and its
numbered event in one transaction, published after commit."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

import msgspec
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from a2a_endpoint import models, types
from a2a_endpoint.errors import (
    TaskNotCancelableError,
    TaskNotFoundError,
    TaskStateError,
    UnsupportedOperationError,
)
from a2a_endpoint.lifecycle import CANCELABLE_STATES, TaskState, transition
from a2a_endpoint.store.outbox import owe_deliveries, save_push_config
from a2a_endpoint.store.records import (
    Publisher,
    Pusher,
    StoredEvent,
    TaskRecord,
    _handoff_deadline,
    _parse_uuid,
    _record,
    _status,
    _to_builtins,
)
from a2a_endpoint.store.sql import (
    _ARTIFACT_CHANGES,
    _STATUS_CHANGES,
    RETRY_KEY,
    _artifact_row,
    _artifact_update,
    _insert,
    _lock_row,
    _save_fields,
)


class TaskWrites:
    """The writes of :class:`~a2a_endpoint.store.TaskStore`."""

    publisher: Publisher | None
    pusher: Pusher | None

    def create_task(
        self,
        *,
        task_id: str | None = None,
        owner: str,
        tenant: str,
        context_id: str,
        message: types.Message,
        metadata: dict[str, Any] | None = None,
        push_config: types.TaskPushNotificationConfig | None = None,
    ) -> TaskRecord:
        """Store a new SUBMITTED task whose history starts with ``message``, its job owed
        (``handoff_deadline``: the caller hands the job to the backend after the commit, and
        ``hand_off_owed_jobs`` again if no worker claimed it in time).

        A task that ``message`` (same owner, tenant and messageId) already started wins: its
        record is returned instead, so concurrent retries of one send make one task.
        ``push_config`` (SendMessage's) is stored with it, so its first event is owed to it.
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
                if push_config is not None:
                    task.push_configured = True  # inserted with the row
                _insert(task)
                if push_config is not None:
                    save_push_config(task, push_config)
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
        self,
        task_id: str,
        owner: str,
        tenant: str,
        message: types.Message,
        push_config: types.TaskPushNotificationConfig | None = None,
    ) -> tuple[TaskRecord, bool]:
        """Append a user message to an interrupted task and set it WORKING (``push_config``,
        SendMessage's, stored first: the move to WORKING is owed to it).

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
            if push_config is not None:
                save_push_config(task, push_config)
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
        """Write ``payload`` as event ``task.seq``, owe it to the task's webhooks (the push
        outbox, same transaction), and publish it and wake the push sender once committed."""
        kind = next(iter(payload))
        _insert(
            models.TaskEvent(task=task, seq=task.seq, kind=kind, state=task.state, payload=payload)
        )
        if owe_deliveries(task) and self.pusher is not None:
            pusher, task_id = self.pusher, str(task.id)
            # robust: a sender that cannot be woken (the broker is down) leaves the rows
            # pending, and a sweeper sends them (PUSH_TIMEOUT after they were due).
            transaction.on_commit(lambda: pusher(task_id), robust=True)
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
