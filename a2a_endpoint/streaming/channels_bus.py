"""``ChannelLayerEventBus`` carries events between processes through a Channels layer
(one group per task, one for the events that settle it and one for its cancellation).
Channels is imported only here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from a2a_endpoint import metrics
from a2a_endpoint.lifecycle import TaskState
from a2a_endpoint.store import StoredEvent
from a2a_endpoint.streaming.base import EventBus, Subscription
from a2a_endpoint.streaming.memory import InMemoryEventBus

GROUP_PREFIX = "a2a.task."
SETTLED_GROUP_PREFIX = "a2a.settled."
CANCEL_GROUP_PREFIX = "a2a.cancel."
#: The message type of ``ChannelLayerEventBus.ping`` (health checks).
PING_TYPE = "a2a.ping"
#: The ``bus`` label of this bus's metrics (docs/metrics.md).
METRICS_LABEL = "channels"

logger = logging.getLogger("a2a_endpoint.streaming")


def group_name(task_id: str) -> str:
    return f"{GROUP_PREFIX}{task_id}"


def settled_group_name(task_id: str) -> str:
    """The group of a task's blocking waits: only its settling events are sent there too."""
    return f"{SETTLED_GROUP_PREFIX}{task_id}"


def cancel_group_name(task_id: str) -> str:
    """The group of a task's running job: it hears only the task's CANCELED event."""
    return f"{CANCEL_GROUP_PREFIX}{task_id}"


async def _once_more(call: Callable[..., Awaitable[None]], *args: Any) -> None:
    """``await call(*args)``, and again once if it fails: a pooled connection that Redis
    closed (a restart, an idle timeout) fails the first command sent on it, and redis-py
    drops it then, so the second try connects afresh. Each call here may safely run twice
    (joining or leaving a group, or a message that listeners dedupe by its seq)."""
    try:
        await call(*args)
    except Exception:
        logger.info("Channel layer call failed; trying once more", exc_info=True)
        await call(*args)


def _to_message(event: StoredEvent) -> dict[str, Any]:
    return {
        "type": "a2a.event",
        "task_id": event.task_id,
        "seq": event.seq,
        "state": event.state.value,
        "payload": event.payload,
        # Wall-clock time (processes on several hosts): a2a_bus_delivery_lag_seconds.
        "published_at": time.time(),
    }


def _from_message(message: dict[str, Any]) -> StoredEvent:
    return StoredEvent(
        task_id=message["task_id"],
        seq=message["seq"],
        state=TaskState(message["state"]),
        payload=message["payload"],
    )


class _Membership:
    """This process's place in one group on one event loop: the local listeners of the
    group's events, and how many of them there are."""

    def __init__(self, local: InMemoryEventBus) -> None:
        self.local = local
        self.users = 0
        self.failed = False
        self.joined = asyncio.Event()


class _Inbox:
    """This process's one channel on one event loop, and the groups it is in there.

    One reader receives on it for as long as the loop lives. Readers that came and went
    with each group cost a new Redis connection each: channels_redis receives every
    channel of a process with one ``BZPOPMIN``, and redis-py drops the connection of a
    command cancelled in flight, as the last receiver's was whenever it stopped.
    """

    def __init__(self, channel: str) -> None:
        self.channel = channel
        self.groups: dict[str, _Membership] = {}
        self.leaving: dict[str, asyncio.Task[None]] = {}
        self.task: asyncio.Task[None] | None = None
        #: Health probes waiting for their message to come back (``ChannelLayerEventBus.ping``).
        self.pings: dict[str, asyncio.Future[None]] = {}


