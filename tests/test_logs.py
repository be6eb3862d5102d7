"""Structured logs: request ids, access lines, job lines, the log context and JSON output."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest
from django.conf import settings
from django.core.checks import Error, Warning
from django.test import AsyncClient, override_settings

from a2a_endpoint import errors, logs, types
from a2a_endpoint.checks import check_settings
from a2a_endpoint.service import RequestHandler
from a2a_endpoint.testing import jsonrpc_request, user_message
from tests.streaming.client import SseStream

HEX_ID = re.compile(r"[0-9a-f]{32}")
REPO_ROOT = Path(__file__).resolve().parents[1]
DEADLINE = 10.0


def a2a_settings(**overrides: Any) -> dict[str, Any]:
    return {**settings.A2A_ENDPOINT, **overrides}


class Captured:
    """What a project's handler (the context filter, the JSON formatter) wrote."""

    def __init__(self, stream: io.StringIO) -> None:
        self.stream = stream

    def lines(self) -> list[dict[str, Any]]:
        # Each line is one JSON object: json.loads fails on anything else.
        return [json.loads(line) for line in self.stream.getvalue().splitlines()]

    def on(self, logger: str) -> list[dict[str, Any]]:
        return [line for line in self.lines() if line["logger"] == logger]

    def access(self) -> list[dict[str, Any]]:
        return self.on("a2a_endpoint.requests")

    async def wait_for(self, logger: str, count: int) -> list[dict[str, Any]]:
        """The lines of ``logger`` once there are ``count`` (jobs end in another thread)."""
        deadline = time.monotonic() + DEADLINE
        while len(found := self.on(logger)) < count:
            assert time.monotonic() < deadline, self.lines()
            await asyncio.sleep(0.01)
        return found


def _handler(output: str | None) -> logging.Handler:
    handler = logging.StreamHandler(io.StringIO())
    handler.addFilter(logs.ContextFilter())
    handler.setFormatter(logs.Formatter(output=output))
    return handler


@pytest.fixture
def captured():
    handler = _handler("json")
    logger = logging.getLogger("a2a_endpoint")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield Captured(handler.stream)  # type: ignore[attr-defined]
    logger.removeHandler(handler)
    logger.setLevel(level)


async def post(client: AsyncClient, body: Any, **headers: str) -> Any:
    return await client.post(
        "/a2a/", msgspec.json.encode(body), content_type="application/json", headers=headers
    )


# --- The access line ---------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
async def test_a_request_logs_one_access_line_with_a_generated_id(captured):
    response = await post(AsyncClient(), jsonrpc_request("GetTask", {"id": "t-1"}))
    request_id = response["X-Request-ID"]
    assert HEX_ID.fullmatch(request_id)
    [line] = captured.access()
    assert line["request_id"] == request_id
    assert line["method"] == "GetTask"
    assert line["task_id"] == "t-1"
    assert line["outcome"] == "error"
    assert line["code"] == -32001
    assert line["status"] == 200
    assert line["caller"] == "anonymous"
    assert line["level"] == "INFO"
    assert isinstance(line["duration_ms"], float)
    assert line["message"].startswith("GetTask error -32001 200 ")


@pytest.mark.django_db(transaction=True)
async def test_the_clients_request_id_is_used_and_echoed(captured):
    response = await post(
        AsyncClient(), jsonrpc_request("ListTasks", {}), **{"X-Request-ID": "req-42:abc"}
    )
    assert response["X-Request-ID"] == "req-42:abc"
    [line] = captured.access()
    assert line["request_id"] == "req-42:abc"
    assert line["method"] == "ListTasks"
    assert line["outcome"] == "ok"
    assert "code" not in line


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "given", ["x" * 129, "two words", "id\nINFO forged line", "<script>", "é-accent"]
)
async def test_an_oversized_or_garbage_request_id_is_replaced(captured, given):
    response = await post(
        AsyncClient(), jsonrpc_request("GetTask", {"id": "t"}), **{"X-Request-ID": given}
    )
    request_id = response["X-Request-ID"]
    assert HEX_ID.fullmatch(request_id)
    [line] = captured.access()
    assert line["request_id"] == request_id
    assert given not in captured.stream.getvalue()


