"""The event bus API: what publishers and listeners of a task's stored events rely on.

Implementations: ``memory.InMemoryEventBus`` (one process) and
``channels_bus.ChannelLayerEventBus`` (across processes, through a Channels layer).
"""

from __future__ import annotations

import asyncio
import contextlib
from abc import ABC, abstractmethod
from typing import Any

from a2a_endpoint.store import StoredEvent


class Subscription(ABC):
    """Events of one task, in the order they arrive, from the moment of subscribing."""

    task_id: str

    @abstractmethod
    async def get(self) -> StoredEvent: ...

    async def get_until(self, deadline: float) -> StoredEvent | None:
        """The next event, or None once the loop clock passes ``deadline``."""
        if deadline <= asyncio.get_running_loop().time():
            return None
        # Not asyncio.wait_for: on Python 3.11 it swallows a cancellation (a client going
        # away) that arrives just as an event is delivered, and the stream would live on.
        try:
            async with asyncio.timeout_at(deadline):
                return await self.get()
        except TimeoutError:
            return None


class EventBus(ABC):
    @abstractmethod
    def publish(self, event: StoredEvent) -> None:
        """Deliver ``event`` to the task's subscribers. Callable from any thread."""

    @abstractmethod
    def subscribe(self, task_id: str) -> contextlib.AbstractAsyncContextManager[Subscription]:
        """Join the task's listeners; leaving the context frees everything at once."""

    def watch_settled(self, task_id: str) -> contextlib.AbstractAsyncContextManager[Subscription]:
        """What a blocking SendMessage waits on: at least the task's events that settle it
        (``TaskState.is_settled``; a direct Message reply is COMPLETED). By default the
        task's events; a bus may send it less."""
        return self.subscribe(task_id)

    def watch_cancel(self, task_id: str) -> contextlib.AbstractAsyncContextManager[Subscription]:
        """What a running job listens to: at least the task's CANCELED event (the job
        ignores the rest). By default the task's events; a bus may send it less."""
        return self.subscribe(task_id)

    def resident_tasks(self, loop: asyncio.AbstractEventLoop) -> set[asyncio.Task[Any]]:
        """Tasks the bus keeps on ``loop`` for as long as the loop lives (not work left
        over by a job, which its runner waits for)."""
        return set()

    async def ping(self, timeout: float) -> bool:
        """Prove that events published now would reach this process's listeners within
        ``timeout`` seconds: True, or raises (a health check's probe). False: the bus has
        nothing outside this process to check."""
        return False
