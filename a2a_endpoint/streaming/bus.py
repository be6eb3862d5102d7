"""The event bus: publishes stored task events to every listener of that task.

``InMemoryEventBus`` serves one process (any thread, any event loop); ``ChannelLayerEventBus``
carries events between processes through a Channels layer (one group per task, one for the
events that settle it and one for its cancellation). Channels is imported only in
``channels_bus``.

This module is the package's entry point to the bus (settings name its classes by their
path here): the API lives in ``base``, the buses in ``memory`` and ``channels_bus``.
"""

from a2a_endpoint.streaming.base import EventBus, Subscription
from a2a_endpoint.streaming.channels_bus import (
    CANCEL_GROUP_PREFIX,
    GROUP_PREFIX,
    PING_TYPE,
    SETTLED_GROUP_PREFIX,
    ChannelLayerEventBus,
    cancel_group_name,
    group_name,
    settled_group_name,
)
from a2a_endpoint.streaming.memory import InMemoryEventBus

__all__ = [
    "CANCEL_GROUP_PREFIX",
    "GROUP_PREFIX",
    "PING_TYPE",
    "SETTLED_GROUP_PREFIX",
    "ChannelLayerEventBus",
    "EventBus",
    "InMemoryEventBus",
    "Subscription",
    "cancel_group_name",
    "group_name",
    "settled_group_name",
]