@pytest.mark.django_db(transaction=True)
@override_settings(A2A_ENDPOINT=a2a_settings(REQUEST_ID_HEADER="X-Correlation-ID"))
async def test_the_request_id_header_is_a_setting(captured):
    response = await post(
        AsyncClient(),
        jsonrpc_request("GetTask", {"id": "t"}),
        **{
            "X-Correlation-ID": "corr-1",
            "X-Request-ID": "ignored-1",
        },
    )
    assert response["X-Correlation-ID"] == "corr-1"
    assert captured.access()[0]["request_id"] == "corr-1"


async def test_a_refusal_is_logged_with_its_status(captured):
    client = AsyncClient()
    response = await client.post("/a2a/", b"{}", content_type="text/plain")
    assert response.status_code == 415
    [line] = captured.access()
    assert line["status"] == 415
    assert line["outcome"] == "error"
    assert line["code"] == -32600
    assert line["request_id"] == response["X-Request-ID"]


@pytest.mark.django_db(transaction=True)
async def test_a_notification_is_logged(captured):
    body = {"jsonrpc": "2.0", "method": "GetTask", "params": {"id": "t-n"}}
    response = await post(AsyncClient(), body)
    assert response.status_code == 204
    [line] = captured.access()
    assert (line["method"], line["outcome"], line["status"]) == ("GetTask", "notification", 204)


async def test_an_unknown_methods_name_is_logged_cleaned(captured):
    await post(AsyncClient(), jsonrpc_request("No\nSuch" + "x" * 100, {}))
    [line] = captured.access()
    assert line["method"] == "No?Such" + "x" * 57 + "..."
    assert line["code"] == -32601


# --- Internal errors: the client's requestId is the logged request id ---------------------


SECRET = "database password is hunter2"


@pytest.fixture
def broken_get_task(monkeypatch):
    async def get_task(self: RequestHandler, params: Any, caller: types.Caller) -> Any:
        raise RuntimeError(SECRET)

    monkeypatch.setattr(RequestHandler, "get_task", get_task)


@pytest.mark.usefixtures("broken_get_task")
async def test_an_internal_errors_request_id_is_the_logged_one(captured):
    response = await post(
        AsyncClient(), jsonrpc_request("GetTask", {"id": "t-9"}), **{"X-Request-ID": "rq-7"}
    )
    answer = msgspec.json.decode(response.content)
    assert answer["error"]["code"] == -32603
    assert answer["error"]["data"][0]["requestId"] == "rq-7"
    assert SECRET not in response.content.decode()
    [traceback] = captured.on("a2a_endpoint.jsonrpc.dispatcher")
    assert traceback["request_id"] == "rq-7"
    assert (traceback["method"], traceback["task_id"]) == ("GetTask", "t-9")
    assert "RuntimeError: " + SECRET in traceback["exception"]
    [line] = captured.access()
    assert (line["request_id"], line["code"]) == ("rq-7", -32603)


@pytest.mark.usefixtures("broken_get_task")
async def test_an_internal_errors_text_line_carries_the_request_id():
    handler = _handler("text")
    logger = logging.getLogger("a2a_endpoint.jsonrpc")
    logger.addHandler(handler)
    try:
        response = await post(AsyncClient(), jsonrpc_request("GetTask", {"id": "t-9"}))
    finally:
        logger.removeHandler(handler)
    request_id = msgspec.json.decode(response.content)["error"]["data"][0]["requestId"]
    assert request_id == response["X-Request-ID"]
    first, *traceback = handler.stream.getvalue().splitlines()  # type: ignore[attr-defined]
    assert first.endswith(f"[request_id={request_id} method=GetTask task_id=t-9 caller=anonymous]")
    assert " ERROR a2a_endpoint.jsonrpc.dispatcher: JSON-RPC method GetTask failed" in first
    assert traceback[0] == "Traceback (most recent call last):"
    assert traceback[-1] == "RuntimeError: " + SECRET


# --- Batches: each item's lines carry its own method and task ---------------------------


