"""The inline backend: cancellation reaches the job, and a stubborn async job is stopped."""

from __future__ import annotations

import pytest

from a2a_endpoint.execution import runtime
from a2a_endpoint.testing import user_message
from tests.agents import observed
from tests.service.builders import a2a_settings, poll_task, wait_for

pytestmark = [pytest.mark.django_db(transaction=True)]


async def test_async_agent_ignoring_cancel_is_stopped_after_the_grace_period(rpc):
    with a2a_settings(AGENT="tests.agents.AsyncScriptedAgent", CANCEL_GRACE_PERIOD=1.0):
        params = {"message": user_message("stubborn"), "configuration": {"returnImmediately": True}}
        task_id = (await rpc.result("SendMessage", params))["task"]["id"]
        await poll_task(rpc, task_id, "TASK_STATE_WORKING")
        backend = runtime.get_backend()
        canceled = await rpc.result("CancelTask", {"id": task_id})
        assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
        # It ignores the signal, so it runs on until the grace period is over...
        assert backend.running(task_id)
        assert observed(task_id) == []
        # ...and is then stopped (its coroutine is cancelled).
        await wait_for(lambda: "stopped" in observed(task_id))
        await wait_for(lambda: not backend.running(task_id))
        task = await rpc.result("GetTask", {"id": task_id})
    assert task["status"]["state"] == "TASK_STATE_CANCELED"


async def test_shutdown_stops_running_jobs_without_finishing_their_tasks(rpc):
    from asgiref.sync import sync_to_async

    params = {"message": user_message("wait 30"), "configuration": {"returnImmediately": True}}
    task_id = (await rpc.result("SendMessage", params))["task"]["id"]
    await poll_task(rpc, task_id, "TASK_STATE_WORKING")
    backend = runtime.get_backend()
    assert backend.running(task_id)
    # The sync job waits on its cancel event: shutdown must signal it and return promptly.
    await sync_to_async(backend.shutdown, thread_sensitive=False)(timeout=5.0)
    assert not backend.running(task_id)
    assert backend._loop.is_closed()
    runtime.get_backend.cache_clear()  # the autouse fixture must not shut it down twice
    task = await rpc.result("GetTask", {"id": task_id})
    # Not marked COMPLETED behind the client's back: the job was stopped, not finished.
    assert task["status"]["state"] == "TASK_STATE_WORKING"
