"""Webhook deliveries on the inline backend, to a real HTTP receiver on loopback: content and
headers, order per config, retries, dead letters, redirects, the SSRF guard at delivery,
deleted configs, the sweep for lost senders, and no secret in a log line or an error."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from a2a.types import a2a_pb2 as pb
from asgiref.sync import sync_to_async
from django.utils import timezone
from google.protobuf import json_format

from a2a_endpoint import models
from a2a_endpoint.execution import runtime
from a2a_endpoint.testing import WebhookReceiver, user_message
from tests.service.builders import a2a_settings, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

TOKEN = "tok-4f1e9"
CREDENTIALS = "cred-8c2d7a"
FAST = {
    "PUSH_ALLOW_HTTP": True,
    "PUSH_ALLOW_PRIVATE_NETWORKS": True,
    "PUSH_RETRY_DELAY": 0.05,
    "PUSH_RETRY_MAX_DELAY": 0.2,
    "PUSH_CONNECT_TIMEOUT": 1.0,
    "PUSH_TIMEOUT": 2.0,
    "PUSH_MAX_ATTEMPTS": 3,
}


@pytest.fixture(autouse=True)
def _fast_pushes() -> Iterator[None]:
    with a2a_settings(**FAST):
        yield


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with WebhookReceiver() as running:
        yield running


def inline_config(receiver: WebhookReceiver, **fields: Any) -> dict[str, Any]:
    return {
        "url": receiver.url(),
        "token": TOKEN,
        "authentication": {"scheme": "Bearer", "credentials": CREDENTIALS},
        **fields,
    }


async def send(rpc, text: str, *configs: dict[str, Any], **fields: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"message": user_message(text, **fields)}
    if configs:
        params["configuration"] = {"taskPushNotificationConfig": configs[0]}
    return (await rpc.result("SendMessage", params))["task"]


@sync_to_async
def events_of(task_id: str) -> list[models.TaskEvent]:
    return list(models.TaskEvent.objects.filter(task_id=task_id).order_by("seq"))


@sync_to_async
def deliveries_of(task_id: str) -> list[models.PushDelivery]:
    return list(models.PushDelivery.objects.filter(task_id=task_id).order_by("config_id", "seq"))


async def settled(task_id: str) -> list[models.PushDelivery]:
    """The task's deliveries once none is pending (deadline-bound)."""

    async def done() -> bool:
        rows = await deliveries_of(task_id)
        return bool(rows) and all(row.state != "pending" for row in rows)

    await wait_for(done)
    return await deliveries_of(task_id)


# --- what is sent ------------------------------------------------------------------------------


