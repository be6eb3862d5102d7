"""The four push config methods and SendMessage's inline config, through the JSON-RPC
endpoint: happy paths, every error, caller scoping, and nothing stored by a refused call."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from a2a_endpoint import models
from a2a_endpoint.testing import user_message
from tests.service.builders import a2a_settings

pytestmark = pytest.mark.django_db(transaction=True)

HOOK = "https://hooks.example/a2a"
INVALID_PARAMS = -32602
NOT_FOUND = -32001
NOT_SUPPORTED = -32003


@pytest.fixture(autouse=True)
def _resolvable_hooks(monkeypatch):
    """hooks.example resolves to a public address (no DNS on the test machines)."""
    import socket

    real = socket.getaddrinfo

    def fake(host, port, *args, **kwargs):
        if host == "hooks.example":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.215.14", port))]
        if host == "inside.example":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", fake)


async def task_id(rpc, text: str = "noop") -> str:
    answer = await rpc.result("SendMessage", {"message": user_message(text)})
    return answer["task"]["id"]


async def create(rpc, task: str, **config: Any) -> dict[str, Any]:
    return await rpc.result("CreateTaskPushNotificationConfig", {"taskId": task, **config})


@sync_to_async
def stored_configs(task: str) -> list[models.PushNotificationConfig]:
    return list(models.PushNotificationConfig.objects.filter(task_id=task).order_by("id"))


def field_of(error: dict[str, Any]) -> str:
    [violation] = error["data"][0]["fieldViolations"]
    return violation["field"]


# --- capability -------------------------------------------------------------------------------


async def test_the_card_declares_push_notifications(client):
    card = (await sync_to_async(client.get)("/.well-known/agent-card.json")).json()
    assert card["capabilities"]["pushNotifications"] is True


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("CreateTaskPushNotificationConfig", {"taskId": "t", "url": HOOK}),
        ("GetTaskPushNotificationConfig", {"taskId": "t", "id": "c"}),
        ("ListTaskPushNotificationConfigs", {"taskId": "t"}),
        ("DeleteTaskPushNotificationConfig", {"taskId": "t", "id": "c"}),
        (
            "SendMessage",
            {
                "message": user_message("noop"),
                "configuration": {"taskPushNotificationConfig": {"url": HOOK}},
            },
        ),
    ],
)
async def test_turned_off_every_method_is_not_supported(rpc, client, method, params):
    with a2a_settings(PUSH_NOTIFICATIONS=False):
        card = (await sync_to_async(client.get)("/.well-known/agent-card.json")).json()
        assert card["capabilities"].get("pushNotifications", False) is False
        error = await rpc.error(method, params)
    assert error["code"] == NOT_SUPPORTED
    assert error["data"][0]["reason"] == "PUSH_NOTIFICATION_NOT_SUPPORTED"
    assert await sync_to_async(models.Task.objects.count)() == 0


# --- create / get / list / delete ----------------------------------------------------------


async def test_create_assigns_an_id_and_returns_the_config(rpc):
    task = await task_id(rpc)
    config = await create(
        rpc,
        task,
        url=HOOK,
        token="tok-1",
        authentication={"scheme": "Bearer", "credentials": "secret-1"},
    )
    assert config["id"]
    assert config == {
        "id": config["id"],
        "taskId": task,
        "url": HOOK,
        "token": "tok-1",
        "authentication": {"scheme": "Bearer", "credentials": "secret-1"},
    }
    [row] = await stored_configs(task)
    assert (row.config_id, row.url, row.token) == (config["id"], HOOK, "tok-1")
    assert (row.auth_scheme, row.auth_credentials) == ("Bearer", "secret-1")


async def test_create_keeps_the_clients_id_and_replaces_the_config_of_that_id(rpc):
    task = await task_id(rpc)
    await create(rpc, task, id="mine", url=HOOK, token="old")
    again = await create(rpc, task, id="mine", url=HOOK + "/v2")
    assert again["id"] == "mine"
    assert again["url"] == HOOK + "/v2"
    assert "token" not in again
    [row] = await stored_configs(task)
    assert (row.config_id, row.url, row.token) == ("mine", HOOK + "/v2", "")


async def test_get_returns_the_config_and_a_missing_one_is_not_found(rpc):
    task = await task_id(rpc)
    created = await create(rpc, task, id="c1", url=HOOK)
    got = await rpc.result("GetTaskPushNotificationConfig", {"taskId": task, "id": "c1"})
    assert got == created
    error = await rpc.error("GetTaskPushNotificationConfig", {"taskId": task, "id": "other"})
    assert error["code"] == NOT_FOUND


async def test_list_pages_through_every_config_in_order(rpc):
    task = await task_id(rpc)
    ids = [(await create(rpc, task, id=f"c{n}", url=f"{HOOK}/{n}"))["id"] for n in range(5)]
    seen: list[str] = []
    token = ""
    pages = 0
    while True:
        params = {"taskId": task, "pageSize": 2, **({"pageToken": token} if token else {})}
        page = await rpc.result("ListTaskPushNotificationConfigs", params)
        assert len(page["configs"]) <= 2
        seen += [config["id"] for config in page["configs"]]
        pages += 1
        token = page.get("nextPageToken", "")
        if not token:
            break
    assert seen == ids
    assert pages == 3
    everything = await rpc.result("ListTaskPushNotificationConfigs", {"taskId": task})
    assert [config["id"] for config in everything["configs"]] == ids
    assert everything.get("nextPageToken", "") == ""


async def test_list_of_a_task_without_configs_is_empty(rpc):
    task = await task_id(rpc)
    page = await rpc.result("ListTaskPushNotificationConfigs", {"taskId": task})
    assert page.get("configs", []) == []


async def test_list_refuses_a_bad_token_and_a_negative_page_size(rpc):
    task = await task_id(rpc)
    error = await rpc.error(
        "ListTaskPushNotificationConfigs", {"taskId": task, "pageToken": "forged"}
    )
    assert (error["code"], field_of(error)) == (INVALID_PARAMS, "pageToken")
    error = await rpc.error("ListTaskPushNotificationConfigs", {"taskId": task, "pageSize": -1})
    assert (error["code"], field_of(error)) == (INVALID_PARAMS, "pageSize")


async def test_a_page_token_of_another_task_is_refused(rpc):
    first, second = await task_id(rpc), await task_id(rpc)
    for n in range(3):
        await create(rpc, first, id=f"c{n}", url=HOOK)
    page = await rpc.result("ListTaskPushNotificationConfigs", {"taskId": first, "pageSize": 1})
    error = await rpc.error(
        "ListTaskPushNotificationConfigs",
        {"taskId": second, "pageToken": page["nextPageToken"]},
    )
    assert error["code"] == INVALID_PARAMS


async def test_delete_returns_empty_and_is_idempotent(rpc):
    task = await task_id(rpc)
    await create(rpc, task, id="c1", url=HOOK)
    await create(rpc, task, id="c2", url=HOOK)
    params = {"taskId": task, "id": "c1"}
    assert await rpc.result("DeleteTaskPushNotificationConfig", params) == {}
    assert await rpc.result("DeleteTaskPushNotificationConfig", params) == {}
    assert (await rpc.error("GetTaskPushNotificationConfig", params))["code"] == NOT_FOUND
    assert [row.config_id for row in await stored_configs(task)] == ["c2"]


async def test_a_finished_tasks_config_can_be_created(rpc):
    task = await task_id(rpc)  # "noop" completes at once
    assert (await rpc.result("GetTask", {"id": task}))["status"]["state"] == "TASK_STATE_COMPLETED"
    assert (await create(rpc, task, url=HOOK))["taskId"] == task


# --- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "method",
    [
        "CreateTaskPushNotificationConfig",
        "GetTaskPushNotificationConfig",
        "ListTaskPushNotificationConfigs",
        "DeleteTaskPushNotificationConfig",
    ],
)
@pytest.mark.parametrize("task", ["0b5d2c59-1d7e-4d43-9f7a-1c4e2b7d9a10", "not-a-uuid"])
async def test_an_unknown_task_is_not_found(rpc, method, task):
    error = await rpc.error(method, {"taskId": task, "id": "c", "url": HOOK})
    assert error["code"] == NOT_FOUND


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"url": HOOK}, "taskId"),
        ({"taskId": "TASK"}, "url"),
        ({"taskId": "TASK", "url": ""}, "url"),
        ({"taskId": "TASK", "url": "http://hooks.example/a2a"}, "url"),
        ({"taskId": "TASK", "url": "https://127.0.0.1/a2a"}, "url"),
        ({"taskId": "TASK", "url": "https://inside.example/a2a"}, "url"),
        ({"taskId": "TASK", "url": "https://169.254.169.254/latest"}, "url"),
        ({"taskId": "TASK", "url": "https://[::ffff:10.0.0.1]/a2a"}, "url"),
        ({"taskId": "TASK", "url": "https://user:pw@hooks.example/a2a"}, "url"),
        ({"taskId": "TASK", "url": HOOK + "/" + "x" * 2100}, "url"),
        ({"taskId": "TASK", "url": HOOK, "id": "i" * 256}, "id"),
        ({"taskId": "TASK", "url": HOOK, "token": "a\r\nX-Evil: 1"}, "token"),
        (
            {"taskId": "TASK", "url": HOOK, "authentication": {"scheme": "", "credentials": "x"}},
            "authentication.scheme",
        ),
        (
            {"taskId": "TASK", "url": HOOK, "authentication": {"scheme": "Bear er"}},
            "authentication.scheme",
        ),
        (
            {
                "taskId": "TASK",
                "url": HOOK,
                "authentication": {"scheme": "Bearer", "credentials": "x\ny"},
            },
            "authentication.credentials",
        ),
    ],
)
async def test_create_refuses_what_cannot_be_stored_or_sent_to(rpc, params, field):
    task = await task_id(rpc)
    params = {key: (task if value == "TASK" else value) for key, value in params.items()}
    error = await rpc.error("CreateTaskPushNotificationConfig", params)
    assert error["code"] == INVALID_PARAMS, error
    assert field_of(error) == field
    assert await stored_configs(task) == []


async def test_a_refused_url_says_why(rpc):
    task = await task_id(rpc)
    error = await rpc.error(
        "CreateTaskPushNotificationConfig", {"taskId": task, "url": "https://inside.example/"}
    )
    [violation] = error["data"][0]["fieldViolations"]
    assert "loopback" in violation["description"]


async def test_allowed_by_settings_http_and_loopback_are_accepted(rpc):
    task = await task_id(rpc)
    with a2a_settings(PUSH_ALLOW_HTTP=True, PUSH_ALLOW_PRIVATE_NETWORKS=True):
        config = await create(rpc, task, url="http://127.0.0.1:9/hook")
    assert config["url"] == "http://127.0.0.1:9/hook"


async def test_a_host_outside_the_allow_list_is_refused(rpc):
    task = await task_id(rpc)
    with a2a_settings(PUSH_ALLOWED_HOSTS=["other.example"]):
        error = await rpc.error("CreateTaskPushNotificationConfig", {"taskId": task, "url": HOOK})
    assert field_of(error) == "url"


async def test_get_and_delete_need_both_ids(rpc):
    task = await task_id(rpc)
    for method in ("GetTaskPushNotificationConfig", "DeleteTaskPushNotificationConfig"):
        error = await rpc.error(method, {"taskId": task})
        assert (error["code"], field_of(error)) == (INVALID_PARAMS, "id")
        error = await rpc.error(method, {"id": "c"})
        assert (error["code"], field_of(error)) == (INVALID_PARAMS, "taskId")


# --- SendMessage's inline config --------------------------------------------------------------


async def test_send_message_binds_its_config_to_the_new_task(rpc):
    config = {"id": "inline", "url": HOOK, "taskId": "ignored", "token": "t"}
    answer = await rpc.result(
        "SendMessage",
        {"message": user_message("noop"), "configuration": {"taskPushNotificationConfig": config}},
    )
    task = answer["task"]["id"]
    [row] = await stored_configs(task)
    assert (row.config_id, row.url, row.token) == ("inline", HOOK, "t")
    listed = await rpc.result("ListTaskPushNotificationConfigs", {"taskId": task})
    assert listed["configs"][0]["taskId"] == task


async def test_send_message_binds_its_config_to_the_task_it_continues(rpc):
    asked = (await rpc.result("SendMessage", {"message": user_message("ask")}))["task"]
    follow_up = user_message("Ada", taskId=asked["id"])
    await rpc.result(
        "SendMessage",
        {"message": follow_up, "configuration": {"taskPushNotificationConfig": {"url": HOOK}}},
    )
    [row] = await stored_configs(asked["id"])
    assert row.url == HOOK


@pytest.mark.parametrize("method", ["SendMessage", "SendStreamingMessage"])
async def test_send_with_a_refused_config_stores_nothing(rpc, method):
    params = {
        "message": user_message("noop"),
        "configuration": {"taskPushNotificationConfig": {"url": "https://127.0.0.1/hook"}},
    }
    error = await rpc.error(method, params)
    assert error["code"] == INVALID_PARAMS
    assert field_of(error) == "configuration.taskPushNotificationConfig.url"
    assert await sync_to_async(models.Task.objects.count)() == 0
    assert await sync_to_async(models.PushNotificationConfig.objects.count)() == 0
