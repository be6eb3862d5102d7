"""Tests for the JSON-RPC dispatcher: routing, batches, notifications, errors and streaming."""

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from a2a_endpoint.jsonrpc import (
    STREAMING_IN_BATCH_MESSAGE,
    Dispatcher,
    InvalidParamsError,
    JsonRpcError,
    Method,
    NoReply,
    Reply,
    Request,
    StreamReply,
)

SECRET = "secret-db-password-1234"
TASK_NOT_FOUND = -32001
DISPATCHER_LOGGER = "a2a_endpoint.jsonrpc.dispatcher"


class Recorder:
    """Registers test methods and records every handler call in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any, Any]] = []
        self.events: list[str] = []
        self.stream_closed = False

    def methods(self) -> dict[str, Method]:
        return {
            "echo": Method(self.echo),
            "slow": Method(self.slow),
            "rpc_fail": Method(self.rpc_fail),
            "boom": Method(self.boom),
            "mapped": Method(self.mapped),
            "count": Method(self.count, streaming=True),
        }

    async def echo(self, params: Any, context: Any) -> Any:
        self.calls.append(("echo", params, context))
        return {"params": params, "context": context}

    async def slow(self, params: Any, context: Any) -> Any:
        name, delay = params
        self.events.append(f"start {name}")
        await asyncio.sleep(delay)
        self.events.append(f"end {name}")
        return name

    async def rpc_fail(self, params: Any, context: Any) -> Any:
        self.calls.append(("rpc_fail", params, context))
        raise InvalidParamsError("Bad field", data={"field": "message"})

    async def boom(self, params: Any, context: Any) -> Any:
        self.calls.append(("boom", params, context))
        raise RuntimeError(SECRET)

    async def mapped(self, params: Any, context: Any) -> Any:
        self.calls.append(("mapped", params, context))
        raise LookupError("task t1")

    async def count(self, params: Any, context: Any) -> AsyncIterator[int]:
        self.calls.append(("count", params, context))
        return self._count(params["n"])

    async def _count(self, n: int) -> AsyncIterator[int]:
        try:
            for i in range(n):
                yield i
        finally:
            self.stream_closed = True


def map_lookup(exc: BaseException) -> JsonRpcError | None:
    if isinstance(exc, LookupError):
        return JsonRpcError("Task not found", code=TASK_NOT_FOUND)
    return None


def error_data(error_id: str) -> dict[str, str]:
    return {"errorId": error_id}


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def dispatcher(recorder: Recorder) -> Dispatcher:
    return Dispatcher(recorder.methods(), error_mapper=map_lookup)


def encode(obj: Any) -> bytes:
    return msgspec.json.encode(obj)


def req(method: str, params: Any = None, id: Any = 1, **extra: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "id": id, **extra}
    if params is not None:
        obj["params"] = params
    return obj


def note(method: str, params: Any = None) -> dict[str, Any]:
    obj = req(method, params)
    del obj["id"]
    return obj


def err(id: Any, code: int, message: str, **data: Any) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    error.update(data)
    return {"jsonrpc": "2.0", "id": id, "error": error}


PARSE = ("Invalid JSON payload", -32700)
INVALID = ("Request payload validation error", -32600)


async def reply_of(dispatcher: Dispatcher, body: bytes, context: Any = "ctx") -> Any:
    result = await dispatcher.dispatch(body, context)
    assert isinstance(result, Reply), result
    return result.payload


async def collect(stream: AsyncIterator[dict[str, Any]]) -> list[dict[str, Any]]:
    return [item async for item in stream]


# --- parse errors and invalid requests --------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "body",
    [
        b'{"jsonrpc": "2.0", "method": "echo", "id": 1',
        b"\xff\xfe",
        b'{"jsonrpc": "2.0", "method": "echo", "id": NaN}',
        b'{"jsonrpc": "2.0", "method": "echo", "params": [Infinity], "id": 1}',
        b"-Infinity",
        b"",
        b"[" * 101 + b"]" * 101,
        b"[" * 100_000 + b"]" * 100_000,
        b'{"a":' * 100_000 + b"1" + b"}" * 100_000,
    ],
)
async def test_parse_errors_answer_with_null_id(dispatcher: Dispatcher, body: bytes) -> None:
    assert await reply_of(dispatcher, body) == err(None, PARSE[1], PARSE[0])


@pytest.mark.asyncio
async def test_max_depth_is_configurable(recorder: Recorder) -> None:
    dispatcher = Dispatcher(recorder.methods(), max_depth=3)
    ok = encode(req("echo", {"a": [1]}))  # depth 3
    too_deep = encode(req("echo", {"a": [[1]]}))  # depth 4
    assert (await reply_of(dispatcher, ok))["result"]["params"] == {"a": [1]}
    assert await reply_of(dispatcher, too_deep) == err(None, PARSE[1], PARSE[0])


def test_max_depth_below_one_is_rejected(recorder: Recorder) -> None:
    with pytest.raises(ValueError, match="max_depth"):
        Dispatcher(recorder.methods(), max_depth=0)


@pytest.mark.asyncio
@pytest.mark.parametrize("body", [b"1", b'"x"', b"null", b"true", b"3.5"])
async def test_scalar_body_is_invalid_request(dispatcher: Dispatcher, body: bytes) -> None:
    assert await reply_of(dispatcher, body) == err(None, INVALID[1], INVALID[0])


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("obj", "expected_id"),
    [
        ({"method": "echo", "id": 4}, 4),
        ({"jsonrpc": "1.0", "method": "echo", "id": 4}, 4),
        ({"jsonrpc": 2.0, "method": "echo", "id": "a"}, "a"),
        ({"jsonrpc": "2.0", "id": 4}, 4),
        ({"jsonrpc": "2.0", "method": 5, "id": 4}, 4),
        ({"jsonrpc": "2.0", "method": "echo", "id": True}, None),
        ({"jsonrpc": "2.0", "method": "echo", "id": {"a": 1}}, None),
        ({"jsonrpc": "2.0", "method": "echo", "id": [1]}, None),
        ({"jsonrpc": "2.0", "method": "echo", "params": "x", "id": 4}, 4),
        ({"jsonrpc": "2.0", "method": "echo", "params": 3, "id": 4}, 4),
        ({"jsonrpc": "2.0", "method": "echo", "params": "x"}, None),
    ],
)
async def test_invalid_requests(
    dispatcher: Dispatcher, recorder: Recorder, obj: dict[str, Any], expected_id: Any
) -> None:
    assert await reply_of(dispatcher, encode(obj)) == err(expected_id, INVALID[1], INVALID[0])
    assert recorder.calls == []


# --- routing and id echo ----------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "request_id",
    [123456789012345678901234567890, "h\u00e9\u6f22\U0001f600", 1.5, "abc", None, 0, -7],
)
async def test_ids_are_echoed_exactly(dispatcher: Dispatcher, request_id: Any) -> None:
    payload = await reply_of(dispatcher, encode(req("echo", [1], id=request_id)))
    assert payload == {
        "jsonrpc": "2.0",
        "id": request_id,
        "result": {"params": [1], "context": "ctx"},
    }
    assert type(payload["id"]) is type(request_id)


@pytest.mark.asyncio
async def test_big_int_id_survives_wire_round_trip(dispatcher: Dispatcher) -> None:
    body = b'{"jsonrpc": "2.0", "method": "echo", "id": 123456789012345678901234567890}'
    payload = await reply_of(dispatcher, body)
    assert b'"id":123456789012345678901234567890' in msgspec.json.encode(payload)


@pytest.mark.asyncio
async def test_handler_receives_params_and_context(
    dispatcher: Dispatcher, recorder: Recorder
) -> None:
    context = object()
    await dispatcher.dispatch(encode(req("echo", {"a": 1})), context)
    await dispatcher.dispatch(encode(req("echo")), context)
    assert recorder.calls == [("echo", {"a": 1}, context), ("echo", None, context)]


@pytest.mark.asyncio
async def test_unknown_method(dispatcher: Dispatcher) -> None:
    payload = await reply_of(dispatcher, encode(req("nope", id="q")))
    assert payload == err("q", -32601, "Method not found")


@pytest.mark.asyncio
async def test_methods_mapping_is_snapshotted(recorder: Recorder) -> None:
    methods = recorder.methods()
    dispatcher = Dispatcher(methods)
    methods.pop("echo")
    payload = await reply_of(dispatcher, encode(req("echo")))
    assert "result" in payload


# --- error mapping ----------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_handler_jsonrpc_error_passes_through(dispatcher: Dispatcher) -> None:
    payload = await reply_of(dispatcher, encode(req("rpc_fail", id=9)))
    assert payload == err(9, -32602, "Bad field", data={"field": "message"})


@pytest.mark.asyncio
async def test_error_mapper_is_used(
    dispatcher: Dispatcher, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    payload = await reply_of(dispatcher, encode(req("mapped", id=2)))
    assert payload == err(2, TASK_NOT_FOUND, "Task not found")
    assert caplog.records == []


@pytest.mark.asyncio
async def test_unexpected_exception_is_logged_internal_error(
    recorder: Recorder, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger=DISPATCHER_LOGGER)
    dispatcher = Dispatcher(recorder.methods(), internal_error_data=error_data)
    payload = await reply_of(dispatcher, encode(req("boom", id=3)))

    error_id = payload["error"]["data"]["errorId"]
    assert payload == err(3, -32603, "Internal error", data={"errorId": error_id})
    assert len(error_id) == 32
    int(error_id, 16)
    assert SECRET not in msgspec.json.encode(payload).decode()
    assert "RuntimeError" not in msgspec.json.encode(payload).decode()

    [record] = caplog.records
    assert record.levelno == logging.ERROR
    assert record.getMessage() == f"JSON-RPC method boom failed (request id {error_id})"
    assert record.exc_info is not None
    assert isinstance(record.exc_info[1], RuntimeError)
    assert "Traceback" in caplog.text
    assert SECRET in caplog.text


@pytest.mark.asyncio
async def test_internal_error_without_data_callback_has_no_data(
    dispatcher: Dispatcher, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR)
    payload = await reply_of(dispatcher, encode(req("boom", id=3)))
    assert payload == err(3, -32603, "Internal error")
    assert len(caplog.records) == 1


@pytest.mark.asyncio
async def test_each_internal_error_gets_a_fresh_id(recorder: Recorder) -> None:
    dispatcher = Dispatcher(recorder.methods(), internal_error_data=error_data)
    first = await reply_of(dispatcher, encode(req("boom")))
    second = await reply_of(dispatcher, encode(req("boom")))
    assert first["error"]["data"] != second["error"]["data"]


@pytest.mark.asyncio
async def test_custom_logger_is_used(recorder: Recorder, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR)
    logger = logging.getLogger("custom.jsonrpc")
    dispatcher = Dispatcher(recorder.methods(), logger=logger)
    await dispatcher.dispatch(encode(req("boom")), None)
    assert [record.name for record in caplog.records] == ["custom.jsonrpc"]


@pytest.mark.asyncio
async def test_failing_mapper_degrades_to_internal_error(
    recorder: Recorder, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR)

    def broken_mapper(exc: BaseException) -> JsonRpcError | None:
        raise ValueError("mapper bug")

    dispatcher = Dispatcher(recorder.methods(), error_mapper=broken_mapper)
    payload = await reply_of(dispatcher, encode(req("boom", id=1)))
    assert payload == err(1, -32603, "Internal error")
    assert SECRET in caplog.text
    assert "mapper bug" in caplog.text


@pytest.mark.asyncio
async def test_cancellation_is_not_swallowed() -> None:
    async def cancelled(params: Any, context: Any) -> Any:
        raise asyncio.CancelledError

    dispatcher = Dispatcher({"c": Method(cancelled)})
    with pytest.raises(asyncio.CancelledError):
        await dispatcher.dispatch(encode(req("c")), None)


def test_error_response_applies_the_same_mapping(
    dispatcher: Dispatcher, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR)
    rpc = dispatcher.error_response(InvalidParamsError(data=[1]), "a")
    assert rpc == err("a", -32602, "Invalid parameters", data=[1])
    assert dispatcher.error_response(KeyError("k"), 5) == err(5, TASK_NOT_FOUND, "Task not found")
    assert caplog.records == []
    unexpected = dispatcher.error_response(RuntimeError(SECRET), None)
    assert unexpected == err(None, -32603, "Internal error")
    [record] = caplog.records
    assert record.exc_info is not None
    assert isinstance(record.exc_info[1], RuntimeError)
    assert SECRET in caplog.text


# --- notifications ----------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_notification_is_executed_without_reply(
    dispatcher: Dispatcher, recorder: Recorder
) -> None:
    result = await dispatcher.dispatch(encode(note("echo", {"x": 1})), "ctx")
    assert result == NoReply()
    assert recorder.calls == [("echo", {"x": 1}, "ctx")]


@pytest.mark.asyncio
@pytest.mark.parametrize("method", ["rpc_fail", "mapped", "boom", "nope"])
async def test_failing_notification_has_no_reply(
    dispatcher: Dispatcher, recorder: Recorder, method: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR)
    result = await dispatcher.dispatch(encode(note(method)), "ctx")
    assert result == NoReply()
    assert [call[0] for call in recorder.calls] == ([] if method == "nope" else [method])


@pytest.mark.asyncio
async def test_unexpected_error_in_notification_is_still_logged(
    dispatcher: Dispatcher, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR)
    await dispatcher.dispatch(encode(note("boom")), None)
    assert SECRET in caplog.text


@pytest.mark.asyncio
async def test_null_id_request_is_answered(dispatcher: Dispatcher) -> None:
    payload = await reply_of(dispatcher, encode(req("echo", id=None)))
    assert payload["id"] is None
    assert "result" in payload


# --- batches ----------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_empty_batch_is_single_error_object(dispatcher: Dispatcher) -> None:
    assert await reply_of(dispatcher, b"[]") == err(None, INVALID[1], INVALID[0])


@pytest.mark.asyncio
async def test_batch_keeps_request_order_and_runs_sequentially(
    dispatcher: Dispatcher, recorder: Recorder
) -> None:
    batch = [req("slow", ["a", 0.03], id=1), req("slow", ["b", 0], id=2), req("slow", ["c", 0.01])]
    payload = await reply_of(dispatcher, encode(batch))
    assert [item["result"] for item in payload] == ["a", "b", "c"]
    assert [item["id"] for item in payload] == [1, 2, 1]
    assert recorder.events == ["start a", "end a", "start b", "end b", "start c", "end c"]


@pytest.mark.asyncio
async def test_mixed_batch(dispatcher: Dispatcher, recorder: Recorder) -> None:
    batch = [
        req("echo", [1], id="first"),
        1,
        {"foo": "bar"},
        {"jsonrpc": "1.0", "method": "echo", "id": 5},
        {"jsonrpc": "2.0", "method": "echo", "id": True},
        note("echo", [2]),
        req("nope", id=6),
        req("rpc_fail", id=7),
        req("mapped", id=8),
        [],
        req("echo", [3], id="last"),
    ]
    payload = await reply_of(dispatcher, encode(batch))
    assert payload == [
        {"jsonrpc": "2.0", "id": "first", "result": {"params": [1], "context": "ctx"}},
        err(None, INVALID[1], INVALID[0]),
        err(None, INVALID[1], INVALID[0]),
        err(5, INVALID[1], INVALID[0]),
        err(None, INVALID[1], INVALID[0]),
        err(6, -32601, "Method not found"),
        err(7, -32602, "Bad field", data={"field": "message"}),
        err(8, TASK_NOT_FOUND, "Task not found"),
        err(None, INVALID[1], INVALID[0]),
        {"jsonrpc": "2.0", "id": "last", "result": {"params": [3], "context": "ctx"}},
    ]
    assert [call[1] for call in recorder.calls if call[0] == "echo"] == [[1], [2], [3]]


@pytest.mark.asyncio
async def test_batch_of_invalid_scalars(dispatcher: Dispatcher) -> None:
    payload = await reply_of(dispatcher, b"[1, 2, 3]")
    assert payload == [err(None, INVALID[1], INVALID[0])] * 3


@pytest.mark.asyncio
async def test_batch_of_notifications_only(dispatcher: Dispatcher, recorder: Recorder) -> None:
    body = encode([note("echo", [1]), note("boom"), note("nope"), note("echo", [2])])
    result = await dispatcher.dispatch(body, "ctx")
    assert result == NoReply()
    assert [call[:2] for call in recorder.calls] == [("echo", [1]), ("boom", None), ("echo", [2])]


@pytest.mark.asyncio
async def test_streaming_method_in_batch_is_rejected(
    dispatcher: Dispatcher, recorder: Recorder
) -> None:
    body = encode([req("count", {"n": 2}, id=1), note("count", {"n": 2}), req("echo", id=2)])
    payload = await reply_of(dispatcher, body)
    assert payload == [
        err(1, INVALID[1], STREAMING_IN_BATCH_MESSAGE),
        {"jsonrpc": "2.0", "id": 2, "result": {"params": None, "context": "ctx"}},
    ]
    assert [call[0] for call in recorder.calls] == ["echo"]


@pytest.mark.asyncio
async def test_single_element_batch_replies_with_a_list(dispatcher: Dispatcher) -> None:
    payload = await reply_of(dispatcher, encode([req("echo", id=1)]))
    assert isinstance(payload, list)
    assert len(payload) == 1


# --- streaming --------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_single_streaming_request_returns_stream_reply(
    dispatcher: Dispatcher, recorder: Recorder
) -> None:
    result = await dispatcher.dispatch(encode(req("count", {"n": 2}, id="s")), "ctx")
    assert isinstance(result, StreamReply)
    assert result.request == Request("count", {"n": 2}, "s", is_notification=False)
    assert result.method.streaming is True
    assert recorder.calls == []


@pytest.mark.asyncio
async def test_streaming_notification_still_returns_stream_reply(
    dispatcher: Dispatcher, recorder: Recorder
) -> None:
    result = await dispatcher.dispatch(encode(note("count", {"n": 1})), "ctx")
    assert isinstance(result, StreamReply)
    assert result.request.is_notification is True
    assert recorder.calls == []


async def stream_of(dispatcher: Dispatcher, body: bytes, context: Any = "ctx") -> Any:
    result = await dispatcher.dispatch(body, context)
    assert isinstance(result, StreamReply)
    return dispatcher.stream(result.request, result.method, context)


@pytest.mark.asyncio
async def test_stream_yields_success_per_item(dispatcher: Dispatcher, recorder: Recorder) -> None:
    items = await collect(await stream_of(dispatcher, encode(req("count", {"n": 3}, id="s"))))
    assert items == [{"jsonrpc": "2.0", "id": "s", "result": i} for i in range(3)]
    assert recorder.calls == [("count", {"n": 3}, "ctx")]
    assert recorder.stream_closed is True


def make_stream_dispatcher(handler: Any, **kwargs: Any) -> tuple[Dispatcher, Request, Method]:
    method = Method(handler, streaming=True)
    request = Request("s", None, 11, is_notification=False)
    return Dispatcher({"s": method}, error_mapper=map_lookup, **kwargs), request, method


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (InvalidParamsError(data="d"), err(11, -32602, "Invalid parameters", data="d")),
        (LookupError("x"), err(11, TASK_NOT_FOUND, "Task not found")),
        (RuntimeError(SECRET), err(11, -32603, "Internal error")),
    ],
)
async def test_stream_error_mid_iteration_ends_with_error_item(
    exc: Exception, expected: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR)
    closed: list[bool] = []

    async def gen() -> AsyncIterator[str]:
        try:
            yield "a"
            yield "b"
            raise exc
        finally:
            closed.append(True)

    async def handler(params: Any, context: Any) -> AsyncIterator[str]:
        return gen()

    dispatcher, request, method = make_stream_dispatcher(handler)
    items = await collect(dispatcher.stream(request, method, None))
    assert items == [
        {"jsonrpc": "2.0", "id": 11, "result": "a"},
        {"jsonrpc": "2.0", "id": 11, "result": "b"},
        expected,
    ]
    assert closed == [True]
    assert (SECRET in caplog.text) is isinstance(exc, RuntimeError)


@pytest.mark.asyncio
async def test_stream_handler_failure_yields_one_error(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR)

    async def handler(params: Any, context: Any) -> AsyncIterator[str]:
        raise RuntimeError(SECRET)

    dispatcher, request, method = make_stream_dispatcher(handler, internal_error_data=error_data)
    [item] = await collect(dispatcher.stream(request, method, None))
    error_id = item["error"]["data"]["errorId"]
    assert item == err(11, -32603, "Internal error", data={"errorId": error_id})
    assert f"JSON-RPC method s failed (request id {error_id})" in caplog.text
    assert "Traceback" in caplog.text


@pytest.mark.asyncio
async def test_stream_handler_returning_non_iterable_is_internal_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR)

    async def handler(params: Any, context: Any) -> Any:
        return 42

    dispatcher, request, method = make_stream_dispatcher(handler)
    assert await collect(dispatcher.stream(request, method, None)) == [
        err(11, -32603, "Internal error")
    ]


@pytest.mark.asyncio
async def test_stream_early_close_closes_handler_iterator(recorder: Recorder) -> None:
    dispatcher = Dispatcher(recorder.methods())
    stream = await stream_of(dispatcher, encode(req("count", {"n": 1000}, id=1)))
    async with contextlib.aclosing(stream):
        assert (await anext(stream))["result"] == 0
        assert (await anext(stream))["result"] == 1
        assert recorder.stream_closed is False
    assert recorder.stream_closed is True


@pytest.mark.asyncio
async def test_stream_early_close_closes_plain_async_iterator() -> None:
    class Source:
        def __init__(self) -> None:
            self.closed = False

        def __aiter__(self) -> "Source":
            return self

        async def __anext__(self) -> int:
            return 1

        async def aclose(self) -> None:
            self.closed = True

    source = Source()

    async def handler(params: Any, context: Any) -> Source:
        return source

    dispatcher, request, method = make_stream_dispatcher(handler)
    stream = dispatcher.stream(request, method, None)
    assert await anext(stream) == {"jsonrpc": "2.0", "id": 11, "result": 1}
    await stream.aclose()
    assert source.closed is True


@pytest.mark.asyncio
async def test_stream_accepts_async_iterable_without_aclose() -> None:
    class Iterable:
        def __aiter__(self) -> AsyncIterator[int]:
            return self._items()

        async def _items(self) -> AsyncIterator[int]:
            yield 1

    async def handler(params: Any, context: Any) -> Iterable:
        return Iterable()

    dispatcher, request, method = make_stream_dispatcher(handler)
    assert await collect(dispatcher.stream(request, method, None)) == [
        {"jsonrpc": "2.0", "id": 11, "result": 1}
    ]


# --- property: arbitrary input never breaks the dispatcher ------------------------------------

_text = st.text(alphabet=st.characters(codec="utf-8"), max_size=10)
_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | _text
)
_json = st.recursive(
    _scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_text, children, max_size=4),
    max_leaves=15,
)
_request_like = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["2.0", "1.0", 2.0]) | _scalars,
        "method": st.sampled_from(["echo", "rpc_fail", "boom", "mapped", "count", "x"]) | _json,
        "id": _json,
        "params": _json,
    },
)
_bodies = _json | _request_like | st.lists(_request_like | _json, max_size=5)


def _valid_id(value: Any) -> bool:
    return value is None or (isinstance(value, str | int | float) and not isinstance(value, bool))


def _assert_well_formed(response: Any) -> None:
    assert isinstance(response, dict)
    assert response["jsonrpc"] == "2.0"
    assert _valid_id(response["id"])
    assert set(response) in ({"jsonrpc", "id", "result"}, {"jsonrpc", "id", "error"})
    if "error" in response:
        error = response["error"]
        assert isinstance(error["code"], int)
        assert isinstance(error["message"], str)
        assert set(error) <= {"code", "message", "data"}


def _check_result(obj: Any, result: Any) -> None:
    if isinstance(result, StreamReply):
        assert isinstance(obj, dict)
        assert result.method.streaming
        return
    if isinstance(result, NoReply):
        assert isinstance(obj, dict | list)
        return
    assert isinstance(result, Reply)
    msgspec.json.encode(result.payload)
    if isinstance(result.payload, list):
        assert isinstance(obj, list)
        assert 0 < len(result.payload) <= len(obj)
        for response in result.payload:
            _assert_well_formed(response)
        return
    _assert_well_formed(result.payload)
    if isinstance(obj, dict) and _valid_id(obj.get("id")) and "id" in obj:
        assert result.payload["id"] == obj["id"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(obj=_bodies)
def test_dispatch_never_raises_and_is_well_formed(obj: Any) -> None:
    logging.getLogger(DISPATCHER_LOGGER).disabled = True
    try:
        result = asyncio.run(
            Dispatcher(Recorder().methods(), error_mapper=map_lookup).dispatch(encode(obj), "ctx")
        )
    finally:
        logging.getLogger(DISPATCHER_LOGGER).disabled = False
    _check_result(obj, result)


@settings(max_examples=200, deadline=None)
@given(body=st.binary(max_size=64))
def test_dispatch_never_raises_on_arbitrary_bytes(body: bytes) -> None:
    result = asyncio.run(Dispatcher({}).dispatch(body, None))
    assert isinstance(result, Reply | NoReply)
    if isinstance(result, Reply) and isinstance(result.payload, dict):
        _assert_well_formed(result.payload)


# --- bounds: batch items and the size of a batch's answers ----------------------------------


@pytest.mark.asyncio
async def test_a_batch_over_the_item_limit_is_one_invalid_request_and_runs_nothing(
    recorder: Recorder,
) -> None:
    dispatcher = Dispatcher(recorder.methods(), max_batch_items=3)
    payload = await reply_of(dispatcher, encode([req("echo", id=n) for n in range(4)]))
    assert payload == err(None, -32600, "A batch may hold at most 3 requests; this one holds 4")
    assert recorder.calls == []
    at_limit = await reply_of(dispatcher, encode([req("echo", id=n) for n in range(3)]))
    assert [answer["id"] for answer in at_limit] == [0, 1, 2]


@pytest.mark.asyncio
async def test_a_batch_whose_answers_pass_the_byte_limit_runs_no_more_requests(
    recorder: Recorder,
) -> None:
    dispatcher = Dispatcher(recorder.methods(), max_response_bytes=300)
    big = "x" * 150
    body = encode(
        [
            req("echo", [big], id=1),  # runs: the answers are still under the limit
            req("echo", [big], id=2),  # runs: under the limit before it, over after it
            req("echo", [big], id=3),  # not run
            {"jsonrpc": "2.0", "method": "echo", "params": ["note"]},  # not run, no answer
            {"jsonrpc": "1.0", "method": "echo", "id": 5},  # invalid whatever the size
        ]
    )
    result = await dispatcher.dispatch(body, "ctx")
    assert isinstance(result, Reply)
    first, second, third, invalid = result.payload
    assert [first["id"], second["id"]] == [1, 2]
    assert "result" in first
    assert "result" in second
    assert third["id"] == 3
    assert third["error"]["code"] == -32600
    assert "Not run" in third["error"]["message"]
    assert "300 bytes" in third["error"]["message"]
    assert invalid["error"]["code"] == -32600
    assert [call[1] for call in recorder.calls] == [[big], [big]]
    assert msgspec.json.decode(result.encoded()) == result.payload  # the body is the payload


@pytest.mark.asyncio
async def test_a_result_that_cannot_be_encoded_is_an_internal_error(recorder: Recorder) -> None:
    dispatcher = Dispatcher(recorder.methods())
    result = await dispatcher.dispatch(encode(req("echo", id=9)), object())
    assert isinstance(result, Reply)
    assert result.payload["id"] == 9
    assert result.payload["error"]["code"] == -32603
    assert msgspec.json.decode(result.encoded()) == result.payload
