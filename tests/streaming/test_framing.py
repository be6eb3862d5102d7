"""SSE framing of the streaming methods (A2A §9.4): headers, frames, ids, comments, errors."""

from __future__ import annotations

import msgspec
import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient

from a2a_endpoint import models
from a2a_endpoint.lifecycle import TaskState
from a2a_endpoint.store import TaskStore
from a2a_endpoint.testing import user_message
from tests.service.builders import a2a_settings, poll_task, stored_task
from tests.streaming.client import (
    KEEPALIVE,
    as_logged,
    assert_consecutive,
    event_log,
    json_error,
    send_streaming,
    subscribe,
)

pytestmark = [pytest.mark.django_db(transaction=True)]

WORKING = "TASK_STATE_WORKING"


@sync_to_async
def task_count() -> int:
    return models.Task.objects.count()


async def test_stream_headers(rpc):
    stream = await send_streaming(rpc, "chunks")
    assert stream.response["Content-Type"] == "text/event-stream"
    assert stream.response["Cache-Control"] == "no-cache"
    await stream.rest()


@pytest.mark.parametrize("request_id", ["stream-7", 7, 0])
async def test_send_streaming_frames_carry_the_request_id_and_the_event_seq(rpc, request_id):
    # SseStream.event checks each frame: a JSON-RPC response with this id (same JSON type)
    # whose result holds exactly one of task/message/statusUpdate/artifactUpdate.
    stream = await send_streaming(rpc, "chunks", request_id=request_id)
    events = await stream.rest()
    assert events[0]["seq"] == 1
    assert_consecutive(events)
    # id: is the seq of the logged event the frame carries, for every frame after the task.
    log = await event_log(events[0]["body"]["id"])
    assert as_logged(events[1:]) == log[1:]
    assert len(events) == len(log) == 6


@pytest.mark.parametrize("request_id", ["sub-1", 12])
async def test_subscribe_frames_carry_the_request_id_and_the_event_seq(
    rpc, start, gates, request_id
):
    name = gates.new()
    task_id = await start(f"hold {name} burst 2")
    await poll_task(rpc, task_id, WORKING)
    stream = await subscribe(rpc, task_id, request_id=request_id)
    snapshot = await stream.event()
    assert snapshot["kind"] == "task"
    gates.open(name)
    events = [snapshot, *await stream.rest()]
    assert_consecutive(events)
    log = await event_log(task_id)
    assert snapshot["seq"] == 2  # the task was held right after its WORKING event
    assert as_logged(events[1:]) == log[2:]


async def test_first_block_is_a_comment_so_headers_go_out_at_once(rpc, start, gates):
    name = gates.new()
    task_id = await start(f"hold {name}")
    stream = await subscribe(rpc, task_id)
    assert await stream.block() == b": stream opened"
    gates.open(name)
    await stream.rest()


async def test_idle_stream_gets_keepalive_comments(rpc, start, gates):
    name = gates.new()
    # Settings first: an A2A_ENDPOINT change rebuilds the runtime (and stops running jobs).
    with a2a_settings(SSE_KEEPALIVE=0.05):
        task_id = await start(f"hold {name}")
        await poll_task(rpc, task_id, WORKING)
        stream = await subscribe(rpc, task_id)
        assert await stream.block() == b": stream opened"
        assert (await stream.event())["kind"] == "task"
        # The task is held: nothing but keep-alive comments may come (each a whole block).
        idle = [await stream.block() for _ in range(3)]
        assert idle == [KEEPALIVE] * 3
        gates.open(name)
        [done] = await stream.rest()
    assert done["body"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_error_after_the_stream_started_is_a_final_error_frame(
    rpc, start, gates, monkeypatch
):
    def broken(*args, **kwargs):
        raise RuntimeError("database went away")

    name = gates.new()
    with a2a_settings(SSE_KEEPALIVE=0.05):
        task_id = await start(f"hold {name}")
        await poll_task(rpc, task_id, WORKING)
        # The idle stream checks the log at each keep-alive: that read fails.
        monkeypatch.setattr(TaskStore, "events_after", broken)
        stream = await subscribe(rpc, task_id, request_id="late")
        assert (await stream.event())["kind"] == "task"
        [failure] = await stream.rest()
    # A2A §9.4: the same request id (checked by the reader), a JSON-RPC error, and no event
    # id: it is no task event. The exception text stays in the server log.
    assert "id" not in failure
    assert failure["data"]["error"]["code"] == -32603
    assert "database" not in msgspec.json.encode(failure["data"]).decode()


# --- capabilities.streaming (A2A §3.3.4) ------------------------------------------------------


async def card_streaming() -> bool:
    response = await AsyncClient().get("/.well-known/agent-card.json")
    return msgspec.json.decode(response.content)["capabilities"]["streaming"]


async def test_streaming_is_served_and_declared_by_default(rpc, start, gates):
    assert await card_streaming() is True
    stream = await send_streaming(rpc, "chunks")
    assert (await stream.rest())[-1]["body"]["status"]["state"] == "TASK_STATE_COMPLETED"
    name = gates.new()
    task_id = await start(f"hold {name}")
    stream = await subscribe(rpc, task_id)
    assert (await stream.event())["kind"] == "task"
    gates.open(name)
    await stream.rest()


async def test_streaming_off_answers_32004_and_the_card_says_so(rpc):
    task_id = await sync_to_async(stored_task)(state=TaskState.WORKING)
    with a2a_settings(STREAMING=False):
        assert await card_streaming() is False
        params = {"message": user_message("echo hi")}
        sent = await json_error(rpc, "SendStreamingMessage", params)
        subscribed = await json_error(rpc, "SubscribeToTask", {"id": task_id})
    assert sent["code"] == subscribed["code"] == -32004
    assert sent["data"][0]["reason"] == "UNSUPPORTED_OPERATION"
    assert await task_count() == 1  # no task was started by the refused stream
