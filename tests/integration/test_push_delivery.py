"""Push deliveries on the production stack: a daphne and Celery workers of the sample
project on PostgreSQL and Redis, POSTing to a webhook receiver in this process.

The fault that matters: a worker SIGKILLed while a delivery is in flight. The delivery was
never marked delivered, so once the dead sender's lease lapses a live worker's sweeper hands
it to another sender, which sends it again, and every later event after it: nothing lost,
each config still in event order.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from a2a_endpoint.testing import WebhookReceiver
from tests.integration.servers import delete_redis_keys, run_django
from tests.integration.test_faults import Database, call, log_dir, web
from tests.integration.topology import CeleryWorker, send_params, topology_env, wait_until

pytestmark = pytest.mark.integration

JOB_LEASE = 3.0  # the workers' sweeper runs every JOB_LEASE / 2
PUSH_TIMEOUT = 2.0
PUSH_CONNECT_TIMEOUT = 1.0
#: A dead sender's lease: connect + total + 5 s (push.sender.lease_seconds).
PUSH_LEASE = PUSH_CONNECT_TIMEOUT + PUSH_TIMEOUT + 5.0
#: Redelivered within two leases and a sweep; the rest is slack for a loaded machine.
REDELIVERY_BOUND = 2 * PUSH_LEASE + JOB_LEASE + 20.0


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("push")


@pytest.fixture(scope="module")
def env(postgres_database_url: str, redis_url: str) -> Iterator[dict[str, str]]:
    pytest.importorskip("celery")
    prefix = f"a2a-push-{uuid.uuid4().hex[:12]}"
    values = {
        **topology_env(postgres_database_url, redis_url, prefix),
        "A2A_JOB_LEASE": str(JOB_LEASE),
        # The receiver is http on loopback.
        "A2A_PUSH_ALLOW_HTTP": "1",
        "A2A_PUSH_ALLOW_PRIVATE_NETWORKS": "1",
        "A2A_PUSH_TIMEOUT": str(PUSH_TIMEOUT),
        "A2A_PUSH_CONNECT_TIMEOUT": str(PUSH_CONNECT_TIMEOUT),
        "A2A_PUSH_RETRY_DELAY": "0.2",
    }
    run_django(["migrate", "--noinput"], values)
    yield values
    delete_redis_keys(redis_url, prefix)


@pytest.fixture(scope="module")
def db(postgres_database_url: str) -> Database:
    return Database(postgres_database_url)


@contextlib.contextmanager
def worker(env: dict[str, str], workdir: Path, name: str) -> Iterator[CeleryWorker]:
    process = CeleryWorker(name, env=env, log_dir=log_dir(workdir, name), concurrency=2)
    with process:
        yield process


def events_and_deliveries(db: Database, task_id: str) -> tuple[list[int], list[dict[str, Any]]]:
    import psycopg
    from psycopg.rows import dict_row

    with psycopg.connect(db.url, autocommit=True, row_factory=dict_row) as connection:
        events = connection.execute(
            "SELECT seq FROM a2a_endpoint_taskevent WHERE task_id = %s ORDER BY seq", [task_id]
        ).fetchall()
        deliveries = connection.execute(
            "SELECT seq, state, attempts FROM a2a_endpoint_pushdelivery"
            " WHERE task_id = %s ORDER BY seq",
            [task_id],
        ).fetchall()
    return [row["seq"] for row in events], deliveries


def all_delivered(db: Database, task_id: str) -> bool:
    events, deliveries = events_and_deliveries(db, task_id)
    return (
        bool(events)
        and [row["seq"] for row in deliveries] == events
        and all(row["state"] == "delivered" for row in deliveries)
    )


def test_every_event_reaches_the_webhook_through_a_celery_worker(
    env: dict[str, str], workdir: Path, db: Database
):
    with WebhookReceiver() as receiver, worker(env, workdir, "w-push"):
        with web("daphne-push", env, log_dir(workdir, "daphne-push")) as daphne:
            params = send_params("echo pushed", {}, blocking=True)
            params["configuration"]["taskPushNotificationConfig"] = {
                "url": receiver.url(),
                "authentication": {"scheme": "Bearer", "credentials": "it-secret"},
            }
            task = call(daphne, "SendMessage", params)["result"]["task"]
        wait_until(lambda: all_delivered(db, task["id"]), "every event to be delivered")
        events, _ = events_and_deliveries(db, task["id"])
        pushes = receiver.wait_for(len(events))
    assert [push.seq for push in pushes] == events
    assert {push.task_id for push in pushes} == {task["id"]}
    assert {push.headers["authorization"] for push in pushes} == {"Bearer it-secret"}
    assert pushes[-1].json["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_a_worker_killed_mid_delivery_loses_nothing(
    env: dict[str, str], workdir: Path, db: Database
):
    release = threading.Event()
    with WebhookReceiver() as receiver:
        receiver.answer_next(200, hold=release)  # the first POST hangs: a delivery in flight
        with web("daphne-kill", env, log_dir(workdir, "daphne-kill")) as daphne:
            with worker(env, workdir, "w-doomed") as doomed:
                params = send_params("echo survives", {}, blocking=True)
                params["configuration"]["taskPushNotificationConfig"] = {"url": receiver.url()}
                task = call(daphne, "SendMessage", params)["result"]["task"]
                [in_flight] = receiver.wait_for(1, timeout=30)
                assert in_flight.seq == 1
                assert doomed.process is not None
                os.killpg(doomed.process.pid, signal.SIGKILL)
                doomed.process.wait(15)
            release.set()  # the answer goes to a dead socket
            events, deliveries = events_and_deliveries(db, task["id"])
            assert deliveries[0]["state"] == "pending"  # never marked delivered
            with worker(env, workdir, "w-heir"):
                wait_until(
                    lambda: all_delivered(db, task["id"]),
                    "the deliveries of the killed worker to be sent by another",
                    timeout=REDELIVERY_BOUND,
                )
        events, _ = events_and_deliveries(db, task["id"])
        received = [push.seq for push in receiver.received]
    assert set(received) == set(events)  # nothing lost
    assert received.count(1) >= 2  # the one in flight, sent again
    resent = received[received.index(1, 1) :]
    assert resent == sorted(resent)  # after the kill, in event order again
