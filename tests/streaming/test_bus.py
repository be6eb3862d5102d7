"""The event buses on their own: cancellation of a waiting stream or group reader always wins."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from django.test import override_settings

from a2a_endpoint.lifecycle import TaskState
from a2a_endpoint.store import StoredEvent
from a2a_endpoint.streaming.bus import (
    ChannelLayerEventBus,
    InMemoryEventBus,
    cancel_group_name,
    group_name,
    settled_group_name,
)
from a2a_endpoint.streaming.channels_bus import _to_message
from tests.service.builders import DEADLINE, wait_for
from tests.streaming.conftest import IN_MEMORY_LAYER

TASK = "00000000-0000-0000-0000-000000000001"
EVENT = StoredEvent(TASK, 1, TaskState.WORKING, {"statusUpdate": {}})


async def test_waiting_subscription_gets_published_events_in_order():
    bus = InMemoryEventBus()
    loop = asyncio.get_running_loop()
    async with bus.subscribe(TASK) as updates:
        for seq in (1, 2, 3):
            bus.publish(StoredEvent(TASK, seq, TaskState.WORKING, {}))
        got = [await updates.get_until(loop.time() + DEADLINE) for _ in range(3)]
        assert [event.seq for event in got if event] == [1, 2, 3]
        assert await updates.get_until(loop.time() + 0.01) is None  # idle: None, no error
    assert bus.subscriber_count(TASK) == 0


async def test_cancelling_a_wait_is_not_lost_when_an_event_lands_at_once():
    # A client disconnect cancels the stream while it waits; if an event is delivered in
    # the same loop turn, the cancellation must still end the wait (asyncio.wait_for on
    # Python 3.11 returned the event instead, and the stream outlived its client).
    bus = InMemoryEventBus()
    loop = asyncio.get_running_loop()
    async with bus.subscribe(TASK) as updates:
        waiting = asyncio.create_task(updates.get_until(loop.time() + DEADLINE))
        await asyncio.sleep(0)  # now waiting for the queue
        bus.publish(EVENT)  # on the subscriber's loop: delivered at once, the waiter is
        waiting.cancel()  # about to wake when the cancellation lands
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert await updates.get_until(loop.time() + DEADLINE) is EVENT  # not lost either


async def test_a_busy_stream_arms_one_keepalive_timer_not_one_per_event(monkeypatch):
    """1,000 streams take each event: a timer armed and cancelled around every wait was a
    third of their work. The keep-alive deadline only moves on, so one timer serves."""
    bus = InMemoryEventBus()
    loop = asyncio.get_running_loop()
    armed = []
    original = loop.call_at

    def counting(when, callback, *args, **kwargs):
        armed.append(when)
        return original(when, callback, *args, **kwargs)

    monkeypatch.setattr(loop, "call_at", counting)
    async with bus.subscribe(TASK) as updates:
        for seq in range(1, 51):
            waiting = asyncio.create_task(updates.get_until(loop.time() + DEADLINE))
            await asyncio.sleep(0)  # waiting on the subscription, its timer armed
            bus.publish(StoredEvent(TASK, seq, TaskState.WORKING, {}))
            assert (await waiting).seq == seq
        assert len(armed) == 1
    assert updates._timer is None  # leaving cancels it: no timer outlives its stream


async def test_a_keepalive_timer_older_than_the_wait_does_not_end_it_early():
    bus = InMemoryEventBus()
    loop = asyncio.get_running_loop()
    async with bus.subscribe(TASK) as updates:
        waiting = asyncio.create_task(updates.get_until(loop.time() + 0.05))
        await asyncio.sleep(0)
        bus.publish(EVENT)
        assert await waiting is EVENT  # its timer stays armed for the next wait
        deadline = loop.time() + 0.2
        assert await updates.get_until(deadline) is None  # woken at 0.05: waits on
        assert loop.time() >= deadline
        # A later event still ends a wait that was re-armed that way.
        waiting = asyncio.create_task(updates.get_until(loop.time() + 0.05))
        await asyncio.sleep(0)
        bus.publish(EVENT)
        assert await waiting is EVENT  # again a 0.05 timer left armed
        early = updates._timer.when()
        waiting = asyncio.create_task(updates.get_until(loop.time() + DEADLINE))
        await wait_for(lambda: updates._timer is not None and updates._timer.when() > early)
        bus.publish(EVENT)
        assert await waiting is EVENT


async def test_an_earlier_deadline_rearms_the_timer():
    bus = InMemoryEventBus()
    loop = asyncio.get_running_loop()
    async with bus.subscribe(TASK) as updates:
        waiting = asyncio.create_task(updates.get_until(loop.time() + DEADLINE))
        await asyncio.sleep(0)
        bus.publish(EVENT)
        assert await waiting is EVENT  # a timer armed DEADLINE ahead is left behind
        began = loop.time()
        assert await asyncio.wait_for(updates.get_until(began + 0.01), DEADLINE / 2) is None
        assert loop.time() - began < DEADLINE / 2


async def test_get_waits_without_a_deadline():
    bus = InMemoryEventBus()
    async with bus.subscribe(TASK) as updates:
        waiting = asyncio.create_task(updates.get())
        await asyncio.sleep(0)
        assert not waiting.done()
        await asyncio.to_thread(bus.publish, EVENT)  # from another thread, as a worker does
        assert await asyncio.wait_for(waiting, DEADLINE) is EVENT
        assert updates._timer is None


async def test_publishing_on_the_subscribers_loop_puts_directly(monkeypatch):
    """The channel-layer reader publishes on the streams' loop: no self-pipe write per stream;
    from another thread, one scheduled delivery per loop, whatever the number of streams."""
    bus = InMemoryEventBus()
    loop = asyncio.get_running_loop()
    scheduled = []
    original = loop.call_soon_threadsafe

    def counting(callback, *args, **kwargs):
        scheduled.append(callback)
        return original(callback, *args, **kwargs)

    monkeypatch.setattr(loop, "call_soon_threadsafe", counting)
    async with contextlib.AsyncExitStack() as stack:
        streams = [await stack.enter_async_context(bus.subscribe(TASK)) for _ in range(100)]
        bus.publish(StoredEvent(TASK, 1, TaskState.WORKING, {}))
        assert scheduled == []
        assert all(len(stream.events) == 1 for stream in streams)
        await asyncio.to_thread(bus.publish, StoredEvent(TASK, 2, TaskState.WORKING, {}))
        # to_thread's own completion is scheduled the same way: count only deliveries.
        assert [callback.__name__ for callback in scheduled].count("_deliver") == 1
        for stream in streams:
            got = [await stream.get_until(loop.time() + DEADLINE) for _ in range(2)]
            assert [event.seq for event in got] == [1, 2]


async def test_a_message_landing_as_the_group_is_left_is_dropped_and_the_reader_reads_on():
    with override_settings(CHANNEL_LAYERS=IN_MEMORY_LAYER):
        bus = ChannelLayerEventBus()
        loop = asyncio.get_running_loop()
        async with bus.subscribe(TASK) as updates:
            (reader,) = bus.resident_tasks(loop)
            channel = bus._inboxes[loop].channel
            await asyncio.sleep(0)  # the reader waits on its channel
            # A message lands on the channel in this very turn, as the last stream leaves.
            group = group_name(TASK)
            await bus.layer.send(channel, {**_to_message(EVENT), "group": group})
        assert bus.reader_count() == 0
        await wait_for(lambda: not bus.layer.groups)  # the process left the group
        assert not updates.events  # nobody is left to hand it to
        assert not reader.done()  # the one reader of this loop reads on
        other = "00000000-0000-0000-0000-000000000002"
        async with bus.subscribe(other) as later:
            assert bus.resident_tasks(loop) == {reader}
            event = StoredEvent(other, 1, TaskState.WORKING, {"statusUpdate": {}})
            await bus._send(event)
            assert await later.get_until(loop.time() + DEADLINE) == event


async def test_every_group_of_a_loop_delivers_to_one_channel_and_one_reader():
    """One channel and one reader per loop, whatever the groups and however often they
    are joined and left: a reader per group stopped with it, and channels_redis then
    dropped its Redis connection (a BZPOPMIN cancelled in flight)."""
    with override_settings(CHANNEL_LAYERS=IN_MEMORY_LAYER):
        bus = ChannelLayerEventBus()
        loop = asyncio.get_running_loop()
        other = "00000000-0000-0000-0000-000000000002"
        readers = set()
        for _ in range(3):
            async with bus.subscribe(TASK), bus.watch_settled(TASK), bus.watch_cancel(other):
                assert bus.reader_count() == 3
                members = [set(channels) for channels in bus.layer.groups.values()]
                assert len(members) == 3
                assert members[0] == members[1] == members[2] == {bus._inboxes[loop].channel}
                readers |= bus.resident_tasks(loop)
            await wait_for(lambda: not bus.layer.groups)
        assert len(readers) == 1
        assert not readers.pop().done()
        assert InMemoryEventBus().resident_tasks(loop) == set()


async def test_a_group_left_and_joined_again_at_once_stays_joined():
    """The leave runs in a task of its own; a join that follows it must not be undone."""
    with override_settings(CHANNEL_LAYERS=IN_MEMORY_LAYER):
        bus = ChannelLayerEventBus()
        loop = asyncio.get_running_loop()
        async with bus.watch_cancel(TASK):
            pass
        async with bus.watch_cancel(TASK) as job:
            await wait_for(lambda: not bus._leaving)  # the first leave has run
            channel = bus._inboxes[loop].channel
            assert set(bus.layer.groups[cancel_group_name(TASK)]) == {channel}
            canceled = StoredEvent(TASK, 2, TaskState.CANCELED, {"statusUpdate": {}})
            await bus._send(canceled)
            assert await job.get_until(loop.time() + DEADLINE) == canceled


async def test_a_message_that_names_no_group_reaches_every_kind_of_listener():
    """An event published by a process of the previous version (no group in the message)
    still reaches the stream, the blocking wait and the job's cancel watch."""
    with override_settings(CHANNEL_LAYERS=IN_MEMORY_LAYER):
        bus = ChannelLayerEventBus()
        loop = asyncio.get_running_loop()
        canceled = StoredEvent(TASK, 2, TaskState.CANCELED, {"statusUpdate": {}})
        async with (
            bus.subscribe(TASK) as stream,
            bus.watch_settled(TASK) as wait,
            bus.watch_cancel(TASK) as job,
        ):
            await bus.layer.group_send(cancel_group_name(TASK), _to_message(canceled))
            for listener in (stream, wait, job):
                assert await listener.get_until(loop.time() + DEADLINE) == canceled


