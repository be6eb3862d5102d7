"""A client going away frees its stream: bus subscription, group membership, asyncio tasks."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import pytest
from django.core.handlers.asgi import ASGIHandler

from a2a_endpoint.execution import runtime
from a2a_endpoint.streaming.bus import (
    ChannelLayerEventBus,
    cancel_group_name,
    group_name,
    settled_group_name,
)
from a2a_endpoint.testing import jsonrpc_request, parse_sse, user_message
from tests.asgi_client import http_scope
from tests.service.builders import DEADLINE, poll_task, wait_for
from tests.streaming.client import send_streaming, subscribe
from tests.streaming.conftest import group_readers, listeners, local_streams

pytestmark = [pytest.mark.django_db(transaction=True)]

WORKING = "TASK_STATE_WORKING"
COMPLETED = "TASK_STATE_COMPLETED"


def new_tasks(before: set[asyncio.Task[Any]]) -> set[asyncio.Task[Any]]:
    """Unfinished asyncio tasks of this loop that did not exist at ``before``, but for the
    bus's one reader of this loop, which stays as long as the loop (at most one task)."""
    loop = asyncio.get_running_loop()
    resident = runtime.get_event_bus().resident_tasks(loop)
    assert len(resident) <= 1
    return asyncio.all_tasks() - before - resident


def group_members(task_id: str) -> int:
    """Channels in the task's channel-layer groups (the in-memory layer's own bookkeeping)."""
    event_bus = runtime.get_event_bus()
    if not isinstance(event_bus, ChannelLayerEventBus):
        return 0
    groups = event_bus.layer.groups
    return sum(
        len(groups.get(group(task_id), {}))
        for group in (group_name, settled_group_name, cancel_group_name)
    )


async def assert_all_freed(task_id: str, before: set[asyncio.Task[Any]]) -> None:
    await wait_for(lambda: listeners(task_id) == 0)
    assert local_streams(task_id) == group_readers() == group_members(task_id) == 0
    # No reader, wait or other task of the stream is left running on the loop.
    await wait_for(lambda: not new_tasks(before))


async def open_held_stream(rpc: Any, start: Any, gates: Any, method: str) -> tuple[Any, str, str]:
    """A stream of ``method`` on a task held WORKING, its first event read."""
    name = gates.new()
    if method == "SubscribeToTask":
        task_id = await start(f"hold {name}")
        await poll_task(rpc, task_id, WORKING)
        stream = await subscribe(rpc, task_id)
        await stream.event()
    else:
        stream = await send_streaming(rpc, f"hold {name}")
        task_id = (await stream.event())["body"]["id"]
    return stream, task_id, name


@pytest.mark.parametrize("method", ["SubscribeToTask", "SendStreamingMessage"])
async def test_closing_the_stream_frees_its_subscription(rpc, start, gates, bus, method):
    before = asyncio.all_tasks()
    stream, task_id, name = await open_held_stream(rpc, start, gates, method)
    assert local_streams(task_id) == 1
    assert group_readers() == group_members(task_id) == (1 if bus == "channels" else 0)
    await stream.aclose()
    await assert_all_freed(task_id, before)
    # The stream went away, the task did not (A2A §3.1.6: streams only observe).
    gates.open(name)
    await poll_task(rpc, task_id, COMPLETED)


async def asgi_stream(body: bytes) -> list[dict[str, Any]]:
    """POST ``body`` through Django's real ASGI handler; the client disconnects as soon as
    the first event frame reaches it. Returns the ASGI messages sent."""
    scope = http_scope()
    incoming = [{"type": "http.request", "body": body, "more_body": False}]
    first_event = asyncio.Event()
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if incoming:
            return incoming.pop(0)
        await first_event.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if b"data: " in message.get("body", b""):
            first_event.set()

    # Django cancels the response on http.disconnect; the handler must then return.
    await asyncio.wait_for(ASGIHandler()(scope, receive, send), DEADLINE)
    return sent


@pytest.mark.parametrize("method", ["SubscribeToTask", "SendStreamingMessage"])
async def test_client_disconnect_through_asgi_frees_everything(rpc, start, gates, bus, method):
    before = asyncio.all_tasks()
    name = gates.new()
    if method == "SubscribeToTask":
        task_id = await start(f"hold {name}")
        await poll_task(rpc, task_id, WORKING)
        params: dict[str, Any] = {"id": task_id}
    else:
        params = {"message": user_message(f"hold {name}")}
    sent = await asgi_stream(msgspec.json.encode(jsonrpc_request(method, params, id="gone")))

    [head] = [message for message in sent if message["type"] == "http.response.start"]
    assert head["status"] == 200
    assert (b"Content-Type", b"text/event-stream") in head["headers"]
    [first, *_] = parse_sse(message.get("body", b"") for message in sent)
    task = first["data"]["result"]["task"]
    await assert_all_freed(task["id"], before)
    gates.open(name)
    await poll_task(rpc, task["id"], COMPLETED)
