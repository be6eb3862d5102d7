"""SendStreamingMessage and SubscribeToTask (A2A §3.1.2, §3.1.6): a task's events as a stream."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator

from a2a_endpoint import types
from a2a_endpoint.conf import app_settings
from a2a_endpoint.errors import InvalidParamsError, UnsupportedOperationError
from a2a_endpoint.lifecycle import TaskState
from a2a_endpoint.service.calls import _tenant
from a2a_endpoint.service.starting import TaskStarts, _Start
from a2a_endpoint.service.streams import StopWhen, at_settled, at_terminal
from a2a_endpoint.service.streams import follow as follow_events
from a2a_endpoint.service.subscriptions import StreamItem, _Held, _join
from a2a_endpoint.store import StoredEvent, TaskStore, in_thread
from a2a_endpoint.streaming.bus import EventBus, Subscription


class Streams(TaskStarts):
    """The streaming operations of :class:`RequestHandler`; a stream starts its task as
    SendMessage does (:class:`TaskStarts`)."""

    store: TaskStore
    bus: EventBus

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


def _keepalive() -> float:
    return float(app_settings.SSE_KEEPALIVE)
