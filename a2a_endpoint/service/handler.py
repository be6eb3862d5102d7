"""RequestHandler: one async method per A2A operation (A2A §3.1), scoped to the caller."""

from __future__ import annotations

import asyncio
import functools
import uuid
from typing import Any

import msgspec
from asgiref.sync import sync_to_async
from django.db import transaction

from a2a_endpoint import types
from a2a_endpoint.conf import app_settings
from a2a_endpoint.errors import (
    InvalidParamsError,
    PushNotificationNotSupportedError,
    UnsupportedOperationError,
)
from a2a_endpoint.execution import runtime
from a2a_endpoint.execution.backends import ExecutionBackend
from a2a_endpoint.lifecycle import TaskState
from a2a_endpoint.store import TaskRecord, TaskStore, canonical_task_id
from a2a_endpoint.streaming.bus import EventBus, Subscription


def _db(func: Any) -> Any:
    """Run ORM work off the event loop (Django's ORM is synchronous)."""
    return sync_to_async(func, thread_sensitive=True)


def _settled(state: TaskState) -> bool:
    """Blocking SendMessage returns at a terminal or interrupted state (A2A §3.2.2)."""
    return state.is_terminal or state.is_interrupted


class RequestHandler:
    """The A2A service. Transport-agnostic: it sees typed params and a Caller, never HTTP."""

    def __init__(self, store: TaskStore, backend: ExecutionBackend, bus: EventBus) -> None:
        self.store = store
        self.backend = backend
        self.bus = bus

    # --- SendMessage ----------------------------------------------------------------------

    async def send_message(
        self, params: types.SendMessageRequest, caller: types.Caller
    ) -> types.SendMessageResponse:
        config = params.configuration or types.SendMessageConfiguration()
        self._check_push_config(config)
        tenant = params.tenant or caller.tenant
        if params.message.task_id:
            task_id = canonical_task_id(params.message.task_id)
        else:
            task_id = await _db(self.store.task_for_message)(
                caller.owner, tenant, params.message.message_id
            )
        # Subscribe before anything runs, so no update of the job can slip past the wait.
        async with self.bus.subscribe(task_id or (task_id := str(uuid.uuid4()))) as updates:
            if params.message.task_id:
                await _db(self._continue)(task_id, params, caller, tenant)
            elif not await _db(self.store.load)(task_id):
                # A retried send (same messageId) finds its task above and is not run twice;
                # a concurrent one gets the task of the send that stored first.
                task_id = (await _db(self._create)(task_id, params, caller, tenant)).id
            reply = None
            if not config.return_immediately:
                reply = await self._wait_on(task_id, updates)
        if reply is not None:
            return types.SendMessageResponse(message=reply)
        task = await _db(self.store.get_task)(
            task_id, caller.owner, tenant, history_length=config.history_length
        )
        return types.SendMessageResponse(task=task)

    def _check_push_config(self, config: types.SendMessageConfiguration) -> None:
        if config.task_push_notification_config is not None:
            raise PushNotificationNotSupportedError()

    def _create(
        self, task_id: str, params: types.SendMessageRequest, caller: types.Caller, tenant: str
    ) -> TaskRecord:
        context_id = params.message.context_id or str(uuid.uuid4())
        with transaction.atomic():
            record = self.store.create_task(
                task_id=task_id,
                owner=caller.owner,
                tenant=tenant,
                context_id=context_id,
                message=params.message,
                metadata=params.metadata,
            )
            if record.id == task_id:
                transaction.on_commit(functools.partial(self.backend.submit, record.id))
        return record

    def _continue(
        self, task_id: str, params: types.SendMessageRequest, caller: types.Caller, tenant: str
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
            record, resumed = self.store.continue_task(current.id, caller.owner, tenant, message)
            if resumed:
                transaction.on_commit(functools.partial(self.backend.submit, record.id))
        return record

    async def _wait_on(self, task_id: str, updates: Subscription) -> types.Message | None:
        """``_wait`` on ``updates`` if they are this task's, else on a new subscription."""
        if updates.task_id == task_id:
            return await self._wait(task_id, updates)
        async with self.bus.subscribe(task_id) as own:
            return await self._wait(task_id, own)

    async def _wait(self, task_id: str, updates: Subscription) -> types.Message | None:
        """Wait for a settled state (or a direct Message reply) until BLOCKING_TIMEOUT."""
        record = await _db(self.store.load)(task_id)
        if record is None:
            return None
        if _settled(record.state):
            # Settled before we looked (a fast agent, or a retried send): a task that was
            # answered with a direct Message is answered with it again (A2A §3.1.1).
            return await _db(self.store.direct_reply)(task_id)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + float(app_settings.BLOCKING_TIMEOUT)
        while (event := await updates.get_until(deadline)) is not None:
            if "message" in event.payload:
                return msgspec.convert(event.payload["message"], types.Message)
            if _settled(event.state):
                break
        return None

    async def send_streaming_message(
        self, params: types.SendMessageRequest, caller: types.Caller
    ) -> Any:
        raise UnsupportedOperationError("Streaming is not supported by this agent")

    # --- Tasks ----------------------------------------------------------------------------

    async def get_task(self, params: types.GetTaskRequest, caller: types.Caller) -> types.Task:
        return await _db(self.store.get_task)(
            params.id,
            caller.owner,
            params.tenant or caller.tenant,
            history_length=params.history_length,
        )

    async def list_tasks(
        self, params: types.ListTasksRequest, caller: types.Caller
    ) -> types.ListTasksResponse:
        return await _db(self.store.list_tasks)(
            caller.owner, params.tenant or caller.tenant, params
        )

    async def cancel_task(
        self, params: types.CancelTaskRequest, caller: types.Caller
    ) -> types.Task:
        task = await _db(self.store.cancel)(params.id, caller.owner, params.tenant or caller.tenant)
        # The task is CANCELED already (terminal, so the job's later writes are refused);
        # now tell the job to stop wherever it runs.
        self.backend.cancel(task.id)
        return task

    async def subscribe_to_task(
        self, params: types.SubscribeToTaskRequest, caller: types.Caller
    ) -> Any:
        raise UnsupportedOperationError("Streaming is not supported by this agent")

    # --- Push notification configs (not offered: capabilities.pushNotifications false) -----

    async def create_task_push_notification_config(
        self, params: types.TaskPushNotificationConfig, caller: types.Caller
    ) -> types.TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError()

    async def get_task_push_notification_config(
        self, params: types.GetTaskPushNotificationConfigRequest, caller: types.Caller
    ) -> types.TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError()

    async def list_task_push_notification_configs(
        self, params: types.ListTaskPushNotificationConfigsRequest, caller: types.Caller
    ) -> types.ListTaskPushNotificationConfigsResponse:
        raise PushNotificationNotSupportedError()

    async def delete_task_push_notification_config(
        self, params: types.DeleteTaskPushNotificationConfigRequest, caller: types.Caller
    ) -> dict[str, Any]:
        raise PushNotificationNotSupportedError()

    # --- Agent card -------------------------------------------------------------------------

    async def get_extended_agent_card(
        self, params: types.GetExtendedAgentCardRequest, caller: types.Caller
    ) -> types.AgentCard:
        raise UnsupportedOperationError("This agent has no extended agent card")


def get_request_handler() -> RequestHandler:
    return RequestHandler(runtime.get_store(), runtime.get_backend(), runtime.get_event_bus())
