"""RequestHandler: one async method per A2A operation (A2A §3.1), scoped to the caller."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import msgspec
from asgiref.sync import sync_to_async
from django.db import transaction

from a2a_endpoint import types
from a2a_endpoint.conf import app_settings
from a2a_endpoint.errors import (
    ExtendedAgentCardNotConfiguredError,
    InvalidParamsError,
    PushNotificationNotSupportedError,
    ServiceUnavailableError,
    TaskNotFoundError,
    UnauthenticatedError,
    UnsupportedOperationError,
)
from a2a_endpoint.execution import runtime
from a2a_endpoint.execution.backends import ExecutionBackend
from a2a_endpoint.lifecycle import TaskState
from a2a_endpoint.service.agent_card import extended_agent_card
from a2a_endpoint.service.streams import KEEPALIVE, Keepalive, StopWhen, at_settled, at_terminal
from a2a_endpoint.service.streams import follow as follow_events
from a2a_endpoint.store import StoredEvent, TaskRecord, TaskStore, canonical_task_id, in_thread
from a2a_endpoint.streaming.bus import EventBus, Subscription

StreamItem = StoredEvent | Keepalive
Listening = contextlib.AbstractAsyncContextManager[Subscription]

logger = logging.getLogger("a2a_endpoint.service")

__all__ = ["KEEPALIVE", "RequestHandler", "StreamItem", "get_request_handler"]


def _db(func: Any) -> Any:
    """ORM work of a request/response call, off the event loop.

    Thread-sensitive, as Django runs sync code for a request: in the caller's thread when
    there is one (so it shares its connection and transaction, e.g. the admin's action).
    Streams use ``in_thread`` instead: they must not hold a thread while they are open.
    """
    return sync_to_async(func, thread_sensitive=True)


def _tenant(params: Any, caller: types.Caller) -> str:
    """The tenant a request works in: the one it names, else the caller's own (A2A §12).

    A tenant the caller was not granted is answered like a missing task, whatever the
    method: nothing tells a caller that a tenant, or a task in it, exists (A2A §13.1).
    """
    tenant = params.tenant or caller.tenant
    if not caller.may_use(tenant):
        raise TaskNotFoundError()
    return tenant


@dataclass(frozen=True, slots=True)
class _Start:
    """Where a SendMessage left the task: a new one (with its first snapshot) or not."""

    task_id: str
    new: bool = False
    snapshot: types.Task | None = None
    seq: int = 0
    retried: bool = False  # this message had started the task already


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

    def _configuration(self, params: types.SendMessageRequest) -> types.SendMessageConfiguration:
        config = params.configuration or types.SendMessageConfiguration()
        if config.task_push_notification_config is not None:
            raise PushNotificationNotSupportedError()
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
        if params.message.task_id:
            return _Start(self._continue(task_id, params, caller, tenant).id)
        # A retried send (same messageId) finds its task and is not run twice.
        started = self.store.task_for_message(caller.owner, tenant, params.message.message_id)
        if started is not None:
            return _Start(started, retried=True)
        with transaction.atomic():
            record = self._create(task_id, params, caller, tenant)
            if record.id != task_id:  # a concurrent send of this message stored it first
                return _Start(record.id, retried=True)
            if not snapshot:
                return _Start(record.id, new=True, seq=record.seq)
            first = self.store.get_task(
                record.id, caller.owner, tenant, history_length=history_length
            )
        return _Start(record.id, new=True, snapshot=first, seq=record.seq)

    def _create(
        self, task_id: str, params: types.SendMessageRequest, caller: types.Caller, tenant: str
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
            )
            if record.id == task_id:
                transaction.on_commit(functools.partial(self._hand_off, record.id))
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

    # --- Streams (A2A §3.1.2, §3.1.6) -------------------------------------------------------

    def _check_streaming(self) -> None:
        if not app_settings.STREAMING:
            raise UnsupportedOperationError("Streaming is not supported by this agent")

    async def send_streaming_message(
        self, params: types.SendMessageRequest, caller: types.Caller
    ) -> AsyncIterator[StreamItem]:
        """Validate, listen and start at once (errors come before the stream); then the
        events. Listening comes first, as for a blocking send: a bus that cannot be joined
        is an error with nothing stored, not a task started that nobody can follow."""
        self._check_streaming()
        config = self._configuration(params)
        task_id = self._target(params)
        tenant = _tenant(params, caller)
        listening = self.bus.subscribe(task_id)
        updates = await _join(listening)
        try:
            start = await in_thread(self._start)(
                task_id, params, caller, tenant, snapshot=True, history_length=config.history_length
            )
        except BaseException:
            await listening.__aexit__(*sys.exc_info())
            raise
        if start.task_id != task_id:  # a retried send: follow the task it started
            await listening.__aexit__(None, None, None)
            listening = self.bus.subscribe(start.task_id)
            updates = await _join(listening)
        events = self._send_stream(start, updates, caller.owner, tenant, config.history_length)
        return _Held(events, listening)

    async def _send_stream(
        self,
        start: _Start,
        updates: Subscription,
        owner: str,
        tenant: str,
        history_length: int | None,
    ) -> AsyncIterator[StreamItem]:
        reply = await in_thread(self._reply_event)(start.task_id) if start.retried else None
        if reply is not None:
            # A2A §3.1.1: answered with a direct Message, a retry gets that Message
            # again (as SendMessage does), never the task behind it.
            yield reply
            return
        if start.new:
            events = self._new_task_events(start, updates)
        else:
            events = self._task_events(
                start.task_id, owner, tenant, updates, at_settled, history_length
            )
        async for item in events:
            yield item

    def _reply_event(self, task_id: str) -> StoredEvent | None:
        reply = self.store.direct_reply(task_id)
        record = self.store.load(task_id)
        if reply is None or record is None:
            return None
        # The reply is the task's last event: it finished it.
        return StoredEvent(task_id, record.seq, record.state, {"message": reply})

    async def _new_task_events(
        self, start: _Start, updates: Subscription
    ) -> AsyncIterator[StreamItem]:
        """A direct Message reply is the whole stream; else the Task first, then updates."""
        first = StoredEvent(start.task_id, start.seq, TaskState.SUBMITTED, {"task": start.snapshot})
        opened = False
        # Subscribed before the task existed: every later event comes through ``updates``.
        events = follow_events(
            self.store, updates, last=start.seq, stop=at_settled, keepalive=_keepalive()
        )
        async for item in events:
            if not opened and isinstance(item, StoredEvent):
                opened = True
                if "message" not in item.payload:
                    yield first
            yield item

    async def _snapshot_event(
        self, task_id: str, owner: str, tenant: str, history_length: int | None = None
    ) -> StoredEvent:
        """The Task snapshot a stream starts with (A2A §3.1.6), as the event it stands for."""
        task, seq = await in_thread(self.store.snapshot)(
            task_id, owner, tenant, history_length=history_length
        )
        return StoredEvent(task_id, seq, task.status.state, {"task": task})

    async def _task_events(
        self,
        task_id: str,
        owner: str,
        tenant: str,
        updates: Subscription,
        stop: StopWhen,
        history_length: int | None = None,
    ) -> AsyncIterator[StreamItem]:
        """The Task snapshot first (A2A §3.1.6), then every later event until ``stop``."""
        first = await self._snapshot_event(task_id, owner, tenant, history_length)
        yield first
        if stop(first):
            return
        events = follow_events(
            self.store, updates, last=first.seq, stop=stop, keepalive=_keepalive()
        )
        async for item in events:
            yield item

    async def subscribe_to_task(
        self,
        params: types.SubscribeToTaskRequest,
        caller: types.Caller,
        *,
        resume_after: int | None = None,
    ) -> AsyncIterator[StreamItem]:
        """Follow a task until it is terminal. ``resume_after`` (SSE Last-Event-ID) resumes
        the event sequence after that seq instead of starting with a snapshot."""
        self._check_streaming()
        tenant = _tenant(params, caller)
        record = await in_thread(self.store.get_record)(params.id, caller.owner, tenant)
        if resume_after is not None and resume_after > record.seq:
            raise InvalidParamsError(
                field="Last-Event-ID",
                description=f"The task has no event {resume_after} (its last is {record.seq})",
            )
        if record.state.is_terminal and (resume_after is None or resume_after >= record.seq):
            raise UnsupportedOperationError(
                f"Task is in terminal state {record.state.value}", taskId=record.id
            )
        listening = self.bus.subscribe(record.id)
        updates = await _join(listening)  # before the stream: an unreachable bus is an error
        events = self._subscription(record.id, updates, caller.owner, tenant, resume_after)
        return _Held(events, listening)

    async def _subscription(
        self,
        task_id: str,
        updates: Subscription,
        owner: str,
        tenant: str,
        resume_after: int | None,
    ) -> AsyncIterator[StreamItem]:
        # The snapshot and the events in this generator, not in a nested one: a thousand
        # streams of a task each resume every generator in between for every event.
        last = resume_after
        if last is None:
            first = await self._snapshot_event(task_id, owner, tenant)
            yield first
            if at_terminal(first):
                return
            last = first.seq
        events = follow_events(
            self.store,
            updates,
            last=last,
            stop=at_terminal,
            keepalive=_keepalive(),
            backlog=resume_after is not None,
        )
        async for item in events:
            yield item

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


def get_request_handler() -> RequestHandler:
    return RequestHandler(runtime.get_store(), runtime.get_backend(), runtime.get_event_bus())


def _keepalive() -> float:
    return float(app_settings.SSE_KEEPALIVE)


async def _join(listening: Listening) -> Subscription:
    """Enter ``listening``; an event bus that cannot be joined is ServiceUnavailableError."""
    try:
        return await listening.__aenter__()
    except Exception as exc:
        logger.warning("Could not join the event bus", exc_info=True)
        raise ServiceUnavailableError(
            "The event bus is unreachable; nothing was changed, try again later"
        ) from exc


@contextlib.asynccontextmanager
async def _listening(listening: Listening) -> AsyncIterator[Subscription]:
    """``async with listening`` whose entry failing is ServiceUnavailableError (``_join``)."""
    updates = await _join(listening)
    try:
        yield updates
    except BaseException:
        if not await listening.__aexit__(*sys.exc_info()):
            raise
    else:
        await listening.__aexit__(None, None, None)


class _Held:
    """A stream's events with the subscription they are read from, left when the stream
    ends or is closed, also when it was never read (a request that ended before its
    stream began): an async generator that never started has no ``finally`` to run."""

    def __init__(self, events: AsyncIterator[StreamItem], listening: Listening) -> None:
        self._events = events
        self._listening: Listening | None = listening

    def __aiter__(self) -> _Held:
        return self

    async def __anext__(self) -> StreamItem:
        try:
            return await anext(self._events)
        except BaseException:
            await self.aclose()
            raise

    async def aclose(self) -> None:
        listening, self._listening = self._listening, None
        if listening is None:
            return
        try:
            await self._events.aclose()  # type: ignore[attr-defined]
        finally:
            await listening.__aexit__(None, None, None)