async def test_channel_layer_fan_out_joins_the_group_once():
    with override_settings(CHANNEL_LAYERS=IN_MEMORY_LAYER):
        bus = ChannelLayerEventBus()
        loop = asyncio.get_running_loop()
        async with bus.subscribe(TASK) as one, bus.subscribe(TASK) as two:
            assert bus.reader_count() == 1
            await bus.layer.group_send(f"a2a.task.{TASK}", _to_message(EVENT))
            got = [
                await asyncio.wait_for(sub.get_until(loop.time() + DEADLINE), DEADLINE)
                for sub in (one, two)
            ]
            assert got == [EVENT, EVENT]
        assert bus.reader_count() == 0


async def test_a_job_watching_for_cancel_hears_the_cancel_and_not_the_updates():
    """A running job listens in the task's cancel group: only CANCELED is sent there too,
    so the job's own updates do not come back to it through the channel layer."""
    with override_settings(CHANNEL_LAYERS=IN_MEMORY_LAYER):
        bus = ChannelLayerEventBus()
        loop = asyncio.get_running_loop()
        working = StoredEvent(TASK, 2, TaskState.WORKING, {"statusUpdate": {}})
        canceled = StoredEvent(TASK, 3, TaskState.CANCELED, {"statusUpdate": {}})
        async with bus.subscribe(TASK) as stream, bus.watch_cancel(TASK) as job:
            assert bus.reader_count() == 2
            assert set(bus.layer.groups) == {group_name(TASK), cancel_group_name(TASK)}
            await bus._send(working)  # publish's part on the loop (publish is sync)
            assert await stream.get_until(loop.time() + DEADLINE) == working
            assert await job.get_until(loop.time() + 0.05) is None
            await bus._send(canceled)
            assert await job.get_until(loop.time() + DEADLINE) == canceled
            assert await stream.get_until(loop.time() + DEADLINE) == canceled
            assert await stream.get_until(loop.time() + 0.05) is None  # once, not twice
        assert bus.reader_count() == 0
        await wait_for(lambda: not bus.layer.groups)


