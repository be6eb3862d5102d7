"""Writes with the event bus or the broker unreachable, in one process on real parts.

What a client is answered is what happened: an error means nothing was stored; a write that
was stored is answered with its result and finishes, its job handed to the broker later
(the job stays owed until a worker claims it) and its events read from the log by streams.
"Unreachable" is a Redis URL whose port nothing listens on (channels_redis and kombu fail
to connect, as with a Redis that is down); the reachable one is the test run's Redis.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import msgspec
import pytest
import redis
from celery import Celery
from django.conf import settings
from django.test import override_settings
from django.utils import timezone

from a2a_endpoint import models
from a2a_endpoint.execution import celery_backend
from a2a_endpoint.lifecycle import TaskState
from a2a_endpoint.testing import user_message
from tests.integration.servers import delete_redis_keys, free_port
from tests.service.builders import stored_task, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

UNAVAILABLE = "SERVICE_UNAVAILABLE"
#: The queue kombu's Redis transport keeps Celery's default queue in.
DEFAULT_QUEUE = "celery"


def dead_redis() -> str:
    return f"redis://127.0.0.1:{free_port()}/0"


def redis_layers(url: str) -> dict[str, Any]:
    return {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [{"address": url, "socket_timeout": None}]},
        }
    }


@contextlib.contextmanager
def a2a(**overrides: Any) -> Iterator[None]:
    with override_settings(A2A_ENDPOINT={**settings.A2A_ENDPOINT, **overrides}):
        yield


@contextlib.contextmanager
def channels_bus(url: str, **overrides: Any) -> Iterator[None]:
    """The channel-layer bus on channels_redis at ``url``."""
    with (
        override_settings(CHANNEL_LAYERS=redis_layers(url)),
        a2a(EVENT_BUS="channels", **overrides),
    ):
        yield


@contextlib.contextmanager
def celery_broker(url: str, prefix: str = "") -> Iterator[Celery]:
    """A current Celery app whose broker is the Redis at ``url`` (keys under ``prefix``)."""
    from celery import _state

    # The default app too: the current app is per thread, and the service's ORM work (and
    # its hand-off after the commit) runs in another thread.
    previous = _state.default_app, _state.get_current_app()
    app = Celery("a2a-services-down", broker=url, set_as_current=True)
    app.conf.broker_transport_options = {"global_keyprefix": prefix}
    app.conf.broker_connection_retry_on_startup = False
    app.set_default()
    try:
        yield app
    finally:
        app.close()
        _state.default_app = previous[0]
        previous[1].set_current()


@pytest.fixture
def broker_prefix(redis_url: str) -> Iterator[str]:
    prefix = f"a2a-down-{uuid.uuid4().hex[:12]}:"
    yield prefix
    delete_redis_keys(redis_url, prefix)


def queued_jobs(redis_url: str, prefix: str) -> list[str]:
    """The task ids of the agent jobs waiting in Celery's default queue."""
    with redis.Redis.from_url(redis_url) as client:
        raw = client.lrange(f"{prefix}{DEFAULT_QUEUE}", 0, -1)
    jobs = [msgspec.json.decode(item) for item in raw]
    assert all(job["headers"]["task"] == celery_backend.RUN_TASK for job in jobs)
    return [msgspec.json.decode(_body(job))[0][0] for job in jobs]


def _body(job: dict[str, Any]) -> bytes:
    import base64

    return base64.b64decode(job["body"])


def send(text: str, *, blocking: bool, **message: Any) -> dict[str, Any]:
    return {
        "message": user_message(text, **message),
        "configuration": {"returnImmediately": not blocking},
    }


def tasks_of(message_id: str) -> int:
    return models.Task.objects.filter(origin_message_id=message_id).count()


def assert_unavailable(error: dict[str, Any]) -> None:
    assert error["code"] == -32603
    assert "nothing was changed" in error["message"]
    assert error["data"][0]["reason"] == UNAVAILABLE


# --- the event bus unreachable: the writes that wait on it store nothing --------------------


async def test_a_blocking_send_with_the_bus_unreachable_stores_nothing(rpc):
    params = send("echo hi", blocking=True)
    with channels_bus(dead_redis()):
        assert_unavailable(await rpc.error("SendMessage", params))
    assert (
        await models.Task.objects.filter(origin_message_id=params["message"]["messageId"]).acount()
        == 0
    )


