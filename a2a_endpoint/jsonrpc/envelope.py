"""JSON-RPC 2.0 envelope: body decoding, request validation and response building."""

from dataclasses import dataclass
from typing import Any, TypeAlias

import msgspec

from .errors import InvalidRequestError, JsonRpcError, ParseError

RequestId: TypeAlias = str | int | float | None

_BOM = b"\xef\xbb\xbf"
_MISSING: Any = object()


@dataclass(frozen=True, slots=True)
class Request:
    """A validated JSON-RPC request.

    ``params`` is None when the member was absent. ``is_notification`` is True
    only when the "id" member was absent; ``"id": null`` is a normal request
    whose id is null.
    """

    method: str
    params: dict[str, Any] | list[Any] | None
    id: RequestId
    is_notification: bool


def decode_body(body: bytes, *, max_depth: int) -> Any:
    """Decode a request body into Python values or raise :class:`ParseError`.

    Rejects invalid JSON, invalid UTF-8, ``NaN``/``Infinity`` literals, numbers
    out of float range, an empty body and arrays/objects nested deeper than
    ``max_depth`` (the top-level container counts as depth 1). A leading UTF-8
    BOM is stripped. Duplicate object keys are accepted; the last one wins.
    """
    if body.startswith(_BOM):
        body = body[len(_BOM) :]
    try:
        value = msgspec.json.decode(body)
    except (msgspec.DecodeError, RecursionError) as exc:
        # msgspec guards its C recursion with RecursionError; hostile nesting
        # must be a client error, never a crash.
        raise ParseError() from exc
    if _may_exceed_depth(body, max_depth) and _depth_exceeds(value, max_depth):
        raise ParseError()
    return value


def _may_exceed_depth(body: bytes, max_depth: int) -> bool:
    # C-speed upper bound on the nesting depth: nearly every real request stops here,
    # so the Python-level walk below only runs for bodies with many brackets.
    return body.count(b"[") + body.count(b"{") > max_depth


def _depth_exceeds(value: Any, max_depth: int) -> bool:
    # Iterative on purpose: recursion would reintroduce the stack-depth problem.
    # Only containers are ever pushed, so every popped node is a dict or a list.
    stack: list[tuple[Any, int]] = [(value, 1)] if isinstance(value, dict | list) else []
    while stack:
        node, depth = stack.pop()
        if depth > max_depth:
            return True
        children = node.values() if isinstance(node, dict) else node
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def _is_valid_id(value: Any) -> bool:
    # bool is a subclass of int in Python but not a JSON number.
    if isinstance(value, bool):
        return False
    return value is None or isinstance(value, str | int | float)


def parse_request(obj: Any) -> Request:
    """Validate one decoded JSON value as a request or raise :class:`InvalidRequestError`.

    The raised error's ``request_id`` is the request's id when the "id" member
    itself is valid, so the error response can echo it; otherwise None.
    """
    if not isinstance(obj, dict):
        raise InvalidRequestError()
    raw_id = obj.get("id", _MISSING)
    if raw_id is not _MISSING and not _is_valid_id(raw_id):
        raise InvalidRequestError()
    request_id = None if raw_id is _MISSING else raw_id
    _validate_members(obj, request_id)
    return Request(
        method=obj["method"],
        params=obj.get("params"),
        id=request_id,
        is_notification=raw_id is _MISSING,
    )


def _validate_members(obj: dict[str, Any], request_id: RequestId) -> None:
    jsonrpc = obj.get("jsonrpc")
    # type() check so that a str subclass cannot sneak through equality overrides.
    if type(jsonrpc) is not str or jsonrpc != "2.0":
        raise InvalidRequestError(request_id=request_id)
    if not isinstance(obj.get("method"), str):
        raise InvalidRequestError(request_id=request_id)
    # A present "params" must be structured; "params": null is not allowed by the spec.
    if "params" in obj and not isinstance(obj["params"], dict | list):
        raise InvalidRequestError(request_id=request_id)


def success(id: RequestId, result: Any) -> dict[str, Any]:
    """Build a JSON-RPC success response object."""
    return {"jsonrpc": "2.0", "id": id, "result": result}


def failure(id: RequestId, error: JsonRpcError) -> dict[str, Any]:
    """Build a JSON-RPC error response object."""
    return {"jsonrpc": "2.0", "id": id, "error": error.to_dict()}
