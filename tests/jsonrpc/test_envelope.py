"""Tests for the JSON-RPC envelope: body decoding, request validation, response shapes."""

import ast
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from a2a_endpoint import jsonrpc
from a2a_endpoint.jsonrpc import (
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    JsonRpcError,
    MethodNotFoundError,
    ParseError,
    Request,
    decode_body,
    failure,
    parse_request,
    success,
)

MAX_DEPTH = 100


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


# --- decode_body -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        b"{",
        b'{"jsonrpc": "2.0", "method": "x"',
        b"[1, 2",
        b'{"a": 1,}',
        b"{'a': 1}",
        b"foo",
        b'{"a": 1} trailing',
        b"01",
    ],
)
def test_invalid_json_is_parse_error(body: bytes) -> None:
    with pytest.raises(ParseError) as info:
        decode_body(body, max_depth=MAX_DEPTH)
    assert info.value.code == -32700


@pytest.mark.parametrize(
    "body",
    [
        b"\xff",
        b'"\xff\xfe"',
        '{"method": "caf\u00e9"}'.encode("latin-1"),
        b'{"jsonrpc": "2.0", "method": "\xc3"}',
    ],
)
def test_non_utf8_is_parse_error(body: bytes) -> None:
    with pytest.raises(ParseError):
        decode_body(body, max_depth=MAX_DEPTH)


@pytest.mark.parametrize(
    "body",
    [b"NaN", b"Infinity", b"-Infinity", b'{"x": NaN}', b"[Infinity]", b"[-Infinity]", b"1e400"],
)
def test_non_finite_numbers_are_parse_error(body: bytes) -> None:
    with pytest.raises(ParseError):
        decode_body(body, max_depth=MAX_DEPTH)


@pytest.mark.parametrize("body", [b"", b"   ", b"\n\t"])
def test_empty_body_is_parse_error(body: bytes) -> None:
    with pytest.raises(ParseError):
        decode_body(body, max_depth=MAX_DEPTH)


def test_depth_at_limit_is_accepted() -> None:
    value = decode_body(nested(MAX_DEPTH), max_depth=MAX_DEPTH)
    for _ in range(MAX_DEPTH - 1):
        assert isinstance(value, list)
        assert len(value) == 1
        value = value[0]
    assert value == []


@pytest.mark.parametrize("body", [nested(MAX_DEPTH + 1), b'{"a":' * 101 + b"1" + b"}" * 101])
def test_depth_over_limit_is_parse_error(body: bytes) -> None:
    with pytest.raises(ParseError):
        decode_body(body, max_depth=MAX_DEPTH)


def test_mixed_object_array_depth_is_measured() -> None:
    body = b'{"a": [{"b": [1]}]}'  # depth 4
    assert decode_body(body, max_depth=4) == {"a": [{"b": [1]}]}
    with pytest.raises(ParseError):
        decode_body(body, max_depth=3)


def test_wide_but_shallow_body_is_accepted() -> None:
    # Many brackets (so the cheap pre-check fails) but only depth 2.
    body = b"[" + b",".join([b"[]"] * 5000) + b"]"
    assert len(decode_body(body, max_depth=2)) == 5000


def test_brackets_inside_strings_do_not_count_as_depth() -> None:
    body = b'{"method": "' + b"[{" * 500 + b'"}'
    assert decode_body(body, max_depth=1) == {"method": "[{" * 500}


def test_scalar_string_full_of_brackets_is_accepted() -> None:
    assert decode_body(b'"' + b"[" * 300 + b'"', max_depth=1) == "[" * 300


@pytest.mark.parametrize("opener", [b"[", b'{"a":'])
def test_extreme_nesting_is_parse_error_quickly(opener: bytes) -> None:
    closer = b"]" if opener == b"[" else b"}"
    body = opener * 100_000 + b"1" + closer * 100_000
    started = time.perf_counter()
    with pytest.raises(ParseError):
        decode_body(body, max_depth=MAX_DEPTH)
    assert time.perf_counter() - started < 2.0


def test_recursion_error_from_decoder_becomes_parse_error() -> None:
    # Even with a huge configured limit, the decoder's own recursion guard must not leak.
    with pytest.raises(ParseError):
        decode_body(nested(sys.getrecursionlimit() * 10), max_depth=10**9)


def test_leading_bom_is_stripped() -> None:
    assert decode_body(b'\xef\xbb\xbf{"a": 1}', max_depth=MAX_DEPTH) == {"a": 1}


def test_bom_not_at_start_is_rejected() -> None:
    with pytest.raises(ParseError):
        decode_body(b' \xef\xbb\xbf{"a": 1}', max_depth=MAX_DEPTH)


def test_duplicate_keys_last_wins() -> None:
    assert decode_body(b'{"a": 1, "a": 2}', max_depth=MAX_DEPTH) == {"a": 2}


def test_big_integers_and_unicode_are_exact() -> None:
    value = decode_body(
        '{"n": 123456789012345678901234567890, "s": "h\u00e9\u6f22\U0001f600"}'.encode(),
        max_depth=MAX_DEPTH,
    )
    assert value == {"n": 123456789012345678901234567890, "s": "h\u00e9\u6f22\U0001f600"}
    assert type(value["n"]) is int


# --- parse_request -----------------------------------------------------------------------------


