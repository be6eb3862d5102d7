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
