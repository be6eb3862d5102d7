"""``a2a_endpoint.health.healthz`` in this process: database, channel layer and broker.

PostgreSQL and Redis are the test run's real servers; "down" is a loopback port nothing
listens on, and "hanging" a socket that accepts connections and never answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
import uuid
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest
import redis
from celery import Celery
from django.conf import settings
from django.db import OperationalError
from django.test import AsyncRequestFactory, override_settings

from a2a_endpoint import health
from a2a_endpoint.execution import runtime
from tests.integration.servers import free_port

REDIS_URL = os.environ.get("A2A_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
#: What a probe may take beyond CHECK_TIMEOUT (scheduling, the test's own work).
SLACK = 1.5

ALL_OK = {"status": "ok", "database": "ok"}


@pytest.fixture(scope="module")
def redis_url() -> str:
    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2, socket_timeout=2)
    try:
        client.ping()
    except redis.RedisError as exc:
        if os.environ.get("A2A_REQUIRE_SERVICES") == "1":
            pytest.fail(f"Redis is not reachable at {REDIS_URL}: {exc}", pytrace=False)
        pytest.skip(f"Redis is not reachable at {REDIS_URL}: {exc}")
    finally:
        client.close()
    return REDIS_URL


@pytest.fixture
def short_timeout(monkeypatch: pytest.MonkeyPatch) -> float:
    """Each check's bound, shortened so the tests that wait it out stay quick."""
    monkeypatch.setattr(health, "CHECK_TIMEOUT", 1.0)
    return 1.0


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A loopback port that accepts connections (the kernel's backlog) and never answers."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield listener.getsockname()[1]


async def get_health() -> tuple[int, dict[str, str]]:
    response = await health.healthz(AsyncRequestFactory().get("/healthz"))
    assert response["Content-Type"] == "application/json"
    assert "no-cache" in response["Cache-Control"]
    return response.status_code, msgspec.json.decode(response.content)


def redis_layer(url: str) -> dict[str, Any]:
    return {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [{"address": url, "socket_timeout": None}]},
        }
    }


@contextlib.contextmanager
def celery_backend(broker_url: str) -> Iterator[Celery]:
    """The Celery execution backend, its app's broker at ``broker_url``."""
    from celery import _state

    # The default app too: the broker check connects from a worker thread, where the
    # current app is the default one.
    previous = _state.default_app, _state.get_current_app()
    app = Celery("a2a-health-tests", broker=broker_url, set_as_current=True)
    app.set_default()
    a2a = {**settings.A2A_ENDPOINT, "EXECUTION_BACKEND": "celery"}
    try:
        with override_settings(A2A_ENDPOINT=a2a):
            yield app
    finally:
        app.close()
        _state.default_app = previous[0]
        previous[1].set_current()


# --- database and channel layer -------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
async def test_health_without_a_channel_layer_or_broker() -> None:
    assert await get_health() == (
        200,
        {**ALL_OK, "channel_layer": "not configured", "broker": "not configured"},
    )


@pytest.mark.django_db(transaction=True)
async def test_health_with_a_redis_channel_layer(redis_url: str) -> None:
    with override_settings(CHANNEL_LAYERS=redis_layer(redis_url)):
        assert await get_health() == (
            200,
            {**ALL_OK, "channel_layer": "ok", "broker": "not configured"},
        )


@pytest.mark.django_db(transaction=True)
async def test_health_stays_ok_while_the_event_bus_reads_the_channel_layer(redis_url: str) -> None:
    """The bus's reader holds channels_redis' receive lock of this process for good (it
    waits in BZPOPMIN on its own channel): a health check receiving on a channel of its own
    never got the lock, and every probe after the first blocking SendMessage was a 503."""
    a2a = {**settings.A2A_ENDPOINT, "EVENT_BUS": "channels"}
    with override_settings(CHANNEL_LAYERS=redis_layer(redis_url), A2A_ENDPOINT=a2a):
        bus = runtime.get_event_bus()
        async with bus.watch_settled(str(uuid.uuid4())):  # a blocking SendMessage's wait
            for _ in range(3):
                status, body = await get_health()
                assert (status, body["channel_layer"]) == (200, "ok")
        assert len(bus.resident_tasks(asyncio.get_running_loop())) == 1  # the reader stays
        assert (await get_health())[0] == 200


@pytest.mark.django_db(transaction=True)
async def test_health_503_when_redis_is_unreachable() -> None:
    with override_settings(CHANNEL_LAYERS=redis_layer(f"redis://127.0.0.1:{free_port()}/0")):
        assert await get_health() == (
            503,
            {
                "status": "error",
                "database": "ok",
                "channel_layer": "error",
                "broker": "not configured",
            },
        )


@pytest.mark.django_db(transaction=True)
async def test_health_503_when_the_database_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken() -> None:
        raise OperationalError("connection refused")

    monkeypatch.setattr(health, "_select_one", broken)
    assert await get_health() == (
        503,
        {
            "status": "error",
            "database": "error",
            "channel_layer": "not configured",
            "broker": "not configured",
        },
    )


async def test_health_refuses_post() -> None:
    response = await health.healthz(AsyncRequestFactory().post("/healthz"))
    assert response.status_code == 405


# --- the Celery broker ----------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
async def test_broker_ok_with_the_celery_backend_and_its_redis(redis_url: str) -> None:
    with celery_backend(redis_url):
        assert await get_health() == (
            200,
            {**ALL_OK, "channel_layer": "not configured", "broker": "ok"},
        )


@pytest.mark.django_db(transaction=True)
async def test_broker_down_is_a_503_naming_it(
    short_timeout: float, caplog: pytest.LogCaptureFixture
) -> None:
    with celery_backend(f"redis://127.0.0.1:{free_port()}/0"):
        started = time.monotonic()
        status, body = await get_health()
        took = time.monotonic() - started
    assert (status, body) == (
        503,
        {"status": "error", "database": "ok", "channel_layer": "not configured", "broker": "error"},
    )
    assert took < short_timeout + SLACK
    # The details go to the log, not to the client.
    assert "the broker did not answer" in caplog.text
    assert "Connection refused" in caplog.text
    assert "refused" not in str(body)


@pytest.mark.django_db(transaction=True)
async def test_a_hanging_broker_is_a_503_within_the_timeout(
    short_timeout: float, silent_port: int
) -> None:
    with celery_backend(f"redis://127.0.0.1:{silent_port}/0"):
        started = time.monotonic()
        status, body = await get_health()
        took = time.monotonic() - started
    assert (status, body["broker"]) == (503, "error")
    assert short_timeout * 0.9 <= took < short_timeout + SLACK


@pytest.mark.django_db(transaction=True)
async def test_checks_run_concurrently_and_off_the_event_loop(
    short_timeout: float, silent_port: int
) -> None:
    """A hanging broker and a hanging channel layer: one timeout in all, not two, and the
    loop serves other work meanwhile (kombu connects in a thread)."""
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.05)
            ticks += 1

    silent = f"redis://127.0.0.1:{silent_port}/0"
    with celery_backend(silent), override_settings(CHANNEL_LAYERS=redis_layer(silent)):
        beat = asyncio.create_task(ticker())
        started = time.monotonic()
        status, body = await get_health()
        took = time.monotonic() - started
        beat.cancel()
    assert (status, body["broker"], body["channel_layer"]) == (503, "error", "error")
    assert took < 2 * short_timeout
    assert ticks >= int(short_timeout / 0.05) // 2  # the loop kept running through it
