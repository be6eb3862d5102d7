"""Params validation through the endpoint: -32602 naming the field (google.rpc.BadRequest)."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from a2a_endpoint import models
from a2a_endpoint.testing import user_message
from tests.service.builders import stored_task

pytestmark = [pytest.mark.django_db(transaction=True)]

BAD_REQUEST = "type.googleapis.com/google.rpc.BadRequest"


def message(**fields) -> dict:
    return {**user_message("echo x"), **fields}


def without(mapping: dict, key: str) -> dict:
    return {name: value for name, value in mapping.items() if name != key}


async def assert_invalid(rpc, method: str, params, field: str) -> dict:
    error = await rpc.error(method, params)
    assert error["code"] == -32602, error
    detail = error["data"][0]
    assert detail["@type"] == BAD_REQUEST
    assert detail["fieldViolations"][0]["field"] == field
    assert detail["fieldViolations"][0]["description"]
    return error


SEND_MESSAGE_CASES = {
    "missing message": ({}, "message"),
    "missing messageId": ({"message": without(message(), "messageId")}, "message.messageId"),
    "empty messageId": ({"message": message(messageId="")}, "message.messageId"),
    "messageId a number": ({"message": message(messageId=7)}, "message.messageId"),
    "missing role": ({"message": without(message(), "role")}, "message.role"),
    "empty parts": ({"message": message(parts=[])}, "message.parts"),
    "parts a string": ({"message": message(parts="hello")}, "message.parts"),
    "part with text and url": (
        {"message": message(parts=[{"text": "a", "url": "https://example.com/a"}])},
        "message.parts[0]",
    ),
    "part with text and data": (
        {"message": message(parts=[{"text": "a", "data": {"b": 1}}])},
        "message.parts[0]",
    ),
    "part with no content": (
        {"message": message(parts=[{"text": "a"}, {"mediaType": "text/plain"}])},
        "message.parts[1]",
    ),
    "role unspecified": ({"message": message(role="ROLE_UNSPECIFIED")}, "message.role"),
    "unknown role": ({"message": message(role="ROLE_ROBOT")}, "message.role"),
    "v0.3 lowercase role": ({"message": message(role="user")}, "message.role"),
    "negative historyLength": (
        {"message": message(), "configuration": {"historyLength": -1}},
        "configuration.historyLength",
    ),
    "returnImmediately not a bool": (
        {"message": message(), "configuration": {"returnImmediately": "yes"}},
        "configuration.returnImmediately",
    ),
}


@pytest.mark.parametrize(
    ("params", "field"), SEND_MESSAGE_CASES.values(), ids=SEND_MESSAGE_CASES.keys()
)
async def test_send_message_validation(rpc, params, field):
    await assert_invalid(rpc, "SendMessage", params, field)
    assert await sync_to_async(models.Task.objects.count)() == 0


@pytest.mark.parametrize("method", ["SendMessage", "GetTask", "ListTasks", "CancelTask"])
async def test_params_by_position_are_invalid(rpc, method):
    # A2A §9.1: params are by name; an array is valid JSON-RPC but not valid A2A params.
    await assert_invalid(rpc, method, [{"id": "x", "message": message()}], "params")


@pytest.mark.parametrize(
    ("params", "field"),
    [({}, "id"), ({"id": ""}, "id"), ({"id": "x", "historyLength": -1}, "historyLength")],
)
async def test_get_task_validation(rpc, params, field):
    await assert_invalid(rpc, "GetTask", params, field)


async def test_cancel_task_needs_an_id(rpc):
    await assert_invalid(rpc, "CancelTask", {}, "id")


LIST_TASKS_CASES = {
    "pageSize 0": ({"pageSize": 0}, "pageSize"),
    "pageSize 101": ({"pageSize": 101}, "pageSize"),
    "pageSize not a number": ({"pageSize": "abc"}, "pageSize"),
    "unknown status": ({"status": "TASK_STATE_DONE"}, "status"),
    "negative historyLength": ({"historyLength": -2}, "historyLength"),
    "naive statusTimestampAfter": (
        {"statusTimestampAfter": "2025-01-01T00:00:00"},
        "statusTimestampAfter",
    ),
    "garbage pageToken": ({"pageToken": "not-a-token"}, "pageToken"),
}


@pytest.mark.parametrize(("params", "field"), LIST_TASKS_CASES.values(), ids=LIST_TASKS_CASES)
async def test_list_tasks_validation(rpc, params, field):
    await assert_invalid(rpc, "ListTasks", params, field)


async def test_tampered_page_token_is_invalid(rpc):
    for _ in range(2):
        await sync_to_async(stored_task)()
    token = (await rpc.result("ListTasks", {"pageSize": 1}))["nextPageToken"]
    assert token
    await rpc.result("ListTasks", {"pageSize": 1, "pageToken": token})  # the real one works
    tampered = token[:-1] + ("A" if token[-1] != "A" else "B")
    await assert_invalid(rpc, "ListTasks", {"pageToken": tampered}, "pageToken")


async def test_unknown_fields_are_ignored(rpc):
    # A2A §5.7: receivers ignore fields they do not know, at every level.
    params = {
        "message": {
            **user_message("echo ignored", futureField=1),
            "parts": [{"text": "echo ignored", "futurePartField": True}],
        },
        "configuration": {"futureOption": "x"},
        "futureTopLevel": {"nested": [1, 2]},
    }
    task = (await rpc.result("SendMessage", params))["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["artifacts"][0]["parts"] == [{"text": "ignored"}]
    assert "futureField" not in task["history"][0]
    fetched = await rpc.result("GetTask", {"id": task["id"], "futureField": 1})
    assert fetched["id"] == task["id"]
    listed = await rpc.result("ListTasks", {"futureField": 1})
    assert [t["id"] for t in listed["tasks"]] == [task["id"]]
