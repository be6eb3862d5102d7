"""Agent jobs end to end: failures, silent agents, artifacts, and sync and async agents."""

from __future__ import annotations

import msgspec
import pytest
from asgiref.sync import sync_to_async

from a2a_endpoint import models
from a2a_endpoint.execution.runner import FAILED_MESSAGE
from a2a_endpoint.testing import jsonrpc_request, user_message
from tests.service.builders import a2a_settings

pytestmark = [pytest.mark.django_db(transaction=True)]

ASYNC_AGENT = "tests.agents.AsyncScriptedAgent"


async def send(rpc, text: str) -> dict:
    return await rpc.result("SendMessage", {"message": user_message(text)})


@sync_to_async
def stored_text(task_id: str) -> str:
    """Everything stored about a task, as one string."""
    task = models.Task.objects.get(pk=task_id)
    rows = [task.status_message, task.metadata]
    rows += list(models.Message.objects.filter(task=task).values_list("payload", flat=True))
    rows += list(models.TaskEvent.objects.filter(task=task).values_list("payload", flat=True))
    return msgspec.json.encode(rows).decode()


def status_text(task: dict) -> str:
    return task["status"]["message"]["parts"][0]["text"]


async def test_exception_fails_the_task_without_leaking_its_text(rpc):
    response = await rpc.post(jsonrpc_request("SendMessage", {"message": user_message("fail")}))
    assert b"hunter2" not in response.content
    task = msgspec.json.decode(response.content)["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    assert status_text(task) == FAILED_MESSAGE
    assert task["status"]["message"]["role"] == "ROLE_AGENT"
    assert "hunter2" not in await stored_text(task["id"])
    fetched = await rpc.post(jsonrpc_request("GetTask", {"id": task["id"]}))
    assert b"hunter2" not in fetched.content


async def test_agent_error_fails_the_task_with_its_message(rpc):
    task = (await send(rpc, "agent-error"))["task"]
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    assert status_text(task) == "The input was not understood"


async def test_agent_that_returns_without_a_word_completes_the_task(rpc):
    task = (await send(rpc, "noop"))["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert "message" not in task["status"]
    assert [m["role"] for m in task["history"]] == ["ROLE_USER"]


async def test_chunks_are_appended_to_one_artifact_in_order(rpc):
    task = (await send(rpc, "chunks"))["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    [artifact] = task["artifacts"]
    assert artifact["name"] == "story"
    assert artifact["parts"] == [{"text": "one "}, {"text": "two "}, {"data": {"n": 3}}]
    complete = await sync_to_async(
        models.Artifact.objects.filter(task_id=task["id"]).values_list("complete", flat=True).get
    )()
    assert complete is True


@pytest.mark.parametrize("agent", ["tests.agents.ScriptedAgent", ASYNC_AGENT])
class TestSyncAndAsyncAgents:
    async def test_echo(self, rpc, agent):
        with a2a_settings(AGENT=agent):
            task = (await send(rpc, "echo both ways"))["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        assert task["artifacts"][0]["parts"] == [{"text": "both ways"}]

    async def test_reply(self, rpc, agent):
        with a2a_settings(AGENT=agent):
            result = await send(rpc, "reply hey")
        assert result["message"]["parts"] == [{"text": "you said hey"}]
        assert result["message"]["role"] == "ROLE_AGENT"

    async def test_ask(self, rpc, agent):
        with a2a_settings(AGENT=agent):
            task = (await send(rpc, "ask"))["task"]
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        assert status_text(task) == "What is your name?"

    async def test_fail(self, rpc, agent):
        with a2a_settings(AGENT=agent):
            task = (await send(rpc, "fail"))["task"]
        assert task["status"]["state"] == "TASK_STATE_FAILED"
        assert status_text(task) == FAILED_MESSAGE


async def test_agent_that_cannot_be_built_fails_its_task(rpc):
    with a2a_settings(AGENT="tests.agents.UnbuildableAgent"):
        task = (await send(rpc, "echo hi"))["task"]
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    assert status_text(task) == FAILED_MESSAGE


async def test_agent_sees_the_task_metadata(rpc):
    from tests.agents import observed

    params = {"message": user_message("metadata"), "metadata": {"origin": "tests"}}
    task = (await rpc.result("SendMessage", params))["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert observed(task["id"]) == ["{'origin': 'tests'}"]
