"""SubscribeToTask (A2A §3.1.6): the snapshot, then live events, open until terminal."""

from __future__ import annotations

import uuid

import pytest
from asgiref.sync import sync_to_async

from a2a_endpoint.lifecycle import TaskState
from a2a_endpoint.testing import user_message
from tests.service.builders import poll_task, stored_task, wait_for
from tests.streaming.client import (
    as_logged,
    assert_consecutive,
    event_log,
    json_error,
    state_of,
    subscribe,
)
from tests.streaming.conftest import group_readers, listeners, local_streams

pytestmark = [pytest.mark.django_db(transaction=True)]

WORKING = "TASK_STATE_WORKING"
COMPLETED = "TASK_STATE_COMPLETED"
INPUT_REQUIRED = "TASK_STATE_INPUT_REQUIRED"


async def test_snapshot_first_then_live_events_continuing_its_ids(rpc, held, gates, bus):
    task_id, name = await held("burst 3")
    stream = await subscribe(rpc, task_id)
    snapshot = await stream.event()
    assert snapshot["kind"] == "task"
    assert snapshot["seq"] == 2  # creation, then the WORKING of the hold
    assert state_of(snapshot) == WORKING
    assert snapshot["body"]["id"] == task_id
    assert snapshot["body"]["status"]["message"]["parts"] == [{"text": f"holding {name}"}]
    gates.open(name)
    live = await stream.rest()
    assert_consecutive([snapshot, *live])
    assert [event["body"]["status"]["message"]["parts"][0]["text"] for event in live] == [
        "step 1",
        "step 2",
        "step 3",
        "done",
    ]
    assert state_of(live[-1]) == COMPLETED
    assert as_logged(live) == (await event_log(task_id))[2:]


async def test_stays_open_through_input_required(rpc, held, gates, bus):
    task_id, name = await held("ask")
    stream = await subscribe(rpc, task_id)
    assert state_of(await stream.event()) == WORKING
    gates.open(name)
    asked = await stream.event()
    assert state_of(asked) == INPUT_REQUIRED
    # A2A §3.1.6: an interrupted task is not finished; the same stream carries the answer.
    answered = await rpc.result("SendMessage", {"message": user_message("Ann", taskId=task_id)})
    assert answered["task"]["status"]["state"] == COMPLETED
    rest = await stream.rest()
    assert [state_of(event) for event in rest] == [WORKING, COMPLETED]
    assert rest[-1]["body"]["status"]["message"]["parts"] == [{"text": "Hello Ann"}]
    assert_consecutive([asked, *rest])


async def test_snapshot_of_an_interrupted_task_keeps_the_stream_open(rpc):
    asked = (await rpc.result("SendMessage", {"message": user_message("ask")}))["task"]
    stream = await subscribe(rpc, asked["id"])
    snapshot = await stream.event()
    assert state_of(snapshot) == INPUT_REQUIRED
    await rpc.result("SendMessage", {"message": user_message("Bo", taskId=asked["id"])})
    rest = await stream.rest()
    assert [state_of(event) for event in rest] == [WORKING, COMPLETED]
    assert_consecutive([snapshot, *rest])


@pytest.mark.parametrize("state", [TaskState.COMPLETED, TaskState.FAILED, TaskState.CANCELED])
async def test_terminal_task_is_a_json_error(rpc, state):
    task_id = await sync_to_async(stored_task)(state=state)
    error = await json_error(rpc, "SubscribeToTask", {"id": task_id}, request_id="t")
    assert error["code"] == -32004
    assert error["data"][0]["reason"] == "UNSUPPORTED_OPERATION"


@pytest.mark.parametrize("task_id", [str(uuid.uuid4()), "not-a-uuid"])
async def test_unknown_task_is_a_json_error(rpc, task_id):
    error = await json_error(rpc, "SubscribeToTask", {"id": task_id}, request_id=9)
    assert error["code"] == -32001


async def test_another_callers_task_is_not_found(rpc):
    task_id = await sync_to_async(stored_task)(owner="user:someone-else", state=TaskState.WORKING)
    error = await json_error(rpc, "SubscribeToTask", {"id": task_id})
    assert error["code"] == -32001  # A2A §3.3.2: not "forbidden", which would reveal it


# --- several streams on one task --------------------------------------------------------------


async def test_two_streams_get_the_same_events(rpc, held, gates, bus):
    task_id, name = await held("burst 4")
    first = await subscribe(rpc, task_id, request_id="a")
    second = await subscribe(rpc, task_id, request_id="b")
    snapshots = [await first.event(), await second.event()]
    assert local_streams(task_id) == 2
    if bus == "channels":
        # One group membership per process and task, fanned out to both streams.
        assert group_readers() == 1
    gates.open(name)
    one, two = await first.rest(), await second.rest()
    assert as_logged(snapshots[:1]) == as_logged(snapshots[1:])
    assert as_logged(one) == as_logged(two)
    assert len(one) == 5
    assert_consecutive([snapshots[0], *one])


async def test_closing_one_stream_affects_neither_the_other_nor_the_task(rpc, held, gates, bus):
    task_id, name = await held("burst 2")
    leaving = await subscribe(rpc, task_id, request_id="leaving")
    staying = await subscribe(rpc, task_id, request_id="staying")
    await leaving.event()
    snapshot = await staying.event()
    await leaving.aclose()
    await wait_for(lambda: local_streams(task_id) == 1)
    if bus == "channels":
        assert group_readers() == 1  # the other stream keeps the process in the group
    gates.open(name)
    events = [snapshot, *await staying.rest()]
    assert_consecutive(events)
    assert state_of(events[-1]) == COMPLETED
    assert as_logged(events[1:]) == (await event_log(task_id))[2:]
    await poll_task(rpc, task_id, COMPLETED)
    await wait_for(lambda: listeners(task_id) == 0)
