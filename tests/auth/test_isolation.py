"""Tasks belong to their caller: (tenant, owner) scopes every method, and a tenant the
caller was not granted is not found, whatever the method (A2A §13.1, §12)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from django.http import HttpRequest

from a2a_endpoint import models
from a2a_endpoint.auth import resolve_caller
from a2a_endpoint.testing import jsonrpc_request, user_message
from a2a_endpoint.types import Caller
from tests.auth.conftest import User
from tests.conftest import RpcClient

pytestmark = pytest.mark.django_db(transaction=True)

NOT_FOUND = -32001


def task_not_found(answer: dict[str, Any]) -> None:
    assert "result" not in answer, answer
    assert answer["error"]["code"] == NOT_FOUND, answer
    assert answer["error"]["message"] == "Task not found"


async def started(client: RpcClient, text: str = "ask", **params: Any) -> dict[str, Any]:
    """A task left INPUT_REQUIRED (it could be continued, canceled, subscribed to)."""
    task = (await client.result("SendMessage", {"message": user_message(text), **params}))["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    return task


async def state_of(task_id: str) -> str:
    return (await models.Task.objects.aget(id=task_id)).state


async def test_another_caller_can_neither_read_list_cancel_continue_nor_subscribe(
    endpoint, alice: User, bob: User
):
    task = await started(alice.client())
    mallory = bob.client()

    task_not_found(await mallory.call("GetTask", {"id": task["id"]}))
    listed = await mallory.result("ListTasks", {})
    assert listed["tasks"] == []
    assert listed["totalSize"] == 0
    listed = await mallory.result("ListTasks", {"contextId": task["contextId"]})
    assert listed["tasks"] == []
    task_not_found(await mallory.call("CancelTask", {"id": task["id"]}))
    follow_up = user_message("Mallory", taskId=task["id"], contextId=task["contextId"])
    task_not_found(await mallory.call("SendMessage", {"message": follow_up}))
    streaming = {"message": user_message("Mallory", taskId=task["id"])}
    task_not_found(await mallory.call("SendStreamingMessage", streaming))
    # Subscriptions are answered before any stream opens: plain JSON, nothing streamed.
    task_not_found(await mallory.call("SubscribeToTask", {"id": task["id"]}))
    task_not_found(
        await mallory.call("SubscribeToTask", {"id": task["id"]}, **{"Last-Event-ID": "0"})
    )
    # A batch: each request is scoped the same way.
    batch = [
        jsonrpc_request("GetTask", {"id": task["id"]}, id=1),
        jsonrpc_request("CancelTask", {"id": task["id"]}, id=2),
        jsonrpc_request("ListTasks", {}, id=3),
    ]
    answers = msgspec.json.decode((await mallory.post(batch)).content)
    task_not_found(answers[0])
    task_not_found(answers[1])
    assert answers[2]["result"]["tasks"] == []

    # Nothing of alice's changed, and she still sees and continues her task.
    assert await state_of(task["id"]) == "TASK_STATE_INPUT_REQUIRED"
    mine = await alice.client().result("GetTask", {"id": task["id"]})
    assert [m["role"] for m in mine["history"]] == ["ROLE_USER", "ROLE_AGENT"]
    listed = await alice.client().result("ListTasks", {})
    assert [t["id"] for t in listed["tasks"]] == [task["id"]]
    follow_up = user_message("Alice", taskId=task["id"], contextId=task["contextId"])
    done = await alice.client().result("SendMessage", {"message": follow_up})
    assert done["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_a_message_id_reused_by_another_caller_starts_their_own_task(
    endpoint, alice: User, bob: User
):
    message = user_message("echo mine")
    first = await alice.client().result("SendMessage", {"message": message})
    second = await bob.client().result("SendMessage", {"message": message})
    assert first["task"]["id"] != second["task"]["id"]
    owners = {t.owner async for t in models.Task.objects.all()}
    assert owners == {alice.owner, bob.owner}


def granting(request: HttpRequest) -> Caller:
    """A project's resolver: alice works in tenant "acme" (her own) and may use "beta"."""
    caller = resolve_caller(request)
    if request.user.username == "alice":
        return Caller(owner=caller.owner, tenant="acme", tenants=frozenset({"beta"}))
    return Caller(owner=caller.owner, tenants=frozenset({"acme"}))


