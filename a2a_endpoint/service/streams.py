"""Task event sequences for streams: each event once, in seq order, gaps filled from the log.

A2A §3.1.2 / §3.1.6: events reach every stream of a task in generation order. The bus may
drop messages (a full channel-layer channel), so the per-task ``seq`` of each event is the
truth: a jump in seq is filled from the ``TaskEvent`` log, and an idle stream checks the
log at each keep-alive in case the last event of the task was the one dropped.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

from a2a_endpoint.store import StoredEvent, TaskStore, in_thread
from a2a_endpoint.streaming.bus import Subscription


class Keepalive:
    """Yielded when a stream has been idle for the keep-alive interval."""

    def __repr__(self) -> str:
        return "KEEPALIVE"


KEEPALIVE = Keepalive()

StopWhen = Callable[[StoredEvent], bool]


def at_terminal(event: StoredEvent) -> bool:
    """SubscribeToTask closes at a terminal state only (A2A §3.1.6); interrupted stays open."""
    return event.state.is_terminal


def at_settled(event: StoredEvent) -> bool:
    """SendStreamingMessage also closes when the task waits for the client (interrupted)."""
    return event.state.is_settled


async def _next_batch(
    store: TaskStore, updates: Subscription, last: int, keepalive: float
) -> list[StoredEvent] | None:
    """The events after ``last`` that are known now, or None after an idle interval."""
    loop = asyncio.get_running_loop()
    event = await updates.get_until(loop.time() + keepalive)
    if event is None:
        # Idle: was the last event of the task dropped on its way? The log knows.
        return await in_thread(store.events_after)(updates.task_id, last) or None
    if event.seq <= last:
        return []  # already sent (in the snapshot or through gap filling)
    if event.seq == last + 1:
        return [event]
    missed = await in_thread(store.events_after)(updates.task_id, last, event.seq - 1)
    return [*missed, event]


async def follow(
    store: TaskStore,
    updates: Subscription,
    *,
    last: int,
    stop: StopWhen,
    keepalive: float,
    backlog: bool = False,
) -> AsyncIterator[StoredEvent | Keepalive]:
    """The task's events with seq > ``last`` until ``stop`` says so; KEEPALIVE when idle.

    ``updates`` must have been subscribed before ``last`` was read, or ``backlog`` set so
    that the log is read first for events committed in between.
    """
    if backlog:
        for event in await in_thread(store.events_after)(updates.task_id, last):
            yield event
            last = event.seq
            if stop(event):
                return
    while True:
        batch = await _next_batch(store, updates, last, keepalive)
        if batch is None:
            yield KEEPALIVE
            continue
        for event in batch:
            if event.seq <= last:
                continue
            yield event
            last = event.seq
            if stop(event):
                return