async def test_a_streaming_send_with_the_bus_unreachable_stores_nothing(rpc):
    params = send("echo hi", blocking=True)
    with channels_bus(dead_redis()):
        response = await rpc.post(
            {"jsonrpc": "2.0", "id": 7, "method": "SendStreamingMessage", "params": params}
        )
    # A JSON-RPC error before the stream, not an SSE stream of a task nobody follows.
    assert response["Content-Type"] == "application/json"
    answer = msgspec.json.decode(response.content)
    assert answer["id"] == 7
    assert_unavailable(answer["error"])
    assert (
        await models.Task.objects.filter(origin_message_id=params["message"]["messageId"]).acount()
        == 0
    )


async def test_continuing_a_task_with_the_bus_unreachable_changes_nothing(rpc):
    task_id = await stored(state=TaskState.INPUT_REQUIRED, history=2)
    before = await models.Task.objects.aget(pk=task_id)
    with channels_bus(dead_redis()):
        error = await rpc.error("SendMessage", send("Ada", blocking=True, taskId=task_id))
    assert_unavailable(error)
    after = await models.Task.objects.aget(pk=task_id)
    assert (after.state, after.seq, after.history_size) == (
        before.state,
        before.seq,
        before.history_size,
    )


async def test_subscribing_with_the_bus_unreachable_is_an_error_before_the_stream(rpc):
    task_id = await stored(state=TaskState.WORKING)
    with channels_bus(dead_redis()):
        response = await rpc.post(
            {"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": task_id}}
        )
    assert response["Content-Type"] == "application/json"
    assert_unavailable(msgspec.json.decode(response.content)["error"])


async def stored(**kwargs: Any) -> str:
    from asgiref.sync import sync_to_async

    return await sync_to_async(stored_task)(**kwargs)


# --- the bus unreachable: writes that do not wait on it are stored, answered and finish ------


async def test_a_non_blocking_send_with_the_bus_unreachable_runs_its_job_to_the_end(rpc):
    """The job's events cannot be published (each failed publish is logged): the writes
    that hold them are stored all the same, and the task completes."""
    with channels_bus(dead_redis()):
        task = (await rpc.result("SendMessage", send("echo hi", blocking=False)))["task"]
        assert task["status"]["state"] == "TASK_STATE_SUBMITTED"

        async def completed() -> bool:
            row = await models.Task.objects.aget(pk=task["id"])
            return row.state == TaskState.COMPLETED.value

        await wait_for(completed)
    got = await rpc.result("GetTask", {"id": task["id"]})
    assert got["artifacts"][0]["parts"][0]["text"] == "hi"
    assert (await models.Task.objects.aget(pk=task["id"])).handoff_deadline is None


async def test_cancel_with_the_bus_unreachable_is_answered_with_the_canceled_task(rpc):
    task_id = await stored(state=TaskState.WORKING)
    with channels_bus(dead_redis()):
        canceled = await rpc.result("CancelTask", {"id": task_id})
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    assert (await models.Task.objects.aget(pk=task_id)).state == TaskState.CANCELED.value


# --- the broker unreachable: the job stays owed and is handed over once it is back ----------


