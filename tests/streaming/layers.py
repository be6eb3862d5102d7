"""A Channels in-memory layer that agent jobs can publish to from their own event loop."""

from __future__ import annotations

import asyncio
from typing import Any

from channels.layers import InMemoryChannelLayer

#: How long a send from another loop waits for the receiving loop to take the message.
HANDOVER_TIMEOUT = 5.0


class LoopSafeInMemoryChannelLayer(InMemoryChannelLayer):
    """Channels' ``InMemoryChannelLayer``, whose sends also work from other event loops.

    Its asyncio queues belong to the loop that receives (the test's, where the streams and
    the bus's group readers run), but agent jobs publish from the inline backend's loop
    thread. A put from there would not wake the receiving loop (asyncio is not
    thread-safe), so events would only show up once something else woke it, and streams
    would fall back to the log at each keep-alive. Such sends are handed over instead.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.home: asyncio.AbstractEventLoop | None = None

    async def new_channel(self, prefix: str = "specific.") -> str:
        self.home = asyncio.get_running_loop()  # the loop that will receive on it
        return await super().new_channel(prefix)

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        home = self.home
        if home is None or home is asyncio.get_running_loop() or home.is_closed():
            await super().send(channel, message)
            return
        handover = asyncio.run_coroutine_threadsafe(super().send(channel, message), home)
        await asyncio.wait_for(asyncio.wrap_future(handover), HANDOVER_TIMEOUT)
