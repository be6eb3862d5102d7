"""The HTTP transport of the JSON-RPC endpoint: methods, paths, size, content type, CSRF, 500s."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import msgspec
import pytest
from django.conf import settings
from django.core.handlers.asgi import ASGIHandler
from django.test import AsyncClient, Client, override_settings

from a2a_endpoint import types
from a2a_endpoint.service import RequestHandler
from a2a_endpoint.testing import jsonrpc_request, user_message
from tests.asgi_client import http_scope

# Any call that reaches the service without touching the database: a quick "is it served?".
PROBE = jsonrpc_request("GetExtendedAgentCard", {}, id=7)
UNSUPPORTED = -32004


def decode(response: Any) -> Any:
    assert response["Content-Type"] == "application/json", response.content
    return msgspec.json.decode(response.content)


def assert_refusal(response: Any, status: int, code: int = -32600) -> dict[str, Any]:
    """An HTTP-level refusal still carries a JSON-RPC error object with id null."""
    assert response.status_code == status, response.content
    body = decode(response)
    assert body["jsonrpc"] == "2.0"
    assert body["id"] is None
    assert "result" not in body
    assert body["error"]["code"] == code
    assert body["error"]["message"]
    return body["error"]


def a2a_settings(**overrides: Any) -> dict[str, Any]:
    return {**settings.A2A_ENDPOINT, **overrides}


# --- HTTP methods and paths ------------------------------------------------------------------


@pytest.mark.parametrize("method", ["get", "put", "delete", "patch", "head", "options"])
async def test_only_post_is_allowed(method):
    response = await getattr(AsyncClient(), method)("/a2a/")
    assert response.status_code == 405
    assert response["Allow"] == "POST"
    if method != "head":  # the test client drops HEAD bodies, as servers do
        error = assert_refusal(response, 405)
        assert "POST" in error["message"]


@pytest.mark.parametrize("path", ["/a2a/", "/a2a"])
async def test_both_paths_answer_post(path):
    response = await AsyncClient().post(path, PROBE, content_type="application/json")
    assert response.status_code == 200
    body = decode(response)
    assert body["id"] == 7
    assert body["error"]["code"] == UNSUPPORTED


# --- Body size --------------------------------------------------------------------------------


def padded(size: int, *, valid: bool = True) -> bytes:
    """A JSON-RPC body of exactly ``size`` bytes (invalid JSON when ``valid`` is False)."""
    body = msgspec.json.encode({**PROBE, "params": {"pad": ""}})
    body = body.replace(b'"pad":""', b'"pad":"' + b"x" * (size - len(body)) + b'"')
    assert len(body) == size
    return body if valid else body[:-1] + b"!"


@override_settings(A2A_ENDPOINT=a2a_settings(MAX_REQUEST_BYTES=200))
async def test_body_at_the_limit_is_served(rpc):
    response = await rpc.post(padded(200))
    assert decode(response)["error"]["code"] == UNSUPPORTED


@override_settings(A2A_ENDPOINT=a2a_settings(MAX_REQUEST_BYTES=200))
async def test_larger_body_is_refused_before_parsing(rpc):
    # Invalid JSON too: a parse error here would mean the body was parsed first.
    response = await rpc.post(padded(201, valid=False))
    error = assert_refusal(response, 413)
    assert "200 bytes" in error["message"]


@override_settings(
    A2A_ENDPOINT=a2a_settings(MAX_REQUEST_BYTES=4000), DATA_UPLOAD_MAX_MEMORY_SIZE=1000
)
async def test_limit_is_max_request_bytes_not_djangos_upload_limit(rpc):
    response = await rpc.post(padded(3000))
    assert response.status_code == 200
    assert decode(response)["error"]["code"] == UNSUPPORTED


async def asgi_post(chunks: list[bytes], headers: list[tuple[bytes, bytes]]) -> tuple[int, bytes]:
    """POST /a2a/ through Django's real ASGI handler, with exactly these headers and chunks."""
    scope = http_scope(headers=headers)
    incoming = [
        {"type": "http.request", "body": chunk, "more_body": i < len(chunks) - 1}
        for i, chunk in enumerate(chunks)
    ]
    done = asyncio.Event()
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if incoming:
            return incoming.pop(0)
        await done.wait()  # the client stays connected until the response is complete
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body"):
            done.set()

    await ASGIHandler()(scope, receive, send)
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    return status, b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")