@pytest.fixture
def logging_service(monkeypatch):
    """GetTask and ListTasks log a line inside the service, then answer TaskNotFound / []."""
    service_logger = logging.getLogger("a2a_endpoint.service.test")

    async def get_task(self: RequestHandler, params: Any, caller: types.Caller) -> Any:
        service_logger.info("inside get_task")
        raise errors.TaskNotFoundError(params.id)

    async def list_tasks(self: RequestHandler, params: Any, caller: types.Caller) -> Any:
        service_logger.info("inside list_tasks")
        return types.ListTasksResponse(tasks=[], next_page_token="", page_size=0, total_size=0)

    monkeypatch.setattr(RequestHandler, "get_task", get_task)
    monkeypatch.setattr(RequestHandler, "list_tasks", list_tasks)


@pytest.mark.usefixtures("logging_service")
async def test_batch_items_carry_their_own_method(captured):
    batch = [
        jsonrpc_request("GetTask", {"id": "t-a"}, id=1),
        jsonrpc_request("ListTasks", {}, id=2),
        jsonrpc_request("GetTask", {"id": "t-b"}, id=3),
        jsonrpc_request("NoSuchMethod", {}, id=4),
    ]
    response = await post(AsyncClient(), batch, **{"X-Request-ID": "batch-1"})
    assert response.status_code == 200
    inside = captured.on("a2a_endpoint.service.test")
    assert [(line["method"], line.get("task_id")) for line in inside] == [
        ("GetTask", "t-a"),
        ("ListTasks", None),  # the first item's task id did not leak into it
        ("GetTask", "t-b"),
    ]
    assert {line["request_id"] for line in inside} == {"batch-1"}
    [line] = captured.access()
    assert line["method"] == "batch"
    assert line["methods"] == ["GetTask", "ListTasks", "GetTask", "NoSuchMethod"]
    assert line["codes"] == [-32001, 0, -32001, -32601]
    assert line["outcome"] == "error"
    assert "task_id" not in line  # the batch's line names no one item's task


async def test_concurrent_requests_keep_their_own_context(captured, monkeypatch):
    service_logger = logging.getLogger("a2a_endpoint.service.test")
    both_inside = asyncio.Barrier(2)

    async def get_task(self: RequestHandler, params: Any, caller: types.Caller) -> Any:
        service_logger.info("before")
        await asyncio.wait_for(both_inside.wait(), DEADLINE)  # both requests are in here
        service_logger.info("after")
        raise errors.TaskNotFoundError(params.id)

    monkeypatch.setattr(RequestHandler, "get_task", get_task)
    await asyncio.gather(
        post(AsyncClient(), jsonrpc_request("GetTask", {"id": "t-1"}), **{"X-Request-ID": "r-1"}),
        post(AsyncClient(), jsonrpc_request("GetTask", {"id": "t-2"}), **{"X-Request-ID": "r-2"}),
    )
    inside = captured.on("a2a_endpoint.service.test")
    assert sorted((line["request_id"], line["task_id"]) for line in inside) == [
        ("r-1", "t-1"),
        ("r-1", "t-1"),
        ("r-2", "t-2"),
        ("r-2", "t-2"),
    ]
    assert {(line["request_id"], line["task_id"]) for line in captured.access()} == {
        ("r-1", "t-1"),
        ("r-2", "t-2"),
    }
    assert logs.current() == {}  # nothing stayed in the caller's context


# --- What an access line never holds -----------------------------------------------------


@pytest.mark.django_db(transaction=True)
async def test_no_credential_or_message_text_in_the_lines(captured):
    client = AsyncClient()
    secret_text = "reply my-private-text-31337"
    await post(
        client,
        jsonrpc_request("SendMessage", {"message": user_message(secret_text)}),
        Authorization="Bearer token-s3cr3t-value",
    )
    await post(client, jsonrpc_request("SendMessage", {"message": user_message(secret_text)}))
    await captured.wait_for("a2a_endpoint.jobs", 4)  # both jobs started and finished
    written = captured.stream.getvalue()
    assert len(captured.access()) == 2
    assert "my-private-text" not in written
    assert "s3cr3t" not in written


# --- Streams -----------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
async def test_a_stream_logs_when_it_opens_and_when_it_ends(captured):
    request = jsonrpc_request("SendStreamingMessage", {"message": user_message("echo hi")})
    response = await post(AsyncClient(), request, **{"X-Request-ID": "stream-1"})
    assert response["X-Request-ID"] == "stream-1"
    events = await SseStream(response).rest()
    assert events
    opened, ended = await captured.wait_for("a2a_endpoint.requests", 2)
    assert (opened["outcome"], ended["outcome"]) == ("stream", "stream ended")
    for line in (opened, ended):
        assert line["request_id"] == "stream-1"
        assert line["method"] == "SendStreamingMessage"
        assert line["caller"] == "anonymous"
    assert ended["events"] == len(events)
    assert ended["duration_ms"] >= opened["duration_ms"]


