"""Guards against silent misdeployment: streams asked of a WSGI server, and an in-memory event
bus shared by several processes (system checks E040, W040, W041, E009; the runtime guards).

The runtime guard of streams runs through Django's sync test ``Client`` (the WSGI handler)
and a real ``manage.py runserver``; the memory bus's heartbeat through this process and two
real daphnes of the sample project sharing one SQLite file.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.checks import ERROR, WARNING
from django.core.checks.registry import registry
from django.test import AsyncClient, Client, override_settings
from django.utils import timezone

from a2a_endpoint import health, models
from a2a_endpoint.checks import check_deploy_guards, check_guards, check_settings
from a2a_endpoint.streaming import presence as presence_module
from a2a_endpoint.streaming.presence import presence
from a2a_endpoint.testing import jsonrpc_request, user_message
from a2a_endpoint.views import observed
from tests.integration.servers import (
    DaphneServer,
    ManagedProcess,
    free_port,
    http_ready,
    run_django,
)

UNSUPPORTED_OPERATION = -32004
A2A = {"A2A-Version": "1.0"}


def a2a(**overrides: Any) -> dict[str, Any]:
    return {**settings.A2A_ENDPOINT, **overrides}


# --- W040: streaming under a WSGI runserver -------------------------------------------------


def guard_ids(argv: list[str], monkeypatch: pytest.MonkeyPatch, **django: Any) -> list[str]:
    """The ids check_guards reports for this command line; each with a hint."""
    monkeypatch.setattr(sys, "argv", argv)
    with override_settings(**django):
        problems = check_guards()
    for problem in problems:
        assert problem.hint, problem
        assert problem.msg, problem
    return [problem.id for problem in problems]


def test_w040_runserver_is_wsgi(monkeypatch: pytest.MonkeyPatch) -> None:
    assert guard_ids(["manage.py", "runserver"], monkeypatch) == ["a2a_endpoint.W040"]
    with_staticfiles = [*settings.INSTALLED_APPS, "django.contrib.staticfiles"]
    assert guard_ids(
        ["manage.py", "runserver", "8001"], monkeypatch, INSTALLED_APPS=with_staticfiles
    ) == ["a2a_endpoint.W040"]


@pytest.fixture
def check_registry() -> Iterator[None]:
    """The registered checks, restored: daphne's app registers one of its own when it is
    installed (and it returns None, not a list, once daphne is gone from INSTALLED_APPS)."""
    registered = set(registry.registered_checks)
    deployment = set(registry.deployment_checks)
    yield
    registry.registered_checks = registered
    registry.deployment_checks = deployment


@pytest.mark.usefixtures("check_registry")
def test_w040_not_with_daphne_first_in_installed_apps(monkeypatch: pytest.MonkeyPatch) -> None:
    daphne_first = ["daphne", *settings.INSTALLED_APPS, "django.contrib.staticfiles"]
    assert guard_ids(["manage.py", "runserver"], monkeypatch, INSTALLED_APPS=daphne_first) == []
    # Daphne's runserver serving WSGI on request is WSGI all the same.
    assert guard_ids(
        ["manage.py", "runserver", "--noasgi"], monkeypatch, INSTALLED_APPS=daphne_first
    ) == ["a2a_endpoint.W040"]


def test_w040_only_for_runserver_with_streaming_on(monkeypatch: pytest.MonkeyPatch) -> None:
    assert guard_ids(["manage.py", "check"], monkeypatch) == []
    assert guard_ids(["daphne", "project.asgi:application"], monkeypatch) == []
    no_streams = a2a(STREAMING=False)
    assert guard_ids(["manage.py", "runserver"], monkeypatch, A2A_ENDPOINT=no_streams) == []


# --- the runtime guard: a stream asked through WSGI -----------------------------------------


def wsgi_post(method: str, params: Any, request_id: Any = 7) -> Any:
    """POST through Django's WSGI handler (the sync test Client builds WSGIRequests)."""
    return Client().post(
        "/a2a/", jsonrpc_request(method, params, request_id), "application/json", headers=A2A
    )


@pytest.fixture
def wsgi_log_once() -> Iterator[None]:
    observed._log_wsgi_once.cache_clear()  # a fresh process's "once"
    yield
    observed._log_wsgi_once.cache_clear()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("wsgi_log_once")