@override_settings(A2A_ENDPOINT=a2a_settings(MAX_REQUEST_BYTES=200))
async def test_body_larger_than_its_content_length_is_refused():
    body = padded(500)
    status, content = await asgi_post([body], [(b"content-length", b"50")])
    assert status == 413
    assert msgspec.json.decode(content)["error"]["code"] == -32600


@override_settings(A2A_ENDPOINT=a2a_settings(MAX_REQUEST_BYTES=200))
async def test_chunked_body_without_content_length_is_refused():
    body = padded(500)
    status, content = await asgi_post([body[:150], body[150:300], body[300:]], [])
    assert status == 413
    assert msgspec.json.decode(content)["error"]["code"] == -32600


async def test_chunked_body_without_content_length_is_served():
    body = msgspec.json.encode(PROBE)
    status, content = await asgi_post([body[:10], body[10:]], [])
    assert status == 200
    assert msgspec.json.decode(content)["error"]["code"] == UNSUPPORTED


async def test_malformed_content_length_is_no_server_error():
    body = msgspec.json.encode(PROBE)
    status, content = await asgi_post([body], [(b"content-length", b"lots")])
    assert status == 200
    assert msgspec.json.decode(content)["id"] == 7


# --- Content type -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data", ""]
)
async def test_non_json_content_type_is_refused(content_type):
    body = msgspec.json.encode(PROBE)
    response = await AsyncClient().post("/a2a/", body, content_type=content_type)
    error = assert_refusal(response, 415)
    assert "application/json" in error["message"]


@pytest.mark.parametrize(
    "content_type",
    ["application/json", "application/a2a+json", "application/json; charset=utf-8"],
)
async def test_json_content_types_are_accepted(content_type):
    body = msgspec.json.encode(PROBE)
    response = await AsyncClient().post("/a2a/", body, content_type=content_type)
    assert response.status_code == 200
    assert decode(response)["error"]["code"] == UNSUPPORTED


# --- CSRF -------------------------------------------------------------------------------------


def test_no_csrf_token_needed_sync_client():
    client = Client(enforce_csrf_checks=True)
    response = client.post("/a2a/", PROBE, content_type="application/json")
    assert response.status_code == 200
    assert decode(response)["error"]["code"] == UNSUPPORTED


async def test_no_csrf_token_needed_async_client():
    client = AsyncClient(enforce_csrf_checks=True)
    response = await client.post("/a2a", PROBE, content_type="application/json")
    assert response.status_code == 200
    assert decode(response)["error"]["code"] == UNSUPPORTED


# --- Unexpected exceptions --------------------------------------------------------------------

SECRET = "database password is hunter2"


@pytest.fixture
def broken_get_task(monkeypatch):
    async def get_task(self: RequestHandler, params: Any, caller: types.Caller) -> Any:
        raise RuntimeError(SECRET)

    monkeypatch.setattr(RequestHandler, "get_task", get_task)


@pytest.mark.usefixtures("broken_get_task")
async def test_unexpected_exception_is_internal_error_with_request_id(rpc, caplog):
    caplog.set_level(logging.ERROR, logger="a2a_endpoint")
    response = await rpc.post(jsonrpc_request("GetTask", {"id": "t-1"}, id="req-1"))
    assert response.status_code == 200
    assert SECRET not in response.content.decode()
    assert "RuntimeError" not in response.content.decode()
    body = decode(response)
    assert body["id"] == "req-1"
    assert "result" not in body
    assert body["error"]["code"] == -32603
    assert body["error"]["message"] == "Internal error"
    [info] = body["error"]["data"]
    assert info["@type"] == "type.googleapis.com/google.rpc.RequestInfo"
    request_id = info["requestId"]
    assert request_id
    [record] = [r for r in caplog.records if request_id in r.getMessage()]
    assert record.name == "a2a_endpoint.jsonrpc.dispatcher"  # under the app's "a2a_endpoint"
    assert record.levelno == logging.ERROR
    assert record.exc_info is not None
    assert record.exc_info[0] is RuntimeError
    # The traceback is in the server log, not in the answer.
    assert "Traceback" in caplog.text
    assert SECRET in caplog.text


