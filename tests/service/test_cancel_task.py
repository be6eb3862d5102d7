"""CancelTask through the endpoint: the task ends CANCELED and its job is told to stop."""

from __future__ import annotations

import uuid

import pytest
from asgiref.sync import sync_to_async

from a2a_endpoint import models
from a2a_endpoint.execution import runtime
from a2a_endpoint.lifecycle import TaskState
from a2a_endpoint.testing import user_message
from tests.agents import observed
from tests.service.builders import poll_task, stored_task, wait_for

pytestmark = [pytest.mark.django_db(transaction=True)]

CANCELED = "TASK_STATE_CANCELED"


async def start(rpc, text: str) -> str:
    """Send without blocking and return once the job reports WORKING."""
    params = {"message": user_message(text), "configuration": {"returnImmediately": True}}
    task = (await rpc.result("SendMessage", params))["task"]
    await poll_task(rpc, task["id"], "TASK_STATE_WORKING")
    return task["id"]


def job_done(task_id: str):
    return lambda: not runtime.get_backend().running(task_id)


@sync_to_async
def event_kinds(task_id: str) -> list[str]:
    rows = models.TaskEvent.objects.filter(task_id=task_id).order_by("seq")
    return list(rows.values_list("kind", flat=True))


async def test_cancel_a_working_task(rpc):
    task_id = await start(rpc, "wait")
    assert runtime.get_backend().running(task_id)
    canceled = await rpc.result("CancelTask", {"id": task_id})
    assert canceled["id"] == task_id
    assert canceled["status"]["state"] == CANCELED
    assert canceled["history"][0]["parts"] == [{"text": "wait"}]
    await wait_for(job_done(task_id))  # the job saw context.cancelled and returned
    assert (await rpc.result("GetTask", {"id": task_id}))["status"]["state"] == CANCELED


async def test_a_canceled_jobs_later_writes_are_refused(rpc):
    task_id = await start(rpc, "linger")
    await rpc.result("CancelTask", {"id": task_id})
    await wait_for(job_done(task_id))
    assert observed(task_id) == ["cancelled=True", "write refused"]
    task = await rpc.result("GetTask", {"id": task_id})
    assert task["status"]["state"] == CANCELED
    assert "message" not in task["status"]
    assert await event_kinds(task_id) == ["task", "statusUpdate", "statusUpdate"]


async def test_cancel_an_interrupted_task(rpc):
    asked = (await rpc.result("SendMessage", {"message": user_message("ask")}))["task"]
    assert asked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    canceled = await rpc.result("CancelTask", {"id": asked["id"]})
    assert canceled["status"]["state"] == CANCELED


@pytest.mark.parametrize(
    "state",
    [TaskState.COMPLETED, TaskState.FAILED, TaskState.REJECTED, TaskState.CANCELED],
)
async def test_terminal_task_is_not_cancelable(rpc, state):
    task_id = await sync_to_async(stored_task)(state=state)
    kinds = await event_kinds(task_id)
    error = await rpc.error("CancelTask", {"id": task_id})
    assert error["code"] == -32002
    assert error["data"][0]["reason"] == "TASK_NOT_CANCELABLE"
    assert (await rpc.result("GetTask", {"id": task_id}))["status"]["state"] == state.value
    assert await event_kinds(task_id) == kinds


async def test_cancel_twice(rpc):
    task_id = await start(rpc, "wait")
    await rpc.result("CancelTask", {"id": task_id})
    error = await rpc.error("CancelTask", {"id": task_id})
    assert error["code"] == -32002
    await wait_for(job_done(task_id))


@pytest.mark.parametrize("task_id", [str(uuid.uuid4()), "no-such-task"])
async def test_cancel_unknown_task(rpc, task_id):
    error = await rpc.error("CancelTask", {"id": task_id})
    assert error["code"] == -32001
    assert error["data"][0]["reason"] == "TASK_NOT_FOUND"


async def test_cancel_another_owners_task_is_not_found(rpc):
    task_id = await sync_to_async(stored_task)(owner="user:9", state=TaskState.WORKING)
    error = await rpc.error("CancelTask", {"id": task_id})
    assert error["code"] == -32001
    stored = await sync_to_async(models.Task.objects.get)(pk=task_id)
    assert stored.state == TaskState.WORKING.value