async def test_every_event_is_posted_as_a_stream_response_with_its_headers(rpc, receiver):
    task = await send(rpc, "echo hi", inline_config(receiver))
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    events = await events_of(task["id"])
    assert len(events) >= 4  # the Task, working, the artifact, completed
    pushes = receiver.wait_for(len(events))
    assert [push.seq for push in pushes] == [event.seq for event in events]
    for push, event in zip(pushes, events, strict=True):
        assert push.path == "/webhook"
        assert push.headers["content-type"] == "application/a2a+json"
        assert push.headers["authorization"] == f"Bearer {CREDENTIALS}"
        assert push.headers["x-a2a-notification-token"] == TOKEN
        assert push.headers["x-a2a-task-id"] == task["id"]
        assert push.headers["x-a2a-delivery-attempt"] == "1"
        assert push.json == event.payload
        json_format.ParseDict(push.json, pb.StreamResponse())  # the official type takes it
    assert next(iter(pushes[0].json)) == "task"
    assert pushes[-1].json["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    rows = await settled(task["id"])
    assert {(row.state, row.attempts, row.last_status) for row in rows} == {("delivered", 1, 200)}


async def test_no_authorization_or_token_header_when_the_config_has_none(rpc, receiver):
    task = await send(rpc, "noop", {"url": receiver.url()})
    [first, *_] = receiver.wait_for(1)
    assert "authorization" not in first.headers
    assert "x-a2a-notification-token" not in first.headers
    assert first.task_id == task["id"]


async def test_a_config_created_later_gets_only_the_later_events(rpc, receiver):
    asked = await send(rpc, "ask")
    assert asked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    before = len(await events_of(asked["id"]))
    await rpc.result(
        "CreateTaskPushNotificationConfig", {"taskId": asked["id"], "url": receiver.url()}
    )
    await send(rpc, "Ada", taskId=asked["id"])
    rows = await settled(asked["id"])
    assert [row.seq for row in rows] == list(
        range(before + 1, len(await events_of(asked["id"])) + 1)
    )
    assert sorted(push.seq for push in receiver.wait_for(len(rows))) == [row.seq for row in rows]


async def test_each_config_gets_the_events_in_order(rpc, receiver):
    with WebhookReceiver() as other:
        asked = await send(rpc, "ask", {"url": receiver.url(), "id": "one"})
        await rpc.result(
            "CreateTaskPushNotificationConfig",
            {"taskId": asked["id"], "url": other.url(), "id": "two"},
        )
        await send(rpc, "hold g0 burst 30", taskId=asked["id"])  # gate unopened: see below
        from tests.agents import gate

        gate("g0").set()
        rows = await settled(asked["id"])
        events = await events_of(asked["id"])
        first = [push.seq for push in receiver.wait_for(len(events))]
        second = [push.seq for push in other.wait_for(len(events) - 2)]
    assert first == [event.seq for event in events]
    assert second == [event.seq for event in events][2:]  # configs see events in seq order
    assert all(row.state == "delivered" for row in rows)


# --- retries and dead letters --------------------------------------------------------------


async def test_a_failing_receiver_is_retried_until_it_recovers(rpc, receiver):
    receiver.answer_next(503, times=1)
    receiver.answer_next(429, headers={"Retry-After": "0"})
    task = await send(rpc, "noop", inline_config(receiver))
    rows = await settled(task["id"])
    first = rows[0]
    assert (first.seq, first.state, first.attempts, first.last_status) == (1, "delivered", 3, 200)
    pushes = receiver.wait_for(len(rows) + 2)
    assert [push.seq for push in pushes[:3]] == [1, 1, 1]  # later events waited their turn
    assert [push.headers["x-a2a-delivery-attempt"] for push in pushes[:3]] == ["1", "2", "3"]
    assert [push.seq for push in pushes[3:]] == [row.seq for row in rows[1:]]


async def test_after_the_last_try_it_is_a_dead_letter_and_the_next_event_goes(rpc, receiver):
    receiver.answer_next(500, times=3)
    task = await send(rpc, "noop", inline_config(receiver))
    rows = await settled(task["id"])
    dead, *rest = rows
    assert (dead.seq, dead.state, dead.attempts, dead.last_status) == (1, "dead", 3, 500)
    assert "HTTP 500" in dead.last_error
    assert rest
    assert all(row.state == "delivered" for row in rest)


@pytest.mark.parametrize("status", [400, 401, 404, 410])
async def test_a_client_error_is_dead_at_once(rpc, receiver, status):
    receiver.answer_next(status)
    task = await send(rpc, "noop", inline_config(receiver))
    dead = (await settled(task["id"]))[0]
    assert (dead.state, dead.attempts, dead.last_status) == ("dead", 1, status)


async def test_a_redirect_is_not_followed(rpc, receiver):
    with WebhookReceiver() as elsewhere:
        receiver.answer_next(307, headers={"Location": elsewhere.url("/private")})
        task = await send(rpc, "noop", inline_config(receiver))
        dead = (await settled(task["id"]))[0]
        assert elsewhere.received == []
    assert (dead.state, dead.last_status) == ("dead", 307)
    assert "redirects are not followed" in dead.last_error


async def test_a_receiver_that_does_not_answer_in_time_is_retried(rpc, receiver):
    release = threading.Event()
    receiver.answer_next(200, hold=release)
    try:
        with a2a_settings(**{**FAST, "PUSH_TIMEOUT": 0.5}):
            task = await send(rpc, "noop", inline_config(receiver))
            rows = await settled(task["id"])
    finally:
        release.set()
    assert rows[0].state == "delivered"
    assert rows[0].attempts == 2


# --- the SSRF guard at delivery ---------------------------------------------------------------


async def test_a_url_refused_at_delivery_is_dead_and_never_called(rpc, receiver):
    task = await send(rpc, "ask", {"url": receiver.url()})
    await settled(task["id"])
    sent = len(receiver.received)
    with a2a_settings(**{**FAST, "PUSH_ALLOW_PRIVATE_NETWORKS": False}):
        await send(rpc, "Ada", taskId=task["id"])
        rows = await settled(task["id"])
    later = [row for row in rows if row.state == "dead"]
    assert later
    assert all("loopback" in row.last_error and row.attempts == 0 for row in later)
    assert len(receiver.received) == sent


# --- configs going away, lost senders -----------------------------------------------------------


async def test_a_deleted_config_is_owed_nothing_more(rpc, receiver):
    asked = await send(rpc, "ask", {"url": receiver.url(), "id": "c"})
    await settled(asked["id"])
    await rpc.result("DeleteTaskPushNotificationConfig", {"taskId": asked["id"], "id": "c"})
    sent = len(receiver.received)
    await send(rpc, "Ada", taskId=asked["id"])
    assert await deliveries_of(asked["id"]) == []
    assert len(receiver.received) == sent


async def test_turned_off_no_delivery_is_owed(rpc, receiver):
    asked = await send(rpc, "ask", {"url": receiver.url()})
    await settled(asked["id"])
    count = len(await deliveries_of(asked["id"]))
    with a2a_settings(**{**FAST, "PUSH_NOTIFICATIONS": False}):
        await send(rpc, "Ada", taskId=asked["id"])
    assert len(await deliveries_of(asked["id"])) == count


@sync_to_async
def orphan_delivery(receiver: WebhookReceiver) -> str:
    """A task owing event 1 to a config whose sender died long ago (its lease lapsed)."""
    from tests.service.builders import stored_task

    task_id = stored_task()
    config = models.PushNotificationConfig.objects.create(
        task_id=task_id,
        config_id="lost",
        url=receiver.url(),
        sending_until=timezone.now() - timedelta(seconds=1),
    )
    long_ago = timezone.now() - timedelta(minutes=5)
    models.PushDelivery.objects.create(
        config=config,
        task_id=task_id,
        seq=1,
        next_attempt_at=long_ago,
        give_up_at=timezone.now() + timedelta(days=1),
        created_at=long_ago,
    )
    return task_id


async def test_the_inline_sweep_sends_what_a_lost_sender_left(receiver):
    task_id = await orphan_delivery(receiver)
    with a2a_settings(**{**FAST, "PUSH_SWEEP_INTERVAL": 0.1}):
        runtime.get_backend()  # the sweep starts with the backend
        [push] = receiver.wait_for(1)
        rows = await settled(task_id)
    assert (push.task_id, push.seq) == (task_id, 1)
    assert [row.state for row in rows] == ["delivered"]


async def test_a_held_lease_keeps_a_second_sender_out(receiver):
    task_id = await orphan_delivery(receiver)
    config = await models.PushNotificationConfig.objects.aget(task_id=task_id)
    store = runtime.get_store()
    assert await sync_to_async(store.lease_owed_push_configs)(task_id, 60) == [config.pk]
    from a2a_endpoint.push.sender import deliver_task

    assert await sync_to_async(deliver_task)(store, task_id) is None
    assert receiver.received == []
    await sync_to_async(store.release_push_config)(config.pk)
    await sync_to_async(deliver_task)(store, task_id)
    assert [push.seq for push in receiver.wait_for(1)] == [1]


# --- secrets ----------------------------------------------------------------------------------


async def test_no_secret_reaches_a_log_line_or_an_error(rpc, receiver, caplog):
    receiver.answer_next(500, times=3)
    with caplog.at_level(logging.DEBUG, logger="a2a_endpoint"):
        task = await send(rpc, "noop", inline_config(receiver))
        rows = await settled(task["id"])
    assert any(record.name == "a2a_endpoint.push" for record in caplog.records)
    for secret in (TOKEN, CREDENTIALS):
        assert secret not in caplog.text
        assert all(secret not in row.last_error for row in rows)


class DrippingWebhook:
    """A webhook that answers its status line, then one header byte every 0.1 s (for up to
    ``seconds``): each read gets a byte well within any read timeout, the answer never ends."""

    def __init__(self, seconds: float = 15.0) -> None:
        import socket

        self.seconds = seconds
        self.server = socket.create_server(("127.0.0.1", 0))
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.getsockname()[1]}/drip"

    def _serve(self) -> None:
        self.server.settimeout(0.1)
        while not self.stop.is_set():
            try:
                connection, _ = self.server.accept()
            except OSError:
                continue
            threading.Thread(target=self._drip, args=(connection,), daemon=True).start()

    def _drip(self, connection: Any) -> None:
        with connection:
            connection.recv(65536)
            connection.sendall(b"HTTP/1.1 200 OK\r\nX-Slow: ")
            for _ in range(int(self.seconds / 0.1)):
                if self.stop.wait(0.1):
                    return
                try:
                    connection.sendall(b"a")
                except OSError:
                    return

    def close(self) -> None:
        self.stop.set()
        self.server.close()
        self.thread.join(5)


