"""Shared fixtures: a JSON-RPC client for the endpoint and fresh runtime parts per test."""

from __future__ import annotations

import functools
from typing import Any

import msgspec
import pytest
from asgiref.sync import SyncToAsync
from django.db import connections
from django.test import AsyncClient

from a2a_endpoint import store
from a2a_endpoint.execution import runtime
from a2a_endpoint.testing import jsonrpc_request


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """The test database, and whether it keeps the task counts looked up now.

    A process looks that up at its first ListTasks (``store.task_counts_kept``): done here, the
    tests that count a ListTasks' statements see the same ones whichever test runs first.
    """
    with django_db_blocker.unblock():
        store.task_counts_kept()


@pytest.fixture(autouse=True)
def _fresh_runtime():
    runtime.reset()
    yield
    runtime.reset()
    # Outside a request, thread-sensitive ORM calls run in asgiref's one shared thread:
    # close the connection it holds so the test database can be dropped.
    SyncToAsync.single_thread_executor.submit(connections.close_all).result()


class RpcClient:
    """Posts JSON-RPC requests to /a2a/ and decodes the answers."""

    def __init__(self) -> None:
        self.http = AsyncClient()
        self.headers: dict[str, str] = {}

    async def post(self, body: bytes | Any, **headers: str) -> Any:
        if not isinstance(body, bytes):
            body = msgspec.json.encode(body)
        return await self.http.post(
            "/a2a/", body, content_type="application/json", headers={**self.headers, **headers}
        )

    async def call(self, method: str, params: Any = None, id: Any = 1, **headers: str) -> Any:
        response = await self.post(jsonrpc_request(method, params, id), **headers)
        assert response.status_code == 200, response.content
        assert response["Content-Type"] == "application/json"
        return msgspec.json.decode(response.content)

    async def result(self, method: str, params: Any = None, **headers: str) -> Any:
        answer = await self.call(method, params, **headers)
        assert "error" not in answer, answer
        return answer["result"]

    async def error(self, method: str, params: Any = None, **headers: str) -> dict[str, Any]:
        answer = await self.call(method, params, **headers)
        assert "result" not in answer, answer
        return answer["error"]


@pytest.fixture
def rpc() -> RpcClient:
    return RpcClient()


class RecordingBackend:
    """Stands in for the execution backend: records which tasks' senders were woken."""

    def __init__(self) -> None:
        self.pushed: list[str] = []

    def push(self, task_id: str) -> None:
        self.pushed.append(task_id)


@pytest.fixture
def backend(monkeypatch: pytest.MonkeyPatch) -> RecordingBackend:
    """The execution backend replaced by a :class:`RecordingBackend` (push wake-ups only)."""
    stub = RecordingBackend()
    # Cached like the real getter, so runtime.reset() (the fixtures' teardown, a command's
    # end) clears it as it would the real one.
    monkeypatch.setattr(runtime, "get_backend", functools.cache(lambda: stub))
    return stub
