"""GetTask through the endpoint: history windows, not-found errors and caller scoping."""

from __future__ import annotations

import uuid

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model

from a2a_endpoint.testing import user_message
from tests.conftest import RpcClient
from tests.service.builders import stored_task

pytestmark = [pytest.mark.django_db(transaction=True)]

ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"


@pytest.fixture
async def five_messages() -> str:
    """A completed task whose history is "hello 0", "step 1" … "step 4", with 2 artifacts."""
    return await sync_to_async(stored_task)(history=5, artifacts=["a", "b"])


def texts(task: dict) -> list[str]:
    return [message["parts"][0]["text"] for message in task["history"]]


async def test_get_task_returns_the_whole_task(rpc, five_messages):
    task = await rpc.result("GetTask", {"id": five_messages})
    assert task["id"] == five_messages
    assert task["contextId"] == "ctx"
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert texts(task) == ["hello 0", "step 1", "step 2", "step 3", "step 4"]
    assert [a["parts"] for a in task["artifacts"]] == [[{"text": "a"}], [{"text": "b"}]]


@pytest.mark.parametrize(
    ("length", "expected"),
    [(1, ["step 4"]), (3, ["step 2", "step 3", "step 4"]), (5, None), (50, None)],
)
async def test_history_length_returns_the_tail(rpc, five_messages, length, expected):
    full = texts(await rpc.result("GetTask", {"id": five_messages}))
    task = await rpc.result("GetTask", {"id": five_messages, "historyLength": length})
    assert texts(task) == (expected or full)


async def test_history_length_zero_omits_history(rpc, five_messages):
    task = await rpc.result("GetTask", {"id": five_messages, "historyLength": 0})
    assert "history" not in task
    assert len(task["artifacts"]) == 2


@pytest.mark.parametrize("task_id", [str(uuid.uuid4()), "nope", "1e6"])
async def test_unknown_task_is_not_found_with_error_info(rpc, task_id):
    error = await rpc.error("GetTask", {"id": task_id})
    assert error["code"] == -32001
    info = error["data"][0]
    assert info["@type"] == ERROR_INFO
    assert info["reason"] == "TASK_NOT_FOUND"
    assert info["domain"] == "a2a-protocol.org"


async def test_task_of_another_owner_is_not_found(rpc):
    theirs = await sync_to_async(stored_task)(owner="user:42")
    other_tenant = await sync_to_async(stored_task)(tenant="acme")
    for task_id in (theirs, other_tenant):
        error = await rpc.error("GetTask", {"id": task_id})
        assert error["code"] == -32001


async def test_logged_in_users_see_only_their_own_tasks(rpc):
    user = await sync_to_async(get_user_model().objects.create_user)("ann", password="pw")
    ann = RpcClient()
    await ann.http.aforce_login(user)
    anns = (await ann.result("SendMessage", {"message": user_message("echo mine")}))["task"]
    anonymous = (await rpc.result("SendMessage", {"message": user_message("echo ours")}))["task"]

    assert (await ann.result("GetTask", {"id": anns["id"]}))["id"] == anns["id"]
    assert (await rpc.error("GetTask", {"id": anns["id"]}))["code"] == -32001
    assert (await ann.error("GetTask", {"id": anonymous["id"]}))["code"] == -32001
    assert (await rpc.error("CancelTask", {"id": anns["id"]}))["code"] == -32001
    mine = await ann.result("ListTasks", {})
    assert [t["id"] for t in mine["tasks"]] == [anns["id"]]
    ours = await rpc.result("ListTasks", {})
    assert [t["id"] for t in ours["tasks"]] == [anonymous["id"]]
