"""A stream's hold on the event bus: joining a task's events, and leaving them when it ends."""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import AsyncIterator

from a2a_endpoint.errors import ServiceUnavailableError
from a2a_endpoint.service.streams import Keepalive
from a2a_endpoint.store import StoredEvent
from a2a_endpoint.streaming.bus import Subscription

StreamItem = StoredEvent | Keepalive
Listening = contextlib.AbstractAsyncContextManager[Subscription]

logger = logging.getLogger("a2a_endpoint.service")


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