class ChannelLayerEventBus(EventBus):
    """Across processes through the Django Channels layer (``channels_redis`` in production).

    However many streams of a task a process serves, it joins the task's group once: one
    channel-layer message per process and event, fanned out locally (an in-memory bus).
    Every group a process joins on an event loop delivers to one channel of its own there,
    read by one long-lived reader (``_Inbox``); each message names the group it was sent
    to, so the reader hands it to that group's listeners only.

    Listeners that need only some events join a group of their own, which only those
    events are sent to as well: a blocking SendMessage waits in the task's settled group,
    a running job listens for CancelTask in its cancel group. Neither receives the job's
    progress (each message received costs channels_redis four round trips to Redis), and
    the job's updates find no member to send to in the task's group unless a stream
    follows it.
    """

    #: Re-join the groups this often: channels_redis forgets members after ``group_expiry``.
    rejoin_every = 3600.0

    def __init__(self, alias: str = "default") -> None:
        try:
            from channels.layers import get_channel_layer
        except ImportError as exc:  # pragma: no cover - exercised by the system check
            raise ImportError(
                "ChannelLayerEventBus needs Django Channels: pip install 'a2a-endpoint[channels]'"
            ) from exc
        self.layer = get_channel_layer(alias)
        if self.layer is None:
            raise ValueError(f"No channel layer is configured under CHANNEL_LAYERS[{alias!r}]")
        # The in-process fan-out records no metrics: this bus records its own messages.
        self._local = InMemoryEventBus(metrics_label=None)
        self._settled = InMemoryEventBus(metrics_label=None)
        self._cancels = InMemoryEventBus(metrics_label=None)
        self._inboxes: dict[asyncio.AbstractEventLoop, _Inbox] = {}
        self._leaving: set[asyncio.Task[None]] = set()

    def publish(self, event: StoredEvent) -> None:
        from asgiref.sync import async_to_sync

        metrics.bus_published(METRICS_LABEL)
        async_to_sync(self._send)(event)

    async def _send(self, event: StoredEvent) -> None:
        message = _to_message(event)
        groups = [group_name(event.task_id)]
        if event.state.is_settled:
            groups.append(settled_group_name(event.task_id))
        if event.state is TaskState.CANCELED:
            groups.append(cancel_group_name(event.task_id))
        for group in groups:
            await _once_more(self.layer.group_send, group, {**message, "group": group})

    def subscribe(self, task_id: str) -> contextlib.AbstractAsyncContextManager[Subscription]:
        return self._follow(group_name(task_id), task_id, self._local)

    def watch_settled(self, task_id: str) -> contextlib.AbstractAsyncContextManager[Subscription]:
        return self._follow(settled_group_name(task_id), task_id, self._settled)

    def watch_cancel(self, task_id: str) -> contextlib.AbstractAsyncContextManager[Subscription]:
        return self._follow(cancel_group_name(task_id), task_id, self._cancels)

    def resident_tasks(self, loop: asyncio.AbstractEventLoop) -> set[asyncio.Task[Any]]:
        inbox = self._inboxes.get(loop)
        return {inbox.task} if inbox is not None and inbox.task is not None else set()

    async def ping(self, timeout: float) -> bool:
        """A message sent through the layer to this loop's own inbox, and read back by its
        reader: Redis takes and delivers messages, and the reader that every stream, wait
        and cancel watch of this process depends on is alive.

        Through the reader, not a receive of its own: channels_redis lets one receive of a
        process at a time wait in Redis (one lock per layer), and the reader waits there
        for good, so any other receive on the same layer would never get its turn.
        """
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(timeout):
            inbox = await self._inbox()
            nonce = uuid.uuid4().hex
            arrived = inbox.pings[nonce] = loop.create_future()
            try:
                await _once_more(
                    self.layer.send, inbox.channel, {"type": PING_TYPE, "nonce": nonce}
                )
                await arrived
            finally:
                inbox.pings.pop(nonce, None)
        return True

    @contextlib.asynccontextmanager
    async def _follow(
        self, group: str, task_id: str, local: InMemoryEventBus
    ) -> AsyncIterator[Subscription]:
        async with local.subscribe(task_id) as subscription:
            await self._retain(group, local)
            try:
                yield subscription
            finally:
                self._release(group)

    async def _inbox(self) -> _Inbox:
        """This loop's inbox, opened on first use."""
        loop = asyncio.get_running_loop()
        inbox = self._inboxes.get(loop)
        if inbox is None:
            channel = await self.layer.new_channel("a2a.")
            inbox = self._inboxes.get(loop)  # another caller may have opened it meanwhile
            if inbox is None:
                inbox = self._inboxes[loop] = _Inbox(channel)
                inbox.task = loop.create_task(self._read(inbox), name="a2a-bus-inbox")
                # Ends only with its loop (cancelled by asyncio.run or the server's shutdown).
                inbox.task.add_done_callback(lambda _: self._forget(loop, inbox))
        return inbox

    def _forget(self, loop: asyncio.AbstractEventLoop, inbox: _Inbox) -> None:
        if self._inboxes.get(loop) is inbox:
            del self._inboxes[loop]

    async def _retain(self, group: str, local: InMemoryEventBus) -> None:
        inbox = await self._inbox()
        membership = inbox.groups.get(group)
        if membership is None:
            membership = inbox.groups[group] = _Membership(local)
            membership.users += 1
            try:
                leaving = inbox.leaving.get(group)
                if leaving is not None:
                    # The inbox left this group a moment ago: join after that, not before.
                    await asyncio.wait({leaving})
                await _once_more(self.layer.group_add, group, inbox.channel)
            except BaseException:
                if inbox.groups.get(group) is membership:
                    del inbox.groups[group]
                membership.failed = True
                raise
            finally:
                membership.joined.set()
        else:
            membership.users += 1
            # In the group before the caller reads its snapshot: nothing falls in between.
            await membership.joined.wait()
            if membership.failed:
                raise ConnectionError(f"Could not join the channel layer group {group}")

    def _release(self, group: str) -> None:
        loop = asyncio.get_running_loop()
        inbox = self._inboxes.get(loop)
        membership = inbox.groups.get(group) if inbox is not None else None
        if inbox is None or membership is None:
            return
        membership.users -= 1
        if membership.users > 0:
            return
        del inbox.groups[group]
        # Leave in a task of its own: the caller may be a stream being cancelled (a client
        # disconnect), whose cancellation must neither be swallowed nor wait on Redis.
        leaving = loop.create_task(self._leave(group, inbox))
        inbox.leaving[group] = leaving
        self._leaving.add(leaving)

        def done(task: asyncio.Task[None]) -> None:
            self._leaving.discard(task)
            if inbox.leaving.get(group) is task:
                del inbox.leaving[group]

        leaving.add_done_callback(done)

    async def _leave(self, group: str, inbox: _Inbox) -> None:
        try:
            await _once_more(self.layer.group_discard, group, inbox.channel)
        except Exception:
            logger.warning("Could not leave the channel layer group %s", group, exc_info=True)

    async def _read(self, inbox: _Inbox) -> None:
        while True:
            try:
                # asyncio.timeout, not wait_for: on Python 3.11 wait_for swallows a cancel
                # that lands just as a message arrives.
                async with asyncio.timeout(self.rejoin_every):
                    message = await self.layer.receive(inbox.channel)
            except TimeoutError:
                await self._rejoin(inbox)
                continue
            except Exception:  # a broken connection: streams fill gaps from the log
                try:
                    asyncio.get_running_loop()
                except RuntimeError:  # the loop is gone (collected at exit without a close)
                    return
                logger.warning("Channel layer receive failed", exc_info=True)
                await asyncio.sleep(1.0)
                continue
            if message.get("type") == "a2a.event":
                self._deliver(inbox, message)
            elif message.get("type") == PING_TYPE:
                arrived = inbox.pings.get(message.get("nonce", ""))
                if arrived is not None and not arrived.done():
                    arrived.set_result(None)

    async def _rejoin(self, inbox: _Inbox) -> None:
        for group in list(inbox.groups):
            try:
                await _once_more(self.layer.group_add, group, inbox.channel)
            except Exception:
                logger.warning("Could not re-join the channel layer group %s", group, exc_info=True)

    def _deliver(self, inbox: _Inbox, message: dict[str, Any]) -> None:
        if (published_at := message.get("published_at")) is not None:  # older senders: none
            metrics.bus_delivered(METRICS_LABEL, published_at, time.time())
        try:
            event = _from_message(message)
            group = message.get("group")
            if group is not None:
                membership = inbox.groups.get(group)
                if membership is not None:  # else: left the group as the message came
                    membership.local.publish(event)
                return
            # From a process of an earlier version, which does not name the group: each
            # kind of listener takes what it needs (streams skip the seqs they have).
            for local in {id(m.local): m.local for m in inbox.groups.values()}.values():
                local.publish(event)
        except Exception:
            logger.exception("Could not deliver a channel layer message")

    def reader_count(self) -> int:
        """Groups this process is in: one per task with local streams, one per task with
        blocking waits, and one per running job (its cancel watch)."""
        return sum(len(inbox.groups) for inbox in self._inboxes.values())