def valid(**overrides: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {"jsonrpc": "2.0", "method": "m", "id": 1}
    obj.update(overrides)
    return obj


def without(key: str, **overrides: Any) -> dict[str, Any]:
    obj = valid(**overrides)
    del obj[key]
    return obj


@pytest.mark.parametrize("obj", [[], [valid()], 1, 1.5, "x", None, True])
def test_non_object_is_invalid_request_with_null_id(obj: Any) -> None:
    with pytest.raises(InvalidRequestError) as info:
        parse_request(obj)
    assert info.value.code == -32600
    assert info.value.request_id is None


@pytest.mark.parametrize(
    "obj",
    [
        without("jsonrpc", id=7),
        valid(jsonrpc="1.0", id=7),
        valid(jsonrpc=2.0, id=7),
        valid(jsonrpc=2, id=7),
        valid(jsonrpc="2.0 ", id=7),
        valid(jsonrpc=None, id=7),
        without("method", id=7),
        valid(method=1, id=7),
        valid(method=None, id=7),
        valid(method=["m"], id=7),
        valid(params="a", id=7),
        valid(params=3, id=7),
        valid(params=None, id=7),
        valid(params=True, id=7),
    ],
)
def test_invalid_member_echoes_valid_id(obj: dict[str, Any]) -> None:
    with pytest.raises(InvalidRequestError) as info:
        parse_request(obj)
    assert info.value.request_id == 7


@pytest.mark.parametrize("bad_id", [True, False, {"a": 1}, [1], []])
def test_invalid_id_type_is_invalid_request_with_null_id(bad_id: Any) -> None:
    with pytest.raises(InvalidRequestError) as info:
        parse_request(valid(id=bad_id))
    assert info.value.request_id is None


def test_invalid_id_wins_over_other_errors() -> None:
    with pytest.raises(InvalidRequestError) as info:
        parse_request({"jsonrpc": "1.0", "id": True})
    assert info.value.request_id is None


@pytest.mark.parametrize(
    "request_id",
    [0, -1, 123456789012345678901234567890, 1.5, -0.25, "", "abc", "h\u00e9\U0001f600", None],
)
def test_valid_ids_are_kept_exactly(request_id: Any) -> None:
    request = parse_request(valid(id=request_id))
    assert request.id == request_id
    assert type(request.id) is type(request_id)
    assert request.is_notification is False


def test_missing_id_is_notification() -> None:
    request = parse_request(without("id", params=[1]))
    assert request == Request(method="m", params=[1], id=None, is_notification=True)


def test_null_id_is_not_a_notification() -> None:
    request = parse_request(valid(id=None))
    assert request.id is None
    assert request.is_notification is False


@pytest.mark.parametrize("params", [{"a": 1}, [1, 2], {}, []])
def test_structured_params_are_kept(params: Any) -> None:
    assert parse_request(valid(params=params)).params == params


def test_absent_params_is_none() -> None:
    assert parse_request(valid()).params is None


def test_extra_members_are_ignored() -> None:
    assert parse_request(valid(extra="x")).method == "m"


def test_request_is_frozen() -> None:
    request = parse_request(valid())
    with pytest.raises(AttributeError):
        request.method = "other"  # type: ignore[misc]


# --- errors and response builders --------------------------------------------------------------


@pytest.mark.parametrize(
    ("cls", "code", "message"),
    [
        (ParseError, -32700, "Invalid JSON payload"),
        (InvalidRequestError, -32600, "Request payload validation error"),
        (MethodNotFoundError, -32601, "Method not found"),
        (InvalidParamsError, -32602, "Invalid parameters"),
        (InternalError, -32603, "Internal error"),
    ],
)
def test_error_defaults(cls: type[JsonRpcError], code: int, message: str) -> None:
    error = cls()
    assert (error.code, error.message, error.data) == (code, message, None)
    assert (cls.default_code, cls.default_message) == (code, message)
    assert error.to_dict() == {"code": code, "message": message}
    assert isinstance(error, JsonRpcError)
    assert str(error) == message


def test_error_overrides_and_data() -> None:
    error = JsonRpcError("Task not found", data={"taskId": "t1"}, code=-32001)
    assert error.to_dict() == {
        "code": -32001,
        "message": "Task not found",
        "data": {"taskId": "t1"},
    }


@pytest.mark.parametrize("data", [0, "", [], {}, False])
def test_falsy_data_is_not_omitted(data: Any) -> None:
    assert InvalidParamsError(data=data).to_dict()["data"] == data


def test_success_and_failure_shapes() -> None:
    assert success("a", {"x": 1}) == {"jsonrpc": "2.0", "id": "a", "result": {"x": 1}}
    assert success(None, None) == {"jsonrpc": "2.0", "id": None, "result": None}
    assert failure(3, MethodNotFoundError(data="d")) == {
        "jsonrpc": "2.0",
        "id": 3,
        "error": {"code": -32601, "message": "Method not found", "data": "d"},
    }


def test_codes_constants() -> None:
    assert (jsonrpc.PARSE_ERROR, jsonrpc.INVALID_REQUEST, jsonrpc.METHOD_NOT_FOUND) == (
        -32700,
        -32600,
        -32601,
    )
    assert (jsonrpc.INVALID_PARAMS, jsonrpc.INTERNAL_ERROR) == (-32602, -32603)
    assert (jsonrpc.SERVER_ERROR_MIN, jsonrpc.SERVER_ERROR_MAX) == (-32099, -32000)


def test_all_exports_exist() -> None:
    missing = [name for name in jsonrpc.__all__ if not hasattr(jsonrpc, name)]
    assert missing == []


def test_package_imports_only_stdlib_and_msgspec() -> None:
    allowed = set(sys.stdlib_module_names) | {"msgspec"}
    package_dir = Path(jsonrpc.__file__).parent
    offenders = []
    for path in sorted(package_dir.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        assert ast.get_docstring(tree), f"{path.name} lacks a module docstring"
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                roots = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                roots = [(node.module or "").split(".")[0]]
            else:
                continue
            offenders += [f"{path.name}: {root}" for root in roots if root not in allowed]
    assert offenders == []