RESOLVER = "tests.auth.test_isolation.granting"


async def test_a_request_works_in_its_own_or_a_granted_tenant(endpoint, alice: User):
    endpoint(CALLER_RESOLVER=RESOLVER)
    client = alice.client()
    home = await started(client)  # no tenant named: the caller's own
    beta = await started(client, tenant="beta")
    assert await models.Task.objects.filter(id=home["id"], tenant="acme").aexists()
    assert await models.Task.objects.filter(id=beta["id"], tenant="beta").aexists()
    # Each tenant sees its own tasks only.
    assert [t["id"] for t in (await client.result("ListTasks", {}))["tasks"]] == [home["id"]]
    beta_page = await client.result("ListTasks", {"tenant": "beta"})
    assert [t["id"] for t in beta_page["tasks"]] == [beta["id"]]
    task_not_found(await client.call("GetTask", {"id": beta["id"]}))
    assert (await client.result("GetTask", {"id": beta["id"], "tenant": "beta"}))["id"]


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("SendMessage", {"message": user_message("echo x")}),
        ("SendStreamingMessage", {"message": user_message("echo x")}),
        ("GetTask", {"id": "00000000-0000-4000-8000-000000000000"}),
        ("ListTasks", {}),
        ("CancelTask", {"id": "00000000-0000-4000-8000-000000000000"}),
        ("SubscribeToTask", {"id": "00000000-0000-4000-8000-000000000000"}),
        ("GetExtendedAgentCard", {}),
    ],
)
async def test_a_tenant_not_granted_is_not_found_for_every_method(
    endpoint, alice: User, method: str, params: dict[str, Any]
):
    endpoint(CALLER_RESOLVER=RESOLVER, EXTENDED_CARD={"description": "more"})
    task_not_found(await alice.client().call(method, {**params, "tenant": "globex"}))
    assert not await models.Task.objects.aexists()


async def test_a_granted_tenant_does_not_open_other_owners_tasks(endpoint, alice: User, bob: User):
    """bob may use tenant "acme" too, but alice's tasks there stay hers."""
    endpoint(CALLER_RESOLVER=RESOLVER)
    task = await started(alice.client())
    mallory = bob.client()
    task_not_found(await mallory.call("GetTask", {"id": task["id"], "tenant": "acme"}))
    task_not_found(await mallory.call("CancelTask", {"id": task["id"], "tenant": "acme"}))
    task_not_found(await mallory.call("SubscribeToTask", {"id": task["id"], "tenant": "acme"}))
    assert (await mallory.result("ListTasks", {"tenant": "acme"}))["tasks"] == []
    assert await state_of(task["id"]) == "TASK_STATE_INPUT_REQUIRED"


async def test_the_default_resolver_grants_no_tenant(endpoint, alice: User):
    client = alice.client()
    task_not_found(await client.call("ListTasks", {"tenant": "acme"}))
    task_not_found(await client.call("SendMessage", {"message": user_message("x"), "tenant": "a"}))
    assert (await client.result("ListTasks", {}))["tasks"] == []


async def test_another_caller_can_use_no_push_config_method_on_my_task(
    endpoint, alice: User, bob: User, monkeypatch
):
    hook = "https://203.0.113.9/hook"
    monkeypatch.setattr("a2a_endpoint.push.configs.check_url", lambda url, **policy: url)
    mine = alice.client()
    task = (await mine.result("SendMessage", {"message": user_message("noop")}))["task"]["id"]
    await mine.result("CreateTaskPushNotificationConfig", {"taskId": task, "id": "c", "url": hook})
    mallory = bob.client()
    for method, params in [
        ("CreateTaskPushNotificationConfig", {"taskId": task, "url": hook}),
        ("GetTaskPushNotificationConfig", {"taskId": task, "id": "c"}),
        ("ListTaskPushNotificationConfigs", {"taskId": task}),
        ("DeleteTaskPushNotificationConfig", {"taskId": task, "id": "c"}),
    ]:
        task_not_found(await mallory.call(method, params))
    configs = models.PushNotificationConfig.objects.filter(task_id=task)
    assert [row.config_id async for row in configs] == ["c"]