async def test_a_webhook_that_answers_a_byte_at_a_time_is_cut_off_at_the_total_timeout(rpc):
    import time

    dripping = DrippingWebhook()
    try:
        with a2a_settings(**{**FAST, "PUSH_TIMEOUT": 1.0, "PUSH_MAX_ATTEMPTS": 1}):
            began = time.monotonic()
            task = await send(rpc, "noop", {"url": dripping.url()})
            rows = await settled(task["id"])
            took = time.monotonic() - began
    finally:
        dripping.close()
    assert rows[0].state == "dead"
    assert "PUSH_TIMEOUT" in rows[0].last_error
    assert took < 10  # the drip lasts 15 s: only the total timeout ends it sooner


async def test_a_sender_renews_its_lease_before_a_try_once_half_of_it_is_gone(receiver):
    import time

    from a2a_endpoint.push import sender

    task_id = await orphan_delivery(receiver)
    store = runtime.get_store()
    [config_pk] = await sync_to_async(store.lease_owed_push_configs)(task_id, 1)  # 1 s only
    release = threading.Event()
    receiver.answer_next(200, hold=release)
    long_ago = time.monotonic() - 3600  # taken an hour ago, as far as the sender knows
    sending = asyncio.ensure_future(
        sync_to_async(sender._deliver_leased, thread_sensitive=False)(store, config_pk, long_ago)
    )
    try:
        # The try is under way: its lease was renewed before it.
        await sync_to_async(receiver.wait_for, thread_sensitive=False)(1)
        config = await models.PushNotificationConfig.objects.aget(pk=config_pk)
        left = (config.sending_until - timezone.now()).total_seconds()
        assert left > 2 * sender.lease_seconds() / 3  # a whole lease again, not the 1 s taken
    finally:
        release.set()
        await sending
    assert [row.state for row in await settled(task_id)] == ["delivered"]