def test_streams_through_wsgi_answer_a_clear_error(caplog: pytest.LogCaptureFixture) -> None:
    """Not a 200 stream that ends after ``: stream opened``: -32004 naming the fix, nothing
    started, and one ERROR in the log however many streams are refused."""
    caplog.set_level(logging.ERROR, logger="a2a_endpoint")
    message = user_message("hello")
    answers = [
        wsgi_post("SendStreamingMessage", {"message": message}),
        wsgi_post("SubscribeToTask", {"id": str(uuid.uuid4())}, request_id="s"),
    ]
    for response, request_id in zip(answers, [7, "s"], strict=True):
        assert response.status_code == 200
        assert response["Content-Type"] == "application/json"
        answer = msgspec.json.decode(response.content)
        assert answer["id"] == request_id
        assert answer["error"]["code"] == UNSUPPORTED_OPERATION
        assert "needs an ASGI server (daphne)" in answer["error"]["message"]
        assert "runserver" in answer["error"]["message"]
    assert not models.Task.objects.filter(origin_message_id=message["messageId"]).exists()
    refusals = [r for r in caplog.records if r.name == "a2a_endpoint.views"]
    assert len(refusals) == 1
    assert refusals[0].levelno == logging.ERROR
    assert "'daphne' first in INSTALLED_APPS" in refusals[0].getMessage()


@pytest.mark.django_db(transaction=True)
def test_other_methods_through_wsgi_are_served() -> None:
    response = wsgi_post("SendMessage", {"message": user_message("hello")})
    answer = msgspec.json.decode(response.content)
    assert "error" not in answer, answer
    assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


@pytest.mark.django_db(transaction=True)
async def test_streams_through_asgi_are_served() -> None:
    response = await AsyncClient().post(
        "/a2a/",
        jsonrpc_request("SendStreamingMessage", {"message": user_message("hello")}),
        "application/json",
        headers=A2A,
    )
    assert response.status_code == 200
    assert response["Content-Type"] == "text/event-stream"
    body = b"".join([chunk async for chunk in response.streaming_content])
    assert b"TASK_STATE_COMPLETED" in body


def sample_project_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The sample project with no services (SQLite in ``tmp_path``), as ``make run`` has it."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DJANGO_", "A2A_", "DB_", "CELERY_", "DEMO_", "SERVER_"))
        and key not in {"DATABASE_URL", "REDIS_URL"}
    }
    db = str(tmp_path / "db.sqlite3")
    return {**env, "DJANGO_SETTINGS_MODULE": "project.settings", "A2A_DEMO_DB": db, **extra}


@pytest.mark.integration
def test_manage_py_runserver_warns_and_refuses_streams(tmp_path: Path) -> None:
    """The real thing: ``manage.py runserver`` (staticfiles' WSGI one) of the sample project."""
    env = {**sample_project_env(tmp_path), "PYTHONUNBUFFERED": "1"}
    run_django(["migrate", "--noinput"], env)
    port = free_port()
    command = [sys.executable, "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"]
    base = f"http://127.0.0.1:{port}"
    ready = http_ready(f"{base}/.well-known/agent-card.json")
    with ManagedProcess("runserver", command, env=env, ready=ready, log_dir=tmp_path) as server:
        request = urllib.request.Request(
            f"{base}/a2a/",
            json.dumps(
                jsonrpc_request("SendStreamingMessage", {"message": user_message("hi")})
            ).encode(),
            {"Content-Type": "application/json", **A2A},
        )
        with urllib.request.urlopen(request, timeout=20) as response:
            assert response.headers["Content-Type"] == "application/json"
            answer = json.loads(response.read())
        assert answer["error"]["code"] == UNSUPPORTED_OPERATION
        log = server.log_text()
    assert "a2a_endpoint.W040" in log
    assert "A stream was requested through WSGI and refused" in log


# --- E040: MEMORY_BUS_HEARTBEAT -------------------------------------------------------------


