"""RequestHandler: one async method per A2A operation (A2A §3.1), scoped to the caller."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import msgspec

from a2a_endpoint import types
from a2a_endpoint.conf import app_settings
from a2a_endpoint.errors import (
    ExtendedAgentCardNotConfiguredError,
    InvalidParamsError,
    PushNotificationNotSupportedError,
    UnauthenticatedError,
    UnsupportedOperationError,
)
from a2a_endpoint.execution import runtime
from a2a_endpoint.execution.backends import ExecutionBackend
from a2a_endpoint.push.configs import check_config
from a2a_endpoint.service.agent_card import extended_agent_card
from a2a_endpoint.service.calls import _db, _tenant
from a2a_endpoint.service.starting import TaskStarts
from a2a_endpoint.service.streaming import Streams
from a2a_endpoint.service.streams import KEEPALIVE
from a2a_endpoint.service.subscriptions import StreamItem, _listening
from a2a_endpoint.store import TaskStore
from a2a_endpoint.streaming.bus import EventBus, Subscription

logger = logging.getLogger("a2a_endpoint.service")

__all__ = ["KEEPALIVE", "RequestHandler", "StreamItem", "get_request_handler"]


class RequestHandler(Streams, TaskStarts):
    """The A2A service. Transport-agnostic: it sees typed params and a Caller, never HTTP."""

    def __init__(self, store: TaskStore, backend: ExecutionBackend, bus: EventBus) -> None:
        self.store = store
        self.backend = backend
        self.bus = bus

    # --- SendMessage ----------------------------------------------------------------------

    async def send_message(
        self, params: types.SendMessageRequest, caller: types.Caller
    ) -> types.SendMessageResponse:
        config = self._configuration(params)
        task_id = self._target(params)
        tenant = _tenant(params, caller)
        reply = None
        if config.return_immediately:
            # Nothing to wait for, so no subscription (a channel-layer group to join and
            # leave); a new task's snapshot is read in the transaction that stores it.
            start = await _db(self._start)(
                task_id, params, caller, tenant, snapshot=True, history_length=config.history_length
            )
        else:
            # Subscribe before anything runs, so no update of the job can slip past the wait
            # (and a bus that cannot be joined is an error with nothing stored).
            async with _listening(self.bus.watch_settled(task_id)) as updates:
                start = await _db(self._start)(task_id, params, caller, tenant)
                if start.new:  # subscribed before the task existed: every event is to come
                    reply = await self._wait(start.task_id, updates, look_first=False)
                else:
                    reply = await self._wait_on(start.task_id, updates)
        if reply is not None:
            return types.SendMessageResponse(message=reply)
        task = start.snapshot or await _db(self.store.get_task)(
            start.task_id, caller.owner, tenant, history_length=config.history_length
        )
        return types.SendMessageResponse(task=task)

    async def _wait_on(self, task_id: str, updates: Subscription) -> types.Message | None:
        """``_wait`` on ``updates`` if they are this task's, else on a new subscription."""
        if updates.task_id == task_id:
            return await self._wait(task_id, updates)
        async with _listening(self.bus.watch_settled(task_id)) as own:
            return await self._wait(task_id, own)

    async def _wait(
        self, task_id: str, updates: Subscription, *, look_first: bool = True
    ) -> types.Message | None:
        """Wait for a settled state (or a direct Message reply) until BLOCKING_TIMEOUT.

        ``look_first``: the task may have settled before ``updates`` began (a retried send, a
        continued task), so read its state first. A new task's subscription began before
        the task was stored, so every event of its job comes through ``updates``.
        """
        if look_first:
            record = await _db(self.store.load)(task_id)
            if record is None:
                return None
            if record.state.is_settled:
                # Settled before we looked (a fast agent, or a retried send): a task that was
                # answered with a direct Message is answered with it again (A2A §3.1.1).
                return await _db(self.store.direct_reply)(task_id)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + float(app_settings.BLOCKING_TIMEOUT)
        while (event := await updates.get_until(deadline)) is not None:
            if "message" in event.payload:
                return msgspec.convert(event.payload["message"], types.Message)
            if event.state.is_settled:
                break
        return None

    # --- Tasks ----------------------------------------------------------------------------

    async def get_task(self, params: types.GetTaskRequest, caller: types.Caller) -> types.Task:
        return await _db(self.store.get_task)(
            params.id,
            caller.owner,
            _tenant(params, caller),
            history_length=params.history_length,
        )

    async def list_tasks(
        self, params: types.ListTasksRequest, caller: types.Caller
    ) -> types.ListTasksResponse:
        return await _db(self.store.list_tasks)(caller.owner, _tenant(params, caller), params)

    async def cancel_task(
        self, params: types.CancelTaskRequest, caller: types.Caller
    ) -> types.Task:
        task = await _db(self.store.cancel)(params.id, caller.owner, _tenant(params, caller))
        # The task is CANCELED already (terminal, so the job's later writes are refused);
        # now tell the job to stop wherever it runs (a Celery publish may block: off the loop).
        await _db(self._stop_job)(task.id)
        return task

    def _stop_job(self, task_id: str) -> None:
        """Tell a canceled task's job to stop. The cancel is committed whatever happens
        here: a job that misses the signal (the bus or the broker is down) hears it from
        its lease's heartbeat (a task found terminal), and one that ignores it is killed
        by a worker's sweeper (``stop_stubborn_jobs``)."""
        try:
            self.backend.cancel(task_id)
        except Exception:
            logger.warning(
                "Could not signal the job of canceled task %s; its heartbeat finds it "
                "canceled instead",
                task_id,
                exc_info=True,
            )

    # --- Push notification configs (A2A §3.1.7-3.1.10) -----------------------------------

    async def create_task_push_notification_config(
        self, params: types.TaskPushNotificationConfig, caller: types.Caller
    ) -> types.TaskPushNotificationConfig:
        _check_push()
        tenant = _tenant(params, caller)
        if not params.task_id:  # not the type's: SendMessage's config has none
            raise InvalidParamsError(field="taskId", description="taskId is required")
        return await _db(self._create_push_config)(params, caller.owner, tenant)

    def _create_push_config(
        self, params: types.TaskPushNotificationConfig, owner: str, tenant: str
    ) -> types.TaskPushNotificationConfig:
        check_config(params)  # resolves the URL's host: here, off the event loop
        return self.store.create_push_config(params.task_id, owner, tenant, params)

    async def get_task_push_notification_config(
        self, params: types.GetTaskPushNotificationConfigRequest, caller: types.Caller
    ) -> types.TaskPushNotificationConfig:
        _check_push()
        tenant = _tenant(params, caller)
        return await _db(self.store.get_push_config)(
            params.task_id, caller.owner, tenant, params.id
        )

    async def list_task_push_notification_configs(
        self, params: types.ListTaskPushNotificationConfigsRequest, caller: types.Caller
    ) -> types.ListTaskPushNotificationConfigsResponse:
        _check_push()
        tenant = _tenant(params, caller)
        if params.page_size < 0:
            raise InvalidParamsError(field="pageSize", description="pageSize must not be negative")
        return await _db(self.store.list_push_configs)(
            params.task_id, caller.owner, tenant, params.page_size, params.page_token
        )

    async def delete_task_push_notification_config(
        self, params: types.DeleteTaskPushNotificationConfigRequest, caller: types.Caller
    ) -> dict[str, Any]:
        """Idempotent (A2A §3.1.10): deleting a config that is gone is not an error; its
        owed deliveries go with it. The result is ``google.protobuf.Empty``: ``{}``."""
        _check_push()
        tenant = _tenant(params, caller)
        await _db(self.store.delete_push_config)(params.task_id, caller.owner, tenant, params.id)
        return {}

    # --- Agent card -------------------------------------------------------------------------

    async def get_extended_agent_card(
        self, params: types.GetExtendedAgentCardRequest, caller: types.Caller, jsonrpc_url: str
    ) -> types.AgentCard:
        """A2A §3.1.11: for authenticated callers only; -32004 when the card does not
        declare it, -32007 when it does but there is no extended card for this caller."""
        if not app_settings.EXTENDED_CARD:
            raise UnsupportedOperationError("This agent has no extended agent card")
        if not caller.authenticated:
            raise UnauthenticatedError("The extended agent card needs authentication")
        _tenant(params, caller)
        card = await _db(extended_agent_card)(caller, jsonrpc_url)
        if card is None:
            raise ExtendedAgentCardNotConfiguredError()
        return card


def _check_push() -> None:
    if not app_settings.PUSH_NOTIFICATIONS:
        raise PushNotificationNotSupportedError()


def get_request_handler() -> RequestHandler:
    return RequestHandler(runtime.get_store(), runtime.get_backend(), runtime.get_event_bus())