# --- Jobs --------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
async def test_job_lines_carry_the_task_and_job_ids(captured):
    request = jsonrpc_request("SendMessage", {"message": user_message("echo hi")})
    response = await post(AsyncClient(), request, **{"X-Request-ID": "send-1"})
    task_id = msgspec.json.decode(response.content)["result"]["task"]["id"]
    start, finish = await captured.wait_for("a2a_endpoint.jobs", 2)
    assert start["message"] == "Job started (attempt 1)"
    assert finish["message"].startswith("Job finished: TASK_STATE_COMPLETED in ")
    assert finish["state"] == "TASK_STATE_COMPLETED"
    assert finish["stopped"] is False
    for line in (start, finish):
        assert line["task_id"] == task_id
        assert HEX_ID.fullmatch(line["job_id"])
        assert (line["method"], line["attempt"], line["caller"]) == ("job", 1, "anonymous")
        # The job's own context: the request that started it is its origin, not its id.
        assert line["origin_request_id"] == "send-1"
        assert "request_id" not in line
    assert start["job_id"] == finish["job_id"]
    # The request's own line stays the request's (a new task: its params named none).
    [access] = captured.access()
    assert access["request_id"] == "send-1"
    assert "job_id" not in access
    assert "task_id" not in access


@pytest.mark.django_db(transaction=True)
async def test_a_failing_agents_traceback_carries_the_job(captured):
    request = jsonrpc_request("SendMessage", {"message": user_message("fail")})
    response = await post(AsyncClient(), request)
    task_id = msgspec.json.decode(response.content)["result"]["task"]["id"]
    start, finish = await captured.wait_for("a2a_endpoint.jobs", 2)
    [failure] = [line for line in captured.lines() if line["level"] == "ERROR"]
    assert failure["logger"] == "a2a_endpoint.execution"
    assert (failure["task_id"], failure["job_id"]) == (task_id, start["job_id"])
    assert "RuntimeError" in failure["exception"]
    assert finish["state"] == "TASK_STATE_FAILED"


# --- The formatter, the filter and the switch --------------------------------------------


def _record(message: str = "hello %s", *args: Any, **extra: Any) -> logging.LogRecord:
    record = logging.makeLogRecord(
        {"name": "x.y", "levelno": logging.WARNING, "levelname": "WARNING", "msg": message}
    )
    record.args = args
    record.__dict__.update(extra)
    return record


def test_a_json_line_is_one_object_with_the_context_and_extra():
    with logs.scope(request_id="r-1", method="GetTask", task_id="t\n1", caller="alice"):
        line = logs.Formatter(output="json").format(_record("hi %s", "there", status=200))
    assert "\n" not in line
    entry = json.loads(line)
    assert entry["time"].endswith("Z")
    assert (entry["level"], entry["logger"], entry["message"]) == ("WARNING", "x.y", "hi there")
    assert entry["request_id"] == "r-1"
    assert (entry["method"], entry["task_id"], entry["caller"]) == ("GetTask", "t\n1", "alice")
    assert entry["status"] == 200
    assert "job_id" not in entry  # unset fields are left out


def test_a_json_line_holds_the_exception_on_the_same_line():
    try:
        raise ValueError("boom")
    except ValueError:
        record = _record("failed")
        record.exc_info = sys.exc_info()
    line = logs.Formatter(output="json").format(record)
    assert len(line.splitlines()) == 1
    assert "ValueError: boom" in json.loads(line)["exception"]


def test_the_switch_is_one_setting():
    formatter = logs.Formatter()
    with logs.scope(request_id="r-2"):
        text = formatter.format(_record("plain"))
        with override_settings(A2A_ENDPOINT=a2a_settings(LOG_FORMAT="json")):
            as_json = formatter.format(_record("plain"))
    assert text.endswith(" WARNING x.y: plain [request_id=r-2]")
    assert json.loads(as_json)["request_id"] == "r-2"