async def test_a_non_blocking_send_with_the_broker_down_answers_the_task_and_owes_its_job(
    rpc, redis_url, broker_prefix
):
    params = send("echo owed", blocking=False)
    with a2a(EXECUTION_BACKEND="celery"), celery_broker(dead_redis()):
        task = (await rpc.result("SendMessage", params))["task"]
    assert task["status"]["state"] == "TASK_STATE_SUBMITTED"
    row = await models.Task.objects.aget(pk=task["id"])
    assert row.state == TaskState.SUBMITTED.value
    assert row.handoff_deadline is not None
    assert row.handoff_deadline > timezone.now()

    with a2a(EXECUTION_BACKEND="celery"), celery_broker(redis_url, broker_prefix):
        from asgiref.sync import sync_to_async

        # Not yet due: the first hand-off may still be on its way to a worker.
        await sync_to_async(celery_backend.recover_lost_jobs)()
        assert queued_jobs(redis_url, broker_prefix) == []
        await models.Task.objects.filter(pk=task["id"]).aupdate(
            handoff_deadline=timezone.now() - timedelta(seconds=1)
        )
        await sync_to_async(celery_backend.recover_lost_jobs)()  # the workers' sweep
        assert queued_jobs(redis_url, broker_prefix) == [task["id"]]
        row = await models.Task.objects.aget(pk=task["id"])
        assert row.handoffs == 1
        assert row.handoff_deadline > timezone.now()
        # The job a worker takes from the queue runs the message, once.
        await sync_to_async(celery_backend.run_agent_task.run)(task["id"])
    row = await models.Task.objects.aget(pk=task["id"])
    assert (row.state, row.handoff_deadline, row.handoffs) == (
        TaskState.COMPLETED.value,
        None,
        0,
    )
    # The same message sent again is answered with its task, now finished.
    again = await rpc.result("SendMessage", {**params, "configuration": {}})
    assert again["task"]["id"] == task["id"]
    assert again["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_continuing_a_task_with_the_broker_down_owes_the_next_job(rpc):
    task_id = await stored(state=TaskState.INPUT_REQUIRED, history=2)
    with a2a(EXECUTION_BACKEND="celery"), celery_broker(dead_redis()):
        answer = await rpc.result("SendMessage", send("Ada", blocking=False, taskId=task_id))
    assert answer["task"]["status"]["state"] == "TASK_STATE_WORKING"
    row = await models.Task.objects.aget(pk=task_id)
    assert row.handoff_deadline is not None
    assert row.history_size == 3


async def test_cancel_with_the_broker_down_is_answered_with_the_canceled_task(rpc):
    task_id = await stored(state=TaskState.WORKING)
    with a2a(EXECUTION_BACKEND="celery"), celery_broker(dead_redis()):
        canceled = await rpc.result("CancelTask", {"id": task_id})
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    assert (await models.Task.objects.aget(pk=task_id)).state == TaskState.CANCELED.value


async def test_the_sweep_with_the_broker_still_down_keeps_the_job_owed(redis_url):
    from asgiref.sync import sync_to_async

    task_id = await stored(state=TaskState.SUBMITTED)
    past = timezone.now() - timedelta(seconds=1)
    await models.Task.objects.filter(pk=task_id).aupdate(handoff_deadline=past)
    with a2a(EXECUTION_BACKEND="celery"), celery_broker(dead_redis()):
        await sync_to_async(celery_backend.recover_lost_jobs)()
    row = await models.Task.objects.aget(pk=task_id)
    assert (row.handoff_deadline, row.handoffs) == (past, 0)  # due at the next sweep


def queued(redis_url: str, prefix: str) -> list[tuple[str, str]]:
    """(Celery task name, first argument) of every message waiting in the default queue."""
    with redis.Redis.from_url(redis_url) as client:
        raw = client.lrange(f"{prefix}{DEFAULT_QUEUE}", 0, -1)
    jobs = [msgspec.json.decode(item) for item in raw]
    return [(job["headers"]["task"], msgspec.json.decode(_body(job))[0][0]) for job in jobs]


async def test_an_event_owed_to_a_webhook_with_the_broker_down_is_delivered_later(
    rpc, redis_url, broker_prefix
):
    from asgiref.sync import sync_to_async

    from a2a_endpoint.testing import WebhookReceiver

    task_id = await stored(state=TaskState.INPUT_REQUIRED, history=2)
    push = {"PUSH_ALLOW_HTTP": True, "PUSH_ALLOW_PRIVATE_NETWORKS": True}
    with WebhookReceiver() as receiver:
        with a2a(EXECUTION_BACKEND="celery", **push), celery_broker(dead_redis()):
            await rpc.result(
                "CreateTaskPushNotificationConfig", {"taskId": task_id, "url": receiver.url()}
            )
            answer = await rpc.result("SendMessage", send("Ada", blocking=False, taskId=task_id))
        assert answer["task"]["status"]["state"] == "TASK_STATE_WORKING"  # answered, stored
        owed = models.PushDelivery.objects.filter(task_id=task_id)
        assert [row.state async for row in owed] == ["pending"]

        with a2a(EXECUTION_BACKEND="celery", **push), celery_broker(redis_url, broker_prefix):
            # Not overdue yet: its wake-up may still be on its way to a worker.
            assert await sync_to_async(celery_backend.sweep_push_deliveries)() == []
            long_ago = timezone.now() - timedelta(minutes=5)
            await owed.aupdate(next_attempt_at=long_ago)
            assert await sync_to_async(celery_backend.sweep_push_deliveries)() == [task_id]
            assert queued(redis_url, broker_prefix) == [(celery_backend.PUSH, task_id)]
            # What a worker taking that message does:
            await sync_to_async(celery_backend.deliver_push_notifications.run)(task_id)
        [delivered] = receiver.wait_for(1)
    assert delivered.task_id == task_id
    assert [row.state async for row in owed] == ["delivered"]


def test_push_deliveries_go_to_their_own_queue_when_one_is_named(redis_url, broker_prefix):
    with (
        a2a(EXECUTION_BACKEND="celery", PUSH_CELERY_QUEUE="a2a-push"),
        celery_broker(redis_url, broker_prefix),
    ):
        celery_backend._enqueue_push("t-1")
    with redis.Redis.from_url(redis_url) as client:
        [raw] = client.lrange(f"{broker_prefix}a2a-push", 0, -1)
        assert client.llen(f"{broker_prefix}{DEFAULT_QUEUE}") == 0
    assert msgspec.json.decode(raw)["headers"]["task"] == celery_backend.PUSH
