"""The channel-layer bus in one process on the real channels_redis: groups come and go, the
Redis connections stay.

channels_redis receives every channel of a process with one ``BZPOPMIN``, and redis-py drops
the connection of a command cancelled in flight. A reader that stopped with each group (each
job's cancel watch, each blocking SendMessage's wait) therefore cost a new connection every
time; the bus's one reader per event loop keeps them.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pytest
import redis
from django.test import override_settings

from a2a_endpoint.lifecycle import TaskState
from a2a_endpoint.store import StoredEvent
from a2a_endpoint.streaming.bus import ChannelLayerEventBus
from tests.service.builders import DEADLINE, wait_for

pytestmark = pytest.mark.integration

CYCLES = 20


@pytest.fixture
def redis_layer(redis_url: str) -> Iterator[redis.Redis]:
    """Channels on the real Redis, under a key prefix of this test's own."""
    prefix = f"a2a-bus-{uuid.uuid4().hex[:12]}"
    layers = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [{"address": redis_url, "socket_timeout": None}], "prefix": prefix},
        }
    }
    with redis.Redis.from_url(redis_url, socket_timeout=5) as client:
        with override_settings(CHANNEL_LAYERS=layers):
            yield client
        for key in client.scan_iter(match=f"{prefix}*", count=1000):
            client.delete(key)


def connections_made(client: redis.Redis) -> int:
    return int(client.info("stats")["total_connections_received"])


async def test_job_watches_and_blocking_waits_reuse_the_redis_connections(redis_layer):
    bus = ChannelLayerEventBus()
    loop = asyncio.get_running_loop()
    task_id = str(uuid.uuid4())
    receive = bus.layer.receive
    cancelled = []

    async def counting_receive(channel: str) -> dict:
        try:
            return await receive(channel)
        except asyncio.CancelledError:
            cancelled.append(channel)  # a BZPOPMIN cut off in flight: its connection is lost
            raise

    bus.layer.receive = counting_receive
    # Warm up: the layer's connections (one to receive on, one for the rest) are made.
    async with bus.watch_cancel(task_id):
        pass
    before = await asyncio.to_thread(connections_made, redis_layer)
    for seq in range(1, CYCLES + 1):
        async with bus.watch_cancel(task_id) as job, bus.watch_settled(task_id) as wait:
            event = StoredEvent(task_id, seq, TaskState.CANCELED, {"statusUpdate": {}})
            await bus._send(event)  # publish's part on the loop (publish is sync)
            assert await job.get_until(loop.time() + DEADLINE) == event
            assert await wait.get_until(loop.time() + DEADLINE) == event
    await wait_for(lambda: not bus._leaving)
    made = await asyncio.to_thread(connections_made, redis_layer) - before
    assert cancelled == []  # one receive went on all along
    # One new connection per cycle when each group had a reader of its own; none now (the
    # margin is for another client of this Redis that happens to connect meanwhile).
    print("MADE", made)
    assert made < CYCLES // 4, f"{made} Redis connections for {CYCLES} watch cycles"
    assert bus.reader_count() == 0
    assert len(bus.resident_tasks(loop)) == 1
