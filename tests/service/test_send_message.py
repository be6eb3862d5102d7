"""SendMessage through the JSON-RPC endpoint: new tasks, blocking, continuation, idempotence."""

from __future__ import annotations

import asyncio
import threading
import uuid

import pytest
from asgiref.sync import sync_to_async

from a2a_endpoint import models
from a2a_endpoint.execution import runtime
from a2a_endpoint.lifecycle import TaskState
from a2a_endpoint.testing import user_message
from tests.agents import RUNS, gate
from tests.service.builders import DEADLINE, a2a_settings, poll_task, stored_task

pytestmark = [pytest.mark.django_db(transaction=True)]

COMPLETED = "TASK_STATE_COMPLETED"


async def send(rpc, text: str, configuration: dict | None = None, **fields) -> dict:
    params: dict = {"message": user_message(text, **fields)}
    if configuration is not None:
        params["configuration"] = configuration
    return await rpc.result("SendMessage", params)


@sync_to_async
def task_rows() -> int:
    return models.Task.objects.count()


@sync_to_async
def stored_state(task_id: str) -> tuple[str, int, int]:
    task = models.Task.objects.get(pk=task_id)
    return task.state, task.seq, task.messages.count()


# --- new tasks ---------------------------------------------------------------------------


async def test_new_task_gets_a_server_uuid_and_keeps_the_client_context(rpc):
    task = (await send(rpc, "echo hi", contextId="my-context"))["task"]
    assert str(uuid.UUID(task["id"])) == task["id"]
    assert task["contextId"] == "my-context"
    assert {m["contextId"] for m in task["history"]} == {"my-context"}


async def test_new_task_without_context_gets_a_generated_one(rpc):
    first = (await send(rpc, "echo a"))["task"]
    second = (await send(rpc, "echo b"))["task"]
    assert first["contextId"]
    assert first["contextId"] != second["contextId"]
    assert first["history"][0]["contextId"] == first["contextId"]
    assert first["history"][0]["taskId"] == first["id"]


async def test_blocking_send_returns_the_completed_task_with_artifacts_and_history(rpc):
    message = user_message("echo hello")
    task = (await rpc.result("SendMessage", {"message": message}))["task"]
    assert task["status"]["state"] == COMPLETED
    assert task["status"]["timestamp"].endswith("Z")
    assert [a["parts"] for a in task["artifacts"]] == [[{"text": "hello"}]]
    assert task["artifacts"][0]["name"] == "echo"
    history = task["history"]
    assert history[0]["messageId"] == message["messageId"]
    assert history[0]["role"] == "ROLE_USER"
    assert history[0]["parts"] == [{"text": "echo hello"}]
    assert [m["role"] for m in history[1:]] == ["ROLE_AGENT"]
    assert history[1]["parts"] == [{"text": "echoing"}]


async def test_return_immediately_answers_before_the_job_finishes(rpc):
    name = str(uuid.uuid4())
    with a2a_settings(BLOCKING_TIMEOUT=60):
        try:
            answer = send(rpc, f"gate {name}", {"returnImmediately": True})
            task = (await asyncio.wait_for(answer, DEADLINE))["task"]
            # The job is held at the gate, so a blocking call could not have returned yet;
            # the answer is the snapshot read in the transaction that stored the task.
            assert task["status"]["state"] == "TASK_STATE_SUBMITTED"
        finally:
            gate(name).set()
        done = await poll_task(rpc, task["id"], COMPLETED)
    assert done["status"]["message"]["parts"] == [{"text": "opened"}]


