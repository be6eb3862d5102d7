"""``InMemoryEventBus`` serves one process (any thread, any event loop)."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import threading
import time
from collections.abc import AsyncIterator

from a2a_endpoint import metrics
from a2a_endpoint.store import StoredEvent
from a2a_endpoint.streaming.base import EventBus, Subscription


class _QueueSubscription(Subscription):
    """Events of one task for one consumer (a stream, a blocking send), on one event loop.

    A deque and a future, not an ``asyncio.Queue`` with ``asyncio.timeout_at``: an event
    reaches 1,000 streams of a task at once, and the timer armed and cancelled around every
    wait was a third of a stream's work per event. The keep-alive deadline moves on with
    each event, so one timer serves many waits: it is re-armed only when it fires early.
    """

    def __init__(self, task_id: str) -> None:
        self.task_id = task_id
        self.loop = asyncio.get_running_loop()
        self.events: collections.deque[StoredEvent] = collections.deque()
        self._waiter: asyncio.Future[None] | None = None
        self._timer: asyncio.TimerHandle | None = None

    def put(self, event: StoredEvent) -> None:
        """Deliver ``event`` (on the subscription's loop)."""
        self.events.append(event)
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _on_timer(self) -> None:
        self._timer = None
        self._wake()  # the waiter looks at the clock: this timer may be older than its wait

    async def _wait(self) -> None:
        # The event stays in ``events`` until taken: a wait cancelled as an event lands
        # (a client going away) loses nothing.
        waiter = self._waiter = self.loop.create_future()
        try:
            await waiter
        finally:
            self._waiter = None

    async def get(self) -> StoredEvent:
        while not self.events:
            await self._wait()
        return self.events.popleft()

    async def get_until(self, deadline: float) -> StoredEvent | None:
        while not self.events:
            if deadline <= self.loop.time():
                return None
            timer = self._timer
            if timer is None or timer.when() > deadline:
                if timer is not None:
                    timer.cancel()
                self._timer = self.loop.call_at(deadline, self._on_timer)
            await self._wait()
        return self.events.popleft()

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def _deliver(
    subscribers: list[_QueueSubscription],
    event: StoredEvent,
    label: str | None = None,
    published: float = 0.0,
) -> None:
    for subscriber in subscribers:
        subscriber.put(event)
    if label is not None:  # once per loop, not per subscriber: 1,000 streams, one record
        metrics.bus_delivered(label, published, time.perf_counter())


class InMemoryEventBus(EventBus):
    """One process, thread-safe: publishers may run in worker threads or other loops.

    ``metrics_label``: the ``bus`` label of its metrics (docs/metrics.md); None records none
    (the channel-layer bus's in-process fan-out, which records its own).
    """

    def __init__(self, *, metrics_label: str | None = "memory") -> None:
        self._metrics_label = metrics_label
        self._lock = threading.Lock()
        self._subscribers: dict[str, set[_QueueSubscription]] = {}

    def publish(self, event: StoredEvent) -> None:
        label = self._metrics_label
        if label is not None:
            metrics.bus_published(label)
        with self._lock:
            subscribers = list(self._subscribers.get(event.task_id, ()))
        if not subscribers:
            return
        published = time.perf_counter()
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        by_loop: dict[asyncio.AbstractEventLoop, list[_QueueSubscription]] = {}
        for subscriber in subscribers:
            by_loop.setdefault(subscriber.loop, []).append(subscriber)
        for loop, members in by_loop.items():
            if loop is running:
                # On the subscribers' own loop (the channel-layer reader): put directly, not
                # through a self-pipe write per stream (1,000 streams, 1,000 syscalls).
                _deliver(members, event, label, published)
            else:
                with contextlib.suppress(RuntimeError):  # that loop is already closed
                    loop.call_soon_threadsafe(_deliver, members, event, label, published)

    @contextlib.asynccontextmanager
    async def subscribe(self, task_id: str) -> AsyncIterator[Subscription]:
        subscription = _QueueSubscription(task_id)
        with self._lock:
            self._subscribers.setdefault(task_id, set()).add(subscription)
        try:
            yield subscription
        finally:
            subscription.close()
            with self._lock:
                members = self._subscribers.get(task_id)
                if members is not None:
                    members.discard(subscription)
                    if not members:
                        del self._subscribers[task_id]

    def subscriber_count(self, task_id: str) -> int:
        with self._lock:
            return len(self._subscribers.get(task_id, ()))