@pytest.mark.parametrize("value", [-1, "10", True, [1]])
def test_e040_heartbeat_must_be_seconds(value: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    problems = [
        p.id
        for p in _checks(monkeypatch, A2A_ENDPOINT=a2a(MEMORY_BUS_HEARTBEAT=value))
        if p.level == ERROR
    ]
    assert problems == ["a2a_endpoint.E040"]


@pytest.mark.parametrize("value", [0, 0.5, 10])
def test_e040_accepts_seconds_and_zero(value: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _checks(monkeypatch, A2A_ENDPOINT=a2a(MEMORY_BUS_HEARTBEAT=value)) == []


def _checks(monkeypatch: pytest.MonkeyPatch, **django: Any) -> list[Any]:
    monkeypatch.setattr(sys, "argv", ["manage.py", "check"])
    with override_settings(**django):
        problems = check_guards()
    assert all(p.hint for p in problems)
    return problems


# --- W041 and E009: an in-process bus where processes are several ---------------------------


def deploy_ids(**django: Any) -> list[str]:
    with override_settings(**django):
        problems = check_deploy_guards()
    for problem in problems:
        assert problem.level == WARNING, problem
        assert problem.hint, problem
    return [problem.id for problem in problems]


def test_w041_memory_bus_in_production_is_flagged_by_check_deploy() -> None:
    assert deploy_ids(DEBUG=False, A2A_ENDPOINT=a2a(EVENT_BUS="memory")) == ["a2a_endpoint.W041"]
    in_memory_layer = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    assert deploy_ids(
        DEBUG=False, CHANNEL_LAYERS=in_memory_layer, A2A_ENDPOINT=a2a(EVENT_BUS="channels")
    ) == ["a2a_endpoint.W041"]


def test_w041_not_with_a_redis_bus_debug_or_celery() -> None:
    redis_layer = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer"}}
    channels = a2a(EVENT_BUS="channels")
    assert deploy_ids(DEBUG=False, CHANNEL_LAYERS=redis_layer, A2A_ENDPOINT=channels) == []
    assert deploy_ids(DEBUG=True, A2A_ENDPOINT=a2a(EVENT_BUS="memory")) == []
    # Celery with the memory bus is an error already, E009: not reported twice.
    celery = a2a(EVENT_BUS="memory", EXECUTION_BACKEND="celery")
    assert deploy_ids(DEBUG=False, A2A_ENDPOINT=celery) == []
    with override_settings(DEBUG=False, A2A_ENDPOINT=celery):
        assert "a2a_endpoint.E009" in [problem.id for problem in check_settings()]


# --- the memory bus's heartbeat in this process ---------------------------------------------


@pytest.fixture
def heartbeat() -> Iterator[float]:
    """A short heartbeat with the memory bus, and a process whose "once" is still to come."""
    with override_settings(A2A_ENDPOINT=a2a(EVENT_BUS="memory", MEMORY_BUS_HEARTBEAT=0.2)):
        presence._warned = False
        yield 0.2
    presence._warned = False


@sync_to_async
def other_process(seen_ago: float = 0.0, **fields: Any) -> models.ServerProcess:
    now = timezone.now()
    values = {
        "host": "elsewhere",
        "pid": 4242,
        "started_at": now - timedelta(minutes=5),
        "seen_at": now - timedelta(seconds=seen_ago),
        **fields,
    }
    return models.ServerProcess.objects.create(id=uuid.uuid4(), **values)


@sync_to_async
def rows() -> dict[uuid.UUID, models.ServerProcess]:
    return {row.id: row for row in models.ServerProcess.objects.all()}


async def get_health() -> tuple[int, dict[str, str]]:
    from django.test import AsyncRequestFactory

    response = await health.healthz(AsyncRequestFactory().get("/healthz"))
    return response.status_code, msgspec.json.decode(response.content)


@pytest.mark.django_db(transaction=True)
async def test_a_second_live_process_is_logged_once_and_reported_by_health(
    heartbeat: float, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="a2a_endpoint.streaming")
    other = await other_process()
    status, body = await get_health()
    assert status == 200
    assert body["status"] == "degraded"
    assert body["event_bus"] == "memory bus shared by 2 processes: streams will miss events"
    assert (body["database"], body["channel_layer"], body["broker"]) == (
        "ok",
        "not configured",
        "not configured",
    )
    mine = [row for row in (await rows()).values() if row.id != other.id]
    assert [(row.host, row.pid) for row in mine] == [
        (presence_module.socket.gethostname(), os.getpid())
    ]
    # Later beats find it again, and say nothing more.
    presence.reset()
    (again,) = await presence.beat()
    assert again.startswith("elsewhere pid 4242, seen ")
    errors = [r for r in caplog.records if r.name == "a2a_endpoint.streaming"]
    assert len(errors) == 1
    assert errors[0].levelno == logging.ERROR
    assert "EVENT_BUS is 'memory', but 1 other process(es)" in errors[0].getMessage()


@pytest.mark.django_db(transaction=True)
async def test_processes_gone_are_not_counted(heartbeat: float) -> None:
    """Silent for three intervals, or on this host (and PID namespace) with its pid gone."""
    silent = await other_process(seen_ago=3 * heartbeat + 1)
    dead_pid = _exited_pid()
    local = {
        "host": presence_module.socket.gethostname(),
        "pid_namespace": presence_module._pid_namespace(),
    }
    dead = await other_process(pid=dead_pid, **local)
    alive = await other_process(pid=os.getppid(), **local)  # our parent: alive
    status, body = await get_health()
    assert (status, body["event_bus"]) == (
        200,
        "memory bus shared by 2 processes: streams will miss events",
    )
    left = await rows()
    assert silent.id not in left
    assert dead.id not in left
    assert alive.id in left


def _exited_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()  # reaped: no process has this pid (until the kernel hands it out again)
    return process.pid


@pytest.mark.django_db(transaction=True)
async def test_at_most_one_heartbeat_an_interval(heartbeat: float) -> None:
    await presence.beat()
    (first,) = (await rows()).values()
    for _ in range(5):
        await presence.beat()
    (again,) = (await rows()).values()
    assert again.seen_at == first.seen_at  # no write within the interval
    deadline = time.monotonic() + 5
    while (await rows())[first.id].seen_at == first.seen_at:
        assert time.monotonic() < deadline, "no heartbeat after the interval"
        await presence.beat()
    assert (await get_health())[1]["status"] == "ok"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "overrides",
    [
        {"EVENT_BUS": "memory", "MEMORY_BUS_HEARTBEAT": 0},
        {"EVENT_BUS": "a2a_endpoint.streaming.bus.ChannelLayerEventBus"},
    ],
)
async def test_no_heartbeat_when_off_or_with_another_bus(overrides: dict[str, Any]) -> None:
    with override_settings(A2A_ENDPOINT=a2a(**overrides)):
        await other_process()
        assert await presence.beat() == []
        assert len(await rows()) == 1  # only the other one: this process wrote nothing


# --- two daphnes of the sample project on one SQLite file -----------------------------------


def probe(server: DaphneServer) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(server.url("/healthz"), timeout=15) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as error:
        return {"http": error.code, **json.loads(error.read())}


def process_rows(db: Path) -> list[int]:
    with sqlite3.connect(db) as connection:
        return [pid for (pid,) in connection.execute("SELECT pid FROM a2a_endpoint_serverprocess")]


def wait_for(condition: Any, what: str, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)  # a poll interval, bounded by the deadline
    return value


@pytest.mark.integration
def test_two_daphnes_with_a_memory_bus_notice_each_other(tmp_path: Path) -> None:
    env = sample_project_env(tmp_path, DJANGO_SETTINGS_MODULE="tests.integration.presence_settings")
    db = Path(env["A2A_DEMO_DB"])
    run_django(["migrate", "--noinput"], env)
    app = "project.asgi:application"
    with DaphneServer(app, env=env, name="daphne-a", log_dir=tmp_path) as first:
        assert probe(first)["status"] == "ok"
        with DaphneServer(app, env=env, name="daphne-b", log_dir=tmp_path) as second:
            probe(first)  # a heartbeat of the first if one is due (it is live either way)
            shared = "memory bus shared by 2 processes: streams will miss events"
            answer = probe(second)
            assert (answer["status"], answer.get("event_bus")) == ("degraded", shared)
            # The first notices at its next heartbeat, within an interval.
            wait_for(lambda: probe(first).get("event_bus") == shared, "the first to notice")
            for server in (first, second):
                assert "EVENT_BUS is 'memory', but 1 other process(es)" in server.log_text()
            assert len(process_rows(db)) == 2
        # A clean stop (SIGTERM) takes its row along at once.
        assert process_rows(db) == [first.process.pid]
        wait_for(lambda: probe(first)["status"] == "ok", "the first to see it alone again")
        assert "event_bus" not in probe(first)
