"""SendStreamingMessage (A2A §3.1.2): the task, then its events in order, until it settles."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from a2a_endpoint import models
from a2a_endpoint.execution.runner import FAILED_MESSAGE
from a2a_endpoint.lifecycle import TaskState
from a2a_endpoint.testing import user_message
from tests.agents import RUNS
from tests.service.builders import poll_task, stored_task
from tests.streaming.client import (
    as_logged,
    assert_consecutive,
    event_log,
    json_error,
    open_stream,
    send_streaming,
    state_of,
)

pytestmark = [pytest.mark.django_db(transaction=True)]

SUBMITTED = "TASK_STATE_SUBMITTED"
WORKING = "TASK_STATE_WORKING"
COMPLETED = "TASK_STATE_COMPLETED"
FAILED = "TASK_STATE_FAILED"
INPUT_REQUIRED = "TASK_STATE_INPUT_REQUIRED"


def describe(event: dict[str, Any]) -> tuple[Any, ...]:
    """What an update says, without ids and timestamps."""
    body = event["body"]
    if event["kind"] == "statusUpdate":
        message = body["status"].get("message")
        return ("status", body["status"]["state"], message and message["parts"])
    if event["kind"] == "artifactUpdate":
        flags = (body.get("append", False), body.get("lastChunk", False))
        return ("artifact", body["artifact"]["parts"], *flags)
    return (event["kind"],)


@sync_to_async
def task_count() -> int:
    return models.Task.objects.count()


async def test_new_task_is_streamed_in_generation_order_and_closed_when_done(rpc, bus):
    message = user_message("chunks")
    stream = await open_stream(rpc, "SendStreamingMessage", {"message": message})
    events = await stream.rest()  # returns only once the server closes the stream
    task = events[0]
    assert task["kind"] == "task"
    assert task["seq"] == 1
    assert state_of(task) == SUBMITTED
    assert task["body"]["history"][0]["messageId"] == message["messageId"]
    # The "chunks" agent: WORKING, three chunks of one artifact, COMPLETED (A2A §3.1.2).
    assert [describe(event) for event in events[1:]] == [
        ("status", WORKING, None),
        ("artifact", [{"text": "one "}], False, False),
        ("artifact", [{"text": "two "}], True, False),
        ("artifact", [{"data": {"n": 3}}], True, True),
        ("status", COMPLETED, None),
    ]
    assert_consecutive(events)
    assert {event["body"]["taskId"] for event in events[1:]} == {task["body"]["id"]}
    assert as_logged(events[1:]) == (await event_log(task["body"]["id"]))[1:]


async def test_direct_reply_is_the_whole_stream(rpc, bus):
    events = await (await send_streaming(rpc, "reply hello")).rest()
    [reply] = events
    assert reply["kind"] == "message"
    assert reply["body"]["role"] == "ROLE_AGENT"
    assert reply["body"]["parts"] == [{"text": "you said hello"}]
    assert "taskId" not in reply["body"]  # to the client, no task was made (A2A §3.1.1)


async def test_stream_closes_when_the_task_needs_input(rpc):
    events = await (await send_streaming(rpc, "ask")).rest()
    assert [event["kind"] for event in events] == ["task", "statusUpdate"]
    asked = events[-1]
    assert state_of(asked) == INPUT_REQUIRED
    assert asked["body"]["status"]["message"]["parts"] == [{"text": "What is your name?"}]
    # Closed because the task waits for the client, not because it ended.
    task = await rpc.result("GetTask", {"id": events[0]["body"]["id"]})
    assert task["status"]["state"] == INPUT_REQUIRED


async def test_continuation_streams_the_task_first_then_its_events(rpc, gates):
    asked = (await (await send_streaming(rpc, "ask")).rest())[0]["body"]
    name = gates.new()
    answer = user_message(f"hold {name}", taskId=asked["id"])
    stream = await open_stream(rpc, "SendStreamingMessage", {"message": answer})
    snapshot = await stream.event()
    # A2A §3.1.2: an existing task is sent as it is now, with the answer in its history.
    assert snapshot["kind"] == "task"
    assert state_of(snapshot) == WORKING  # held at the gate: it cannot be done yet
    assert snapshot["body"]["history"][-1]["messageId"] == answer["messageId"]
    gates.open(name)
    events = [snapshot, *await stream.rest()]
    assert_consecutive(events)
    assert state_of(events[-1]) == COMPLETED
    assert {state_of(event) for event in events[1:-1]} <= {WORKING}
    log = await event_log(asked["id"])
    assert as_logged(events[1:]) == log[snapshot["seq"] :]


async def test_history_length_zero_leaves_out_the_history(rpc):
    stream = await send_streaming(rpc, "ask", configuration={"historyLength": 0})
    events = await stream.rest()
    assert "history" not in events[0]["body"]
    task_id = events[0]["body"]["id"]
    # A continuation's snapshot too.
    answer = user_message("Ann", taskId=task_id)
    params = {"message": answer, "configuration": {"historyLength": 0}}
    events = await (await open_stream(rpc, "SendStreamingMessage", params)).rest()
    assert events[0]["kind"] == "task"
    assert "history" not in events[0]["body"]
    assert state_of(events[-1]) == COMPLETED


# --- errors before the stream starts: plain JSON-RPC (A2A §9.4) -----------------------------


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({}, "message"),
        ({"message": {"role": "ROLE_USER", "parts": [{"text": "x"}]}}, "message.messageId"),
        (
            {"message": user_message("x"), "configuration": {"historyLength": "all"}},
            "configuration.historyLength",
        ),
    ],
)
async def test_invalid_params_are_a_json_error(rpc, params, field):
    error = await json_error(rpc, "SendStreamingMessage", params, request_id="bad")
    assert error["code"] == -32602
    assert error["data"][0]["fieldViolations"][0]["field"] == field
    assert await task_count() == 0


@pytest.mark.parametrize("task_id", [str(uuid.uuid4()), "not-a-uuid"])
async def test_unknown_task_is_a_json_error(rpc, task_id):
    params = {"message": user_message("hi", taskId=task_id)}
    error = await json_error(rpc, "SendStreamingMessage", params, request_id=5)
    assert error["code"] == -32001


async def test_terminal_task_is_a_json_error(rpc):
    task_id = await sync_to_async(stored_task)(state=TaskState.COMPLETED)
    params = {"message": user_message("more", taskId=task_id)}
    error = await json_error(rpc, "SendStreamingMessage", params)
    assert error["code"] == -32004
    assert (await rpc.result("GetTask", {"id": task_id}))["status"]["state"] == COMPLETED


# --- agent failures after the stream started are task failures ------------------------------


@pytest.mark.parametrize(
    ("text", "said"),
    [("fail", FAILED_MESSAGE), ("agent-error", "The input was not understood")],
)
async def test_agent_failure_ends_the_stream_with_a_failed_status(rpc, text, said):
    events = await (await send_streaming(rpc, text)).rest()
    assert all("result" in event["data"] for event in events)  # no JSON-RPC error frame
    assert [event["kind"] for event in events] == ["task", "statusUpdate"]
    failed = events[-1]
    assert state_of(failed) == FAILED
    assert failed["body"]["status"]["message"]["parts"] == [{"text": said}]
    await poll_task(rpc, events[0]["body"]["id"], FAILED)


# --- retried sends (same messageId) ----------------------------------------------------------


async def test_retried_message_streams_the_same_task_without_running_it_again(rpc):
    message = user_message("chunks")
    first = await (await open_stream(rpc, "SendStreamingMessage", {"message": message})).rest()
    task_id = first[0]["body"]["id"]
    again = await (await open_stream(rpc, "SendStreamingMessage", {"message": message})).rest()
    [snapshot] = again  # the task is done: its snapshot is the whole stream
    assert snapshot["kind"] == "task"
    assert snapshot["body"]["id"] == task_id
    assert state_of(snapshot) == COMPLETED
    assert snapshot["seq"] == first[-1]["seq"]
    assert RUNS[task_id] == 1


async def test_retried_message_answered_directly_gets_the_same_reply(rpc):
    message = user_message("reply again")
    [first] = await (await open_stream(rpc, "SendStreamingMessage", {"message": message})).rest()
    again = await (await open_stream(rpc, "SendStreamingMessage", {"message": message})).rest()
    # A2A §3.1.1: a direct Message answer stays one; no task appears on the retry.
    assert [event["kind"] for event in again] == ["message"]
    assert again[0]["data"]["result"] == first["data"]["result"]
