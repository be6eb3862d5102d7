"""Fixtures of the streaming tests: the event bus to run on, started tasks, open gates."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings

from a2a_endpoint.execution import runtime
from a2a_endpoint.streaming.bus import ChannelLayerEventBus, InMemoryEventBus
from a2a_endpoint.testing import user_message
from tests.agents import gate
from tests.service.builders import poll_task

IN_MEMORY_LAYER = {"default": {"BACKEND": "tests.streaming.layers.LoopSafeInMemoryChannelLayer"}}


def channels_bus() -> dict[str, Any]:
    return {**settings.A2A_ENDPOINT, "EVENT_BUS": "channels"}


@pytest.fixture(params=["memory", "channels"])
def bus(request: pytest.FixtureRequest) -> Iterator[str]:
    """Run the test on the in-process bus and on the channel-layer bus.

    The channel-layer bus over Channels' in-memory layer exercises its per-process fan-out
    (one group membership per task, however many local streams) in one process.
    """
    if request.param == "memory":
        yield request.param
        return
    # CHANNEL_LAYERS changes reset channels' layer cache (setting_changed), and A2A_ENDPOINT
    # changes reset the runtime, so the bus is built on the fresh in-memory layer.
    with override_settings(CHANNEL_LAYERS=IN_MEMORY_LAYER, A2A_ENDPOINT=channels_bus()):
        assert isinstance(runtime.get_event_bus(), ChannelLayerEventBus)
        yield request.param


def local_streams(task_id: str) -> int:
    """Listeners of this process to the task: streams, blocking waits and job watches."""
    event_bus = runtime.get_event_bus()
    if isinstance(event_bus, ChannelLayerEventBus):
        # Each kind subscribes to the in-process fan-out of its own group.
        return sum(
            local.subscriber_count(task_id)
            for local in (event_bus._local, event_bus._settled, event_bus._cancels)
        )
    assert isinstance(event_bus, InMemoryEventBus)
    return event_bus.subscriber_count(task_id)


def group_readers() -> int:
    """Channel-layer groups this process is in (0 for the in-memory bus)."""
    event_bus = runtime.get_event_bus()
    return event_bus.reader_count() if isinstance(event_bus, ChannelLayerEventBus) else 0


def listeners(task_id: str) -> int:
    return local_streams(task_id) + group_readers()


class Gates:
    """Fresh gate names for "hold <gate>" jobs; every gate is opened at teardown."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def new(self) -> str:
        name = f"g-{uuid.uuid4().hex[:12]}"
        self.names.append(name)
        return name

    def open(self, name: str) -> None:
        gate(name).set()

    def open_all(self) -> None:
        for name in self.names:
            gate(name).set()


@pytest.fixture
def gates() -> Iterator[Gates]:
    held = Gates()
    yield held
    held.open_all()  # no job may stay blocked after its test


@pytest.fixture
def start(rpc: Any):
    """Start a task with SendMessage (returnImmediately) and return its id."""

    async def started(text: str, **fields: Any) -> str:
        params = {
            "message": user_message(text, **fields),
            "configuration": {"returnImmediately": True},
        }
        return (await rpc.result("SendMessage", params))["task"]["id"]

    return started


@pytest.fixture
def held(rpc: Any, start: Any, gates: Gates):
    """Start a task held WORKING at a fresh gate, then running ``script``: (id, gate)."""

    async def started(script: str = "") -> tuple[str, str]:
        name = gates.new()
        task_id = await start(f"hold {name} {script}".strip())
        await poll_task(rpc, task_id, "TASK_STATE_WORKING")
        return task_id, name

    return started