@pytest.mark.usefixtures("broken_get_task")
async def test_each_internal_error_has_its_own_request_id(rpc):
    first = await rpc.error("GetTask", {"id": "t-1"})
    second = await rpc.error("GetTask", {"id": "t-1"})
    assert first["data"][0]["requestId"] != second["data"][0]["requestId"]


@pytest.mark.usefixtures("broken_get_task")
async def test_unexpected_exception_in_a_batch_spoils_only_its_item(rpc):
    response = await rpc.post(
        [jsonrpc_request("GetTask", {"id": "t"}, id=1), jsonrpc_request("GetExtendedAgentCard")]
    )
    first, second = decode(response)
    assert first["error"]["code"] == -32603
    assert second["error"]["code"] == UNSUPPORTED


# --- Caller resolution ------------------------------------------------------------------------


def sync_resolver(request: Any) -> types.Caller:
    from django.contrib.auth import get_user_model

    # A sync resolver may use the ORM (API-key lookups): it must not run on the event loop.
    get_user_model().objects.filter(username=request.headers.get("X-Key", "")).exists()
    return types.Caller(owner="key:" + request.headers.get("X-Key", ""))


async def async_resolver(request: Any) -> types.Caller:
    return types.Caller(owner="async:" + request.headers.get("X-Key", ""))


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "resolver", ["tests.test_views.sync_resolver", "tests.test_views.async_resolver"]
)
async def test_caller_resolver_scopes_tasks(rpc, resolver):
    with override_settings(A2A_ENDPOINT=a2a_settings(CALLER_RESOLVER=resolver)):
        sent = await rpc.result(
            "SendMessage", {"message": user_message("reply hi")}, **{"X-Key": "alice"}
        )
        assert sent["message"]["parts"] == [{"text": "you said hi"}]
        mine = await rpc.result("ListTasks", {}, **{"X-Key": "alice"})
        theirs = await rpc.result("ListTasks", {}, **{"X-Key": "bob"})
    assert len(mine["tasks"]) == 1
    assert theirs["tasks"] == []
    task_id = mine["tasks"][0]["id"]
    with override_settings(A2A_ENDPOINT=a2a_settings(CALLER_RESOLVER=resolver)):
        error = await rpc.error("GetTask", {"id": task_id}, **{"X-Key": "bob"})
    assert error["code"] == -32001


def denying_resolver(request: Any) -> types.Caller:
    from django.core.exceptions import PermissionDenied

    raise PermissionDenied("Invalid API key")


def broken_resolver(request: Any) -> types.Caller:
    raise RuntimeError("resolver secret 1234")


async def test_caller_resolver_refusal_is_a_json_rpc_403(rpc):
    with override_settings(A2A_ENDPOINT=a2a_settings(CALLER_RESOLVER=denying_resolver)):
        response = await rpc.post(jsonrpc_request("GetTask", {"id": "x"}))
    assert response.status_code == 403
    body = decode(response)
    assert body["id"] == 1  # the body parsed: its id is echoed
    assert body["error"]["code"] == -31403
    assert body["error"]["message"] == "Invalid API key"
    assert body["error"]["data"][0]["reason"] == "PERMISSION_DENIED"


async def test_broken_caller_resolver_is_an_internal_error_not_a_500(rpc, caplog):
    with override_settings(A2A_ENDPOINT=a2a_settings(CALLER_RESOLVER=broken_resolver)):
        response = await rpc.post(jsonrpc_request("GetTask", {"id": "x"}))
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert b"1234" not in response.content
    assert decode(response)["error"]["code"] == -32603
    assert decode(response)["id"] == 1  # the body parsed: its id is echoed
    assert "resolver secret 1234" in caplog.text
