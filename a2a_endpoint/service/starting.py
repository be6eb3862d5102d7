"""How a message reaches its task: the task it targets, created or continued, and its job
handed to the execution backend."""

from __future__ import annotations

import functools
import logging
import uuid
from dataclasses import dataclass

from django.db import transaction

from a2a_endpoint import metrics, types
from a2a_endpoint.conf import app_settings
from a2a_endpoint.errors import InvalidParamsError, PushNotificationNotSupportedError
from a2a_endpoint.execution.backends import ExecutionBackend
from a2a_endpoint.push.configs import check_config
from a2a_endpoint.store import TaskRecord, TaskStore, canonical_task_id

logger = logging.getLogger("a2a_endpoint.service")

PUSH_CONFIG_FIELD = "configuration.taskPushNotificationConfig."


@dataclass(frozen=True, slots=True)
class _Start:
    """Where a SendMessage left the task: a new one (with its first snapshot) or not."""

    task_id: str
    new: bool = False
    snapshot: types.Task | None = None
    seq: int = 0
    retried: bool = False  # this message had started the task already


class TaskStarts:
    """The start of SendMessage and SendStreamingMessage, for :class:`RequestHandler`."""

    store: TaskStore
    backend: ExecutionBackend

    def _configuration(self, params: types.SendMessageRequest) -> types.SendMessageConfiguration:
        config = params.configuration or types.SendMessageConfiguration()
        if config.task_push_notification_config is not None and not (
            app_settings.PUSH_NOTIFICATIONS
        ):
            raise PushNotificationNotSupportedError()
        return config

    @staticmethod
    def _push_config(params: types.SendMessageRequest) -> types.TaskPushNotificationConfig | None:
        """SendMessage's push config, checked (off the loop: it resolves the URL's host).

        Its ``taskId`` "should be empty": the config is bound to the task the message starts
        or continues, whatever it says.
        """
        config = (
            params.configuration.task_push_notification_config if params.configuration else None
        )
        if config is None:
            return None
        check_config(config, PUSH_CONFIG_FIELD)
        return config

    @staticmethod
    def _target(params: types.SendMessageRequest) -> str:
        """The task this message goes to: its taskId, else the id of a new task.

        A retried send (a messageId that already started a task) is found by ``_start``,
        which then answers with that task instead.
        """
        if params.message.task_id:
            return canonical_task_id(params.message.task_id)
        return str(uuid.uuid4())

    def _start(
        self,
        task_id: str,
        params: types.SendMessageRequest,
        caller: types.Caller,
        tenant: str,
        snapshot: bool = False,
        history_length: int | None = None,
    ) -> _Start:
        """Continue or create the task, and read a new task's first ``snapshot`` if asked
        (a stream's first event, a ``returnImmediately`` answer)."""
        push_config = self._push_config(params)  # before anything is stored
        if params.message.task_id:
            return _Start(self._continue(task_id, params, caller, tenant, push_config).id)
        # A retried send (same messageId) finds its task and is not run twice.
        started = self.store.task_for_message(caller.owner, tenant, params.message.message_id)
        if started is not None:
            return _Start(started, retried=True)
        with transaction.atomic():
            record = self._create(task_id, params, caller, tenant, push_config)
            if record.id != task_id:  # a concurrent send of this message stored it first
                return _Start(record.id, retried=True)
            if not snapshot:
                return _Start(record.id, new=True, seq=record.seq)
            first = self.store.get_task(
                record.id, caller.owner, tenant, history_length=history_length
            )
        return _Start(record.id, new=True, snapshot=first, seq=record.seq)

    def _create(
        self,
        task_id: str,
        params: types.SendMessageRequest,
        caller: types.Caller,
        tenant: str,
        push_config: types.TaskPushNotificationConfig | None,
    ) -> TaskRecord:
        context_id = params.message.context_id or str(uuid.uuid4())
        # No savepoint of its own: create_task has one, and _start's transaction is around.
        with transaction.atomic(savepoint=False):
            record = self.store.create_task(
                task_id=task_id,
                owner=caller.owner,
                tenant=tenant,
                context_id=context_id,
                message=params.message,
                metadata=params.metadata,
                push_config=push_config,
            )
            if record.id == task_id:
                transaction.on_commit(functools.partial(self._hand_off, record.id))
                transaction.on_commit(metrics.task_created, robust=True)
        return record

    def _continue(
        self,
        task_id: str,
        params: types.SendMessageRequest,
        caller: types.Caller,
        tenant: str,
        push_config: types.TaskPushNotificationConfig | None,
    ) -> TaskRecord:
        message = params.message
        with transaction.atomic():
            current = self.store.get_record(task_id, caller.owner, tenant)
            if message.context_id and message.context_id != current.context_id:
                raise InvalidParamsError(
                    "contextId does not match the task's context",
                    field="message.contextId",
                    description=f"Task {current.id} belongs to context {current.context_id}",
                )
            record, resumed = self.store.continue_task(
                current.id, caller.owner, tenant, message, push_config
            )
            if resumed:
                transaction.on_commit(functools.partial(self._hand_off, record.id))
        return record

    def _hand_off(self, task_id: str) -> None:
        """Give the committed task's job to the backend (after the commit).

        A backend that cannot take it now (the broker is down) does not undo the write the
        client is answered for: the job stays owed (``handoff_deadline``), and a worker's
        sweeper hands it over again once the broker is back (``JOB_HANDOFF_TIMEOUT``).
        """
        try:
            self.backend.submit(task_id)
        except Exception:
            logger.warning(
                "Could not hand the job of task %s to the execution backend; it stays owed "
                "and is handed over again within JOB_HANDOFF_TIMEOUT",
                task_id,
                exc_info=True,
            )