def test_a_scope_restores_every_field_also_those_updated_inside():
    with logs.scope(request_id="outer"):
        with logs.scope(fresh=True, task_id="t"):
            logs.update(caller="alice")
            assert logs.current() == {"task_id": "t", "caller": "alice"}
        assert logs.current() == {"request_id": "outer"}
    assert logs.current() == {}
    with pytest.raises(TypeError):
        logs.update(password="x")


def test_a_filtered_record_of_any_logger_carries_the_fields():
    record = _record()
    with logs.scope(request_id="r-3", job_id="j-1"):
        assert logs.ContextFilter().filter(record)
    fields = record.__dict__
    assert (fields["request_id"], fields["job_id"], fields["task_id"]) == ("r-3", "j-1", None)


def _run(script: str, **env: str) -> list[dict[str, Any]]:
    """The JSON lines a Python process writes to stderr (a process of its own: it
    configures logging, which this one's test handlers must survive)."""
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO_ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(text) for text in done.stderr.splitlines() if text.startswith("{")]


def test_logging_config_is_a_valid_logging_dict():
    script = (
        "import logging.config; from a2a_endpoint import logs;"
        "logging.config.dictConfig(logs.logging_config(output='json'));"
        "scope = logs.scope(request_id='r-4'); scope.__enter__();"
        "logging.getLogger('django.request').warning('Not Found: /x');"
        "logging.getLogger('a2a_endpoint.x').debug('not at DEBUG');"
        "logging.getLogger('other').info('not below WARNING')"
    )
    [line] = _run(script)
    assert (line["logger"], line["request_id"]) == ("django.request", "r-4")
    assert line["message"] == "Not Found: /x"


def test_the_project_switch_is_an_environment_variable(tmp_path):
    """project/settings.py: A2A_LOG_FORMAT=json makes its lines JSON (Django's too)."""
    script = (
        "import django, logging; django.setup();"
        "from a2a_endpoint import logs;"
        "scope = logs.scope(request_id='proj-1'); scope.__enter__();"
        "logging.getLogger('django.request').warning('Forbidden');"
        "logging.getLogger('a2a_endpoint.requests').info('hello')"
    )
    lines = _run(
        script,
        DJANGO_SETTINGS_MODULE="project.settings",
        A2A_DEMO_DB=str(tmp_path / "db.sqlite3"),
        A2A_LOG_FORMAT="json",
        REDIS_URL="",
        DATABASE_URL="",
    )
    assert [(line["logger"], line["request_id"]) for line in lines] == [
        ("django.request", "proj-1"),
        ("a2a_endpoint.requests", "proj-1"),
    ]


# --- System checks -----------------------------------------------------------------------


def _log_checks() -> list[Any]:
    return [
        p for p in check_settings() if p.id.startswith(("a2a_endpoint.E05", "a2a_endpoint.W05"))
    ]


def test_the_default_log_settings_pass_the_checks():
    assert _log_checks() == []


@override_settings(A2A_ENDPOINT=a2a_settings(LOG_FORMAT="xml"))
def test_an_unknown_log_format_is_e050():
    [problem] = _log_checks()
    assert isinstance(problem, Error)
    assert problem.id == "a2a_endpoint.E050"
    assert "json" in problem.hint


@pytest.mark.parametrize("header", ["X Request", "X-Request-ID\n", 42, "x" * 65])
def test_a_bad_request_id_header_is_e051(header):
    with override_settings(A2A_ENDPOINT=a2a_settings(REQUEST_ID_HEADER=header)):
        [problem] = _log_checks()
    assert problem.id == "a2a_endpoint.E051"
    assert problem.hint


def test_no_request_id_header_is_allowed():
    with override_settings(A2A_ENDPOINT=a2a_settings(REQUEST_ID_HEADER="")):
        assert _log_checks() == []


def test_json_without_the_formatter_in_logging_is_w050():
    with override_settings(A2A_ENDPOINT=a2a_settings(LOG_FORMAT="json")):
        [problem] = _log_checks()
        assert isinstance(problem, Warning)
        assert problem.id == "a2a_endpoint.W050"
        assert "logging_config" in problem.hint
        with override_settings(LOGGING=logs.logging_config()):
            assert _log_checks() == []
