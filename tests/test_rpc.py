"""The A2A JSON-RPC binding over HTTP: envelope errors, ids, notifications, batches, versions."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import pytest
from django.conf import settings
from django.test import override_settings

from a2a_endpoint.testing import jsonrpc_request, user_message

ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
# GetExtendedAgentCard answers without touching the database: it shows a call was served.
PROBE = "GetExtendedAgentCard"
# Read-only calls need no flush afterwards; runs of agent jobs need transaction=True.
reads_db = pytest.mark.django_db


def a2a_settings(**overrides: Any) -> dict[str, Any]:
    return {**settings.A2A_ENDPOINT, **overrides}


def decode(response: Any) -> Any:
    """A JSON-RPC answer: HTTP 200 and application/json, errors included (A2A §9)."""
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/json"
    return msgspec.json.decode(response.content)


def assert_one_response(obj: Any) -> None:
    """JSON-RPC §5: exactly one of result and error, always jsonrpc and id."""
    assert isinstance(obj, dict)
    assert obj["jsonrpc"] == "2.0"
    assert "id" in obj
    assert ("result" in obj) != ("error" in obj), obj


def error_info(error: dict[str, Any]) -> dict[str, Any]:
    """The google.rpc.ErrorInfo of an A2A error (A2A §9: data is an array of typed objects)."""
    assert isinstance(error["data"], list)
    [info] = [item for item in error["data"] if item["@type"] == ERROR_INFO]
    assert info["domain"] == "a2a-protocol.org"
    return info


async def post(rpc: Any, body: bytes | Any, **headers: str) -> Any:
    return decode(await rpc.post(body, **headers))


# --- -32700 parse errors ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b'{"jsonrpc": "2.0", "method": "GetTask", "id": 1', id="truncated"),
        pytest.param(b"   ", id="blank"),
        pytest.param(b'{"jsonrpc": "2.0", "method": "Get\xff", "id": 1}', id="not-utf8"),
        pytest.param(b'{"jsonrpc": "2.0", "method": "GetTask", "id": NaN}', id="nan"),
        pytest.param(b'{"jsonrpc": "2.0", "method": "GetTask", "id": Infinity}', id="infinity"),
        pytest.param(b"{'jsonrpc': '2.0'}", id="single-quotes"),
    ],
)
async def test_invalid_json_is_parse_error_with_null_id(rpc, body):
    answer = await post(rpc, body)
    assert_one_response(answer)
    assert answer["id"] is None
    assert answer["error"]["code"] == -32700


async def test_empty_body_is_parse_error(rpc):
    # The test client only sends a Content-Type with a non-empty body: set it by hand.
    response = await rpc.http.post(
        "/a2a/", b"", content_type="application/json", headers={"Content-Type": "application/json"}
    )
    answer = decode(response)
    assert answer["id"] is None
    assert answer["error"]["code"] == -32700


@override_settings(A2A_ENDPOINT=a2a_settings(MAX_JSON_DEPTH=8))
async def test_too_deep_json_is_parse_error(rpc):
    nested: Any = "x"
    for _ in range(8):
        nested = [nested]
    # Depth: the request object (1) + params object (2) + 8 arrays = 10 > 8.
    answer = await post(rpc, jsonrpc_request(PROBE, {"deep": nested}, id=3))
    assert answer["id"] is None
    assert answer["error"]["code"] == -32700


@override_settings(A2A_ENDPOINT=a2a_settings(MAX_JSON_DEPTH=8))
async def test_json_within_depth_is_served(rpc):
    nested: Any = "x"
    for _ in range(6):
        nested = [nested]
    answer = await post(rpc, jsonrpc_request(PROBE, {"deep": nested}, id=3))
    assert answer["id"] == 3
    assert answer["error"]["code"] == -32004


# --- -32600 invalid requests ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("request_obj", "echoed_id"),
    [
        pytest.param(42, None, id="number"),
        pytest.param("GetTask", None, id="string"),
        pytest.param(None, None, id="null"),
        pytest.param({"method": PROBE, "id": 1}, 1, id="jsonrpc-missing"),
        pytest.param({"jsonrpc": "1.0", "method": PROBE, "id": 1}, 1, id="jsonrpc-1.0"),
        pytest.param({"jsonrpc": 2.0, "method": PROBE, "id": 1}, 1, id="jsonrpc-number"),
        pytest.param({"jsonrpc": "2.0", "id": 1}, 1, id="method-missing"),
        pytest.param({"jsonrpc": "2.0", "method": 5, "id": 1}, 1, id="method-number"),
        pytest.param({"jsonrpc": "2.0", "method": None, "id": 1}, 1, id="method-null"),
        pytest.param({"jsonrpc": "2.0", "method": PROBE, "id": True}, None, id="id-bool"),
        pytest.param({"jsonrpc": "2.0", "method": PROBE, "id": {"a": 1}}, None, id="id-object"),
        pytest.param({"jsonrpc": "2.0", "method": PROBE, "id": [1]}, None, id="id-array"),
        pytest.param({"jsonrpc": "2.0", "method": PROBE, "params": "x", "id": 1}, 1, id="params"),
    ],
)
async def test_invalid_request(rpc, request_obj, echoed_id):
    answer = await post(rpc, request_obj)
    assert_one_response(answer)
    assert answer["error"]["code"] == -32600
    assert answer["id"] == echoed_id


async def test_unknown_method_echoes_id(rpc):
    answer = await rpc.call("NoSuchMethod", {}, id="abc-1")
    assert_one_response(answer)
    assert answer["id"] == "abc-1"
    assert answer["error"]["code"] == -32601


async def test_invalid_params_are_32602_with_bad_request(rpc):
    answer = await rpc.call("GetTask", {"historyLength": "many"}, id=2)
    assert answer["error"]["code"] == -32602
    [bad_request] = answer["error"]["data"]
    assert bad_request["@type"] == "type.googleapis.com/google.rpc.BadRequest"
    assert bad_request["fieldViolations"]


# --- ids --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "request_id",
    [
        0,
        -1,
        123456789012345678901234567890,
        1.5,
        "",
        "täsk-✓-日本",
        "a" * 300,
        None,
    ],
)
async def test_ids_are_echoed_exactly(rpc, request_id):
    body = msgspec.json.encode(jsonrpc_request(PROBE, {}, id=request_id))
    response = await rpc.post(body)
    answer = decode(response)
    assert_one_response(answer)
    assert answer["id"] == request_id
    assert type(answer["id"]) is type(request_id)
    # Exact text on the wire too: a big integer must not turn into a float.
    assert b'"id":' + msgspec.json.encode(request_id) in response.content


@reads_db
async def test_success_echoes_big_integer_id(rpc):
    request_id = 123456789012345678901234567890
    answer = await rpc.call("ListTasks", {}, id=request_id)
    assert answer["id"] == request_id
    assert "tasks" in answer["result"]
    assert "error" not in answer


# --- Notifications ----------------------------------------------------------------------------


def notification(method: str, params: Any) -> dict[str, Any]:
    request = jsonrpc_request(method, params)
    del request["id"]
    return request


@reads_db
async def test_notification_gets_204_and_no_body(rpc):
    response = await rpc.post(notification("GetTask", {"id": "no-such-task"}))
    assert response.status_code == 204
    assert response.content == b""


async def test_null_id_is_a_request_not_a_notification(rpc):
    answer = await post(rpc, jsonrpc_request(PROBE, {}, id=None))
    assert answer["id"] is None
    assert answer["error"]["code"] == -32004


async def list_tasks(rpc: Any) -> list[dict[str, Any]]:
    return (await rpc.result("ListTasks", {"includeArtifacts": True, "historyLength": 10}))["tasks"]


async def wait_for_completed_task(rpc: Any, timeout: float = 10.0) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        tasks = await list_tasks(rpc)
        if tasks and tasks[0]["status"]["state"] == "TASK_STATE_COMPLETED":
            return tasks[0]
        await asyncio.sleep(0.02)
    raise AssertionError(f"no completed task: {await list_tasks(rpc)}")


@pytest.mark.django_db(transaction=True)
async def test_send_message_notification_creates_and_runs_the_task(rpc):
    message = user_message("echo quietly")
    response = await rpc.post(notification("SendMessage", {"message": message}))
    assert response.status_code == 204
    assert response.content == b""
    task = await wait_for_completed_task(rpc)
    assert task["artifacts"][0]["parts"] == [{"text": "quietly"}]
    assert task["history"][0]["messageId"] == message["messageId"]


# --- Batches ----------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
async def test_batch_answers_each_request_in_order(rpc):
    message = user_message("echo batched")
    answers = await post(
        rpc,
        [
            jsonrpc_request("SendMessage", {"message": message}, id="send"),
            jsonrpc_request("NoSuchMethod", {}, id=2),
            42,
            notification("GetTask", {"id": "ignored"}),
            jsonrpc_request("SendStreamingMessage", {"message": user_message("echo x")}, id=3),
            jsonrpc_request("GetTask", {"id": "00000000-0000-0000-0000-000000000000"}, id=4),
            jsonrpc_request("ListTasks", {}, id=5),
        ],
    )
    assert isinstance(answers, list)
    for answer in answers:
        assert_one_response(answer)
    assert [answer["id"] for answer in answers] == ["send", 2, None, 3, 4, 5]
    sent, unknown, invalid, streaming, missing, listed = answers
    assert sent["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert sent["result"]["task"]["artifacts"][0]["parts"] == [{"text": "batched"}]
    assert unknown["error"]["code"] == -32601
    assert invalid["error"]["code"] == -32600
    assert streaming["error"]["code"] == -32600
    assert missing["error"]["code"] == -32001
    # Sequential: the list sees the task the first item created, and only that one.
    assert [task["id"] for task in listed["result"]["tasks"]] == [sent["result"]["task"]["id"]]


async def test_empty_batch_is_one_invalid_request(rpc):
    answer = await post(rpc, [])
    assert isinstance(answer, dict)
    assert_one_response(answer)
    assert answer["id"] is None
    assert answer["error"]["code"] == -32600


async def test_batch_of_invalid_items_answers_each(rpc):
    answers = await post(rpc, [1, 2, "x"])
    assert [answer["error"]["code"] for answer in answers] == [-32600] * 3
    assert [answer["id"] for answer in answers] == [None] * 3


@reads_db
async def test_all_notification_batch_is_204(rpc):
    response = await rpc.post(
        [notification("GetTask", {"id": "a"}), notification(PROBE, {}), notification("Nope", {})]
    )
    assert response.status_code == 204
    assert response.content == b""


async def test_streaming_method_in_batch_gets_its_own_error(rpc):
    answers = await post(
        rpc,
        [
            jsonrpc_request("SubscribeToTask", {"id": "t"}, id=1),
            jsonrpc_request(PROBE, {}, id=2),
        ],
    )
    assert [answer["id"] for answer in answers] == [1, 2]
    assert answers[0]["error"]["code"] == -32600
    assert "batch" in answers[0]["error"]["message"].lower()
    assert answers[1]["error"]["code"] == -32004


# --- Operations this agent does not offer (or not when switched off) -------------------------


async def test_extended_agent_card_is_unsupported(rpc):
    error = await rpc.error("GetExtendedAgentCard", {})
    assert error["code"] == -32004
    assert error_info(error)["reason"] == "UNSUPPORTED_OPERATION"


@pytest.mark.parametrize(
    ("method", "params"),
    [
        (
            "CreateTaskPushNotificationConfig",
            {"taskId": "t", "url": "https://example.com/hook"},
        ),
        ("GetTaskPushNotificationConfig", {"taskId": "t", "id": "c"}),
        ("ListTaskPushNotificationConfigs", {"taskId": "t"}),
        ("DeleteTaskPushNotificationConfig", {"taskId": "t", "id": "c"}),
    ],
)
async def test_push_config_methods_are_not_supported_when_turned_off(rpc, method, params):
    with override_settings(A2A_ENDPOINT=a2a_settings(PUSH_NOTIFICATIONS=False)):
        error = await rpc.error(method, params)
    assert error["code"] == -32003
    assert error_info(error)["reason"] == "PUSH_NOTIFICATION_NOT_SUPPORTED"


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("SendStreamingMessage", {"message": user_message("echo hi")}),
        ("SubscribeToTask", {"id": "t"}),
    ],
)
@override_settings(A2A_ENDPOINT=a2a_settings(STREAMING=False))
async def test_streaming_methods_answer_plain_json_error(rpc, method, params):
    response = await rpc.post(jsonrpc_request(method, params, id="s"))
    answer = decode(response)  # application/json, not text/event-stream
    assert_one_response(answer)
    assert answer["id"] == "s"
    assert answer["error"]["code"] == -32004
    assert error_info(answer["error"])["reason"] == "UNSUPPORTED_OPERATION"


async def test_streaming_notification_is_204(rpc):
    response = await rpc.post(notification("SubscribeToTask", {"id": "t"}))
    assert response.status_code == 204
    assert response.content == b""


# --- A2A-Version (A2A §3.6.2) -----------------------------------------------------------------


@reads_db
@pytest.mark.parametrize("version", ["1.0", "1.0.3", "1.1", " 1.0 "])
async def test_supported_versions_are_served(rpc, version):
    result = await rpc.result("ListTasks", {}, **{"A2A-Version": version})
    assert result["tasks"] == []


@pytest.mark.parametrize("version", ["2.0", "0.3", "abc", "10.0"])
async def test_unsupported_versions_are_32009(rpc, version):
    error = await rpc.error("ListTasks", {}, **{"A2A-Version": version})
    assert error["code"] == -32009
    info = error_info(error)
    assert info["reason"] == "VERSION_NOT_SUPPORTED"
    assert info["metadata"]["requestedVersion"] == version


async def test_unsupported_version_on_streaming_method_is_json(rpc):
    response = await rpc.post(
        jsonrpc_request("SendStreamingMessage", {"message": user_message("hi")}),
        **{"A2A-Version": "2.0"},
    )
    assert decode(response)["error"]["code"] == -32009


@reads_db
async def test_version_query_parameter(rpc):
    body = msgspec.json.encode(jsonrpc_request("ListTasks", {}))
    refused = await rpc.http.post("/a2a/?A2A-Version=2.0", body, content_type="application/json")
    assert decode(refused)["error"]["code"] == -32009
    served = await rpc.http.post("/a2a/?A2A-Version=1.0", body, content_type="application/json")
    assert decode(served)["result"]["tasks"] == []


@reads_db
async def test_no_version_is_served_as_1_0(rpc):
    assert (await rpc.result("ListTasks", {}))["tasks"] == []


@override_settings(A2A_ENDPOINT=a2a_settings(STRICT_VERSION=True))
async def test_strict_version_requires_the_header(rpc):
    error = await rpc.error("ListTasks", {})
    assert error["code"] == -32009
    assert error_info(error)["reason"] == "VERSION_NOT_SUPPORTED"


@reads_db
@override_settings(A2A_ENDPOINT=a2a_settings(STRICT_VERSION=True))
async def test_strict_version_serves_with_the_header(rpc):
    assert (await rpc.result("ListTasks", {}, **{"A2A-Version": "1.0"}))["tasks"] == []


@pytest.mark.parametrize("method", ["message/send", "tasks/get", "tasks/cancel"])
@pytest.mark.parametrize(
    ("headers", "code"),
    [
        ({}, -32009),
        ({"A2A-Version": "0.3"}, -32009),
        ({"A2A-Version": "0.3.0"}, -32009),
        ({"A2A-Version": "2.0"}, -32009),
        ({"A2A-Version": "1.0"}, -32601),
    ],
)
async def test_v03_method_names(rpc, method, headers, code):
    answer = await rpc.call(method, {"id": "t"}, id=9, **headers)
    assert answer["id"] == 9
    assert answer["error"]["code"] == code
    if code == -32009:
        assert error_info(answer["error"])["reason"] == "VERSION_NOT_SUPPORTED"


# --- A2A-Extensions (A2A §3.6.1) --------------------------------------------------------------

EXTENSIONS = [{"uri": "https://ex/a", "required": True}, {"uri": "https://ex/b"}]
with_extensions = override_settings(A2A_ENDPOINT=a2a_settings(EXTENSIONS=EXTENSIONS))


@with_extensions
async def test_required_extension_missing_is_32008(rpc):
    error = await rpc.error("ListTasks", {})
    assert error["code"] == -32008
    info = error_info(error)
    assert info["reason"] == "EXTENSION_SUPPORT_REQUIRED"
    assert info["metadata"]["extensions"] == "https://ex/a"


@with_extensions
async def test_required_extension_must_be_among_the_requested(rpc):
    error = await rpc.error("ListTasks", {}, **{"A2A-Extensions": "https://ex/b"})
    assert error["code"] == -32008


@reads_db
@with_extensions
@pytest.mark.parametrize("header", ["A2A-Extensions", "X-A2A-Extensions"])
async def test_activated_extensions_are_echoed(rpc, header):
    response = await rpc.post(
        jsonrpc_request("ListTasks", {}),
        **{header: "https://ex/a, https://ex/b,https://unknown"},
    )
    assert decode(response)["result"]["tasks"] == []
    echoed = [uri.strip() for uri in response["A2A-Extensions"].split(",")]
    assert sorted(echoed) == ["https://ex/a", "https://ex/b"]


@reads_db
async def test_no_extensions_header_when_none_activated(rpc):
    response = await rpc.post(
        jsonrpc_request("ListTasks", {}), **{"A2A-Extensions": "https://unknown"}
    )
    assert decode(response)["result"]["tasks"] == []
    assert "A2A-Extensions" not in response