@pytest.mark.parametrize("watch", ["watch_cancel", "watch_settled"])
async def test_the_in_memory_bus_watches_with_the_task_events(watch):
    bus = InMemoryEventBus()
    loop = asyncio.get_running_loop()
    async with getattr(bus, watch)(TASK) as listener:
        assert bus.subscriber_count(TASK) == 1
        bus.publish(EVENT)
        assert await listener.get_until(loop.time() + DEADLINE) is EVENT
    assert bus.subscriber_count(TASK) == 0


async def test_a_blocking_wait_hears_the_settling_events_and_not_the_progress():
    """A blocking SendMessage waits in the task's settled group: the job's progress is sent
    to the task's group only, a terminal or interrupted state to both."""
    with override_settings(CHANNEL_LAYERS=IN_MEMORY_LAYER):
        bus = ChannelLayerEventBus()
        loop = asyncio.get_running_loop()
        events = [
            StoredEvent(TASK, 2, TaskState.WORKING, {"statusUpdate": {}}),
            StoredEvent(TASK, 3, TaskState.WORKING, {"artifactUpdate": {}}),
            StoredEvent(TASK, 4, TaskState.INPUT_REQUIRED, {"statusUpdate": {}}),
            StoredEvent(TASK, 5, TaskState.WORKING, {"statusUpdate": {}}),
            StoredEvent(TASK, 6, TaskState.COMPLETED, {"message": {}}),
        ]
        async with bus.subscribe(TASK) as stream, bus.watch_settled(TASK) as wait:
            assert set(bus.layer.groups) == {group_name(TASK), settled_group_name(TASK)}
            for event in events:
                await bus._send(event)
            got = [await stream.get_until(loop.time() + DEADLINE) for _ in events]
            assert got == events
            settled = [await wait.get_until(loop.time() + DEADLINE) for _ in range(2)]
            assert [event.seq for event in settled if event] == [4, 6]
            assert await wait.get_until(loop.time() + 0.05) is None
        await wait_for(lambda: not bus.layer.groups)