async def test_only_a_blocking_send_subscribes_to_its_task(rpc, monkeypatch):
    """returnImmediately waits for nothing, so it takes no subscription (on the channel
    layer: a group joined and left, and a reader, for every send)."""
    bus = runtime.get_event_bus()
    subscribed = []
    subscribe = bus.subscribe

    def spy(task_id: str):
        subscribed.append(task_id)
        return subscribe(task_id)

    monkeypatch.setattr(bus, "subscribe", spy)
    quick = await send(rpc, "echo quick", {"returnImmediately": True, "historyLength": 0})
    assert quick["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
    assert "history" not in quick["task"]  # historyLength applies to the snapshot too
    assert subscribed == []
    await poll_task(rpc, quick["task"]["id"], COMPLETED)
    blocking = (await send(rpc, "echo slow"))["task"]
    assert blocking["status"]["state"] == COMPLETED
    assert subscribed == [blocking["id"]]


async def test_a_blocking_send_of_a_new_task_only_waits(rpc, monkeypatch):
    """Its subscription began before the task existed, so it does not read the task's state
    before waiting (the job's own reads run on the backend's threads); a send that may find
    its task settled already (a retry) does."""
    store = runtime.get_store()
    looked: list[str] = []
    load = store.load

    def spy(task_id: str):
        if not threading.current_thread().name.startswith(("a2a-agent", "a2a-inline")):
            looked.append(task_id)
        return load(task_id)

    monkeypatch.setattr(store, "load", spy)
    message = user_message("echo once")
    first = (await rpc.result("SendMessage", {"message": message}))["task"]
    assert first["status"]["state"] == COMPLETED
    assert looked == []
    again = (await rpc.result("SendMessage", {"message": message}))["task"]
    assert again == first
    assert looked == [first["id"]]


@pytest.mark.parametrize("length", [1, 3, 10])
async def test_history_length_keeps_the_most_recent_messages(rpc, length):
    # "ask" then the answer: history is [ask, question, answer, greeting].
    asked = (await send(rpc, "ask"))["task"]
    answer = user_message("Ann", taskId=asked["id"])
    config = {"historyLength": length}
    task = (await rpc.result("SendMessage", {"message": answer, "configuration": config}))["task"]
    full = await rpc.result("GetTask", {"id": asked["id"]})
    assert len(full["history"]) == 4
    assert task["history"] == full["history"][-length:]
    assert len(task["history"]) == min(length, 4)


async def test_history_length_zero_omits_history(rpc):
    task = (await send(rpc, "echo x", {"historyLength": 0}))["task"]
    assert "history" not in task
    assert task["status"]["state"] == COMPLETED


# --- continuation of interrupted tasks ---------------------------------------------------


async def test_ask_then_answer_completes_the_task(rpc):
    asked = (await send(rpc, "ask", contextId="c-ask"))["task"]
    assert asked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    question = asked["status"]["message"]
    assert question["role"] == "ROLE_AGENT"
    assert question["parts"] == [{"text": "What is your name?"}]
    assert asked["history"][-1] == question

    answered = (await send(rpc, "Ann", taskId=asked["id"], contextId="c-ask"))["task"]
    assert answered["id"] == asked["id"]
    assert answered["status"]["state"] == COMPLETED
    assert answered["status"]["message"]["parts"] == [{"text": "Hello Ann"}]
    assert [m["role"] for m in answered["history"]] == [
        "ROLE_USER",
        "ROLE_AGENT",
        "ROLE_USER",
        "ROLE_AGENT",
    ]


async def test_continuation_infers_the_context_from_the_task(rpc):
    asked = (await send(rpc, "ask"))["task"]
    answered = (await send(rpc, "Bo", taskId=asked["id"]))["task"]
    assert answered["status"]["state"] == COMPLETED
    assert answered["contextId"] == asked["contextId"]
    # A2A §3.4: the context is inferred, for the stored message too.
    assert {m["contextId"] for m in answered["history"]} == {asked["contextId"]}


async def test_context_mismatch_is_invalid_params(rpc):
    asked = (await send(rpc, "ask", contextId="one"))["task"]
    params = {"message": user_message("Ann", taskId=asked["id"], contextId="two")}
    error = await rpc.error("SendMessage", params)
    assert error["code"] == -32602
    assert error["data"][0]["fieldViolations"][0]["field"] == "message.contextId"
    assert await stored_state(asked["id"]) == ("TASK_STATE_INPUT_REQUIRED", 2, 2)


@pytest.mark.parametrize("task_id", [str(uuid.uuid4()), "not-a-uuid", "12"])
async def test_unknown_task_id_is_task_not_found(rpc, task_id):
    error = await rpc.error("SendMessage", {"message": user_message("hi", taskId=task_id)})
    assert error["code"] == -32001
    assert error["data"][0]["reason"] == "TASK_NOT_FOUND"
    assert await task_rows() == 0


async def test_message_to_a_terminal_task_is_refused_and_changes_nothing(rpc):
    done = (await send(rpc, "echo x"))["task"]
    before = await stored_state(done["id"])
    error = await rpc.error("SendMessage", {"message": user_message("more", taskId=done["id"])})
    assert error["code"] == -32004
    assert await stored_state(done["id"]) == before
    assert await rpc.result("GetTask", {"id": done["id"]}) == done
    assert RUNS[done["id"]] == 1


async def test_message_to_a_working_task_is_refused(rpc):
    with a2a_settings(BLOCKING_TIMEOUT=60):
        working = (await send(rpc, "wait", {"returnImmediately": True}))["task"]
        await poll_task(rpc, working["id"], "TASK_STATE_WORKING")
        before = await stored_state(working["id"])
        message = user_message("more", taskId=working["id"])
        error = await rpc.error("SendMessage", {"message": message})
        assert error["code"] == -32004
        assert await stored_state(working["id"]) == before
        await rpc.result("CancelTask", {"id": working["id"]})


async def test_message_to_another_callers_task_is_task_not_found(rpc):
    task_id = await sync_to_async(stored_task)(
        owner="user:someone-else", state=TaskState.INPUT_REQUIRED
    )
    before = await stored_state(task_id)
    error = await rpc.error("SendMessage", {"message": user_message("hi", taskId=task_id)})
    assert error["code"] == -32001
    assert await stored_state(task_id) == before


# --- idempotence ---------------------------------------------------------------------------


async def test_repeated_answer_is_not_processed_twice(rpc):
    asked = (await send(rpc, "ask"))["task"]
    answer = user_message("Ann", taskId=asked["id"])
    first = (await rpc.result("SendMessage", {"message": answer}))["task"]
    assert RUNS[asked["id"]] == 2
    again = (await rpc.result("SendMessage", {"message": answer}))["task"]
    assert again == first
    assert RUNS[asked["id"]] == 2


async def test_repeated_first_message_does_not_resume_the_task(rpc):
    message = user_message("ask")
    asked = (await rpc.result("SendMessage", {"message": message}))["task"]
    retry = {**message, "taskId": asked["id"]}
    again = (await rpc.result("SendMessage", {"message": retry}))["task"]
    assert again["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert again["history"] == asked["history"]
    assert RUNS[asked["id"]] == 1


async def test_retried_new_task_send_returns_the_same_task(rpc):
    message = user_message("echo once")
    first = (await rpc.result("SendMessage", {"message": message}))["task"]
    again = (await rpc.result("SendMessage", {"message": message}))["task"]
    assert again["id"] == first["id"]
    assert again == first
    assert await task_rows() == 1
    assert RUNS[first["id"]] == 1


# --- direct Message replies and unsupported options ----------------------------------------


async def test_direct_reply_is_a_message_result(rpc):
    result = await send(rpc, "reply hi", contextId="c-reply")
    assert set(result) == {"message"}
    message = result["message"]
    assert message["role"] == "ROLE_AGENT"
    assert message["parts"] == [{"text": "you said hi"}]
    assert message["contextId"] == "c-reply"
    assert "taskId" not in message


async def test_direct_reply_without_context_carries_the_generated_one(rpc):
    message = (await send(rpc, "reply yo"))["message"]
    uuid.UUID(message["contextId"])
    assert "taskId" not in message


async def test_retried_send_of_a_direct_reply_answers_the_same_message(rpc):
    # The client never learned of a task: a retry must get the Message again (A2A §3.1.1).
    message = user_message("reply twice")
    first = await rpc.result("SendMessage", {"message": message})
    again = await rpc.result("SendMessage", {"message": message})
    assert again == first
    assert await task_rows() == 1


async def test_push_config_in_configuration_is_not_supported_when_turned_off(rpc):
    config = {"taskPushNotificationConfig": {"url": "https://example.com/hook"}}
    params = {"message": user_message("echo x"), "configuration": config}
    with a2a_settings(PUSH_NOTIFICATIONS=False):
        error = await rpc.error("SendMessage", params)
    assert error["code"] == -32003
    assert error["data"][0]["reason"] == "PUSH_NOTIFICATION_NOT_SUPPORTED"
    assert await task_rows() == 0


async def test_blocking_timeout_returns_the_working_task(rpc):
    with a2a_settings(BLOCKING_TIMEOUT=0.5):
        # The job waits 30 s for a cancel: only the timeout can end the call this soon.
        task = (await asyncio.wait_for(send(rpc, "wait"), DEADLINE))["task"]
        assert task["status"]["state"] == "TASK_STATE_WORKING"
        canceled = await rpc.result("CancelTask", {"id": task["id"]})
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"


async def test_concurrent_sends_of_one_message_make_one_task(rpc):
    message = user_message("echo once")
    clients = [type(rpc)() for _ in range(4)]
    results = await asyncio.gather(
        *(client.result("SendMessage", {"message": message}) for client in clients)
    )
    ids = {result["task"]["id"] for result in results}
    assert len(ids) == 1
    (task_id,) = ids
    assert all(r["task"]["status"]["state"] == "TASK_STATE_COMPLETED" for r in results)
    count = await sync_to_async(
        models.Task.objects.filter(origin_message_id=message["messageId"]).count
    )()
    assert count == 1
    assert RUNS[task_id] == 1
