"""Task update fan-out: the event bus and SSE framing."""

from a2a_endpoint.streaming.bus import (
    ChannelLayerEventBus,
    EventBus,
    InMemoryEventBus,
    Subscription,
)

__all__ = ["ChannelLayerEventBus", "EventBus", "InMemoryEventBus", "Subscription"]
