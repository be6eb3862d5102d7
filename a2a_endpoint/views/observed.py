"""What the JSON-RPC view tells the logs and the metrics about a request, and its refusal of
streams under WSGI (which cannot hold a stream open)."""

from __future__ import annotations

import functools
import logging
from typing import Any

import msgspec
from django.core.handlers.wsgi import WSGIRequest
from django.http import HttpRequest, HttpResponse

from a2a_endpoint import errors, jsonrpc, logs, metrics, rpc


def _json(payload: Any) -> HttpResponse:
    return HttpResponse(msgspec.json.encode(payload), content_type="application/json")


STREAMING_NEEDS_ASGI = (
    "Streaming needs an ASGI server (daphne); this one is WSGI (manage.py runserver is, "
    "unless 'daphne' is first in INSTALLED_APPS). Nothing was started."
)


def refused_under_wsgi(request: HttpRequest, outcome: jsonrpc.StreamReply) -> HttpResponse | None:
    """A stream asked of a WSGI server: -32004 before the method runs, not a 200 stream
    that ends after its first comment (WSGI cannot hold it open). Logged once a process."""
    if not isinstance(request, WSGIRequest) or outcome.request.is_notification:
        return None
    _log_wsgi_once()
    error = rpc.map_error(errors.UnsupportedOperationError(STREAMING_NEEDS_ASGI))
    return _json(jsonrpc.failure(outcome.request.id, error))


@functools.cache
def _log_wsgi_once() -> None:
    logging.getLogger("a2a_endpoint.views").error(
        "A stream was requested through WSGI and refused (-32004): streaming needs an ASGI "
        "server. Serve the project with daphne (daphne myproject.asgi:application), or put "
        "'daphne' first in INSTALLED_APPS so that runserver serves ASGI (README, "
        "'runserver vs daphne')."
    )


#: Errors answered before any method ran (the binding counts the rest, by method).
_UNROUTED = frozenset({jsonrpc.PARSE_ERROR, jsonrpc.INVALID_REQUEST, jsonrpc.METHOD_NOT_FOUND})


def count_unrouted(payload: dict[str, Any] | list[dict[str, Any]]) -> None:
    for response in payload if isinstance(payload, list) else (payload,):
        if "error" in response and (code := response["error"].get("code")) in _UNROUTED:
            metrics.request_refused(rpc.BINDING, str(code))


def counted(response: HttpResponse) -> HttpResponse:
    """An HTTP refusal before any method ran, counted as outcome ``http_<status>``."""
    metrics.request_refused(rpc.BINDING, f"http_{response.status_code}")
    return response


class _Call(msgspec.Struct):
    method: msgspec.Raw = msgspec.Raw(b"null")  # not decoded unless it is read


def _method_name(raw: msgspec.Raw) -> str:
    try:
        return logs.clean(msgspec.json.decode(raw, type=str))
    except (msgspec.DecodeError, msgspec.ValidationError):
        return "?"


def note_access(request: HttpRequest, body: bytes, outcome: jsonrpc.DispatchResult) -> None:
    """What the access line tells of a dispatched body: its method(s) and outcome."""
    access = getattr(request, "_a2a_access", None)
    if access is None or not logs.requests_logger.isEnabledFor(logging.INFO):
        return  # nobody reads the line: no second look at the body
    if isinstance(outcome, jsonrpc.StreamReply):
        access["method"] = outcome.request.method  # a registered (streaming) method's name
        return
    try:
        calls = msgspec.json.decode(body, type=_Call | list[_Call])
    except (msgspec.DecodeError, msgspec.ValidationError):
        calls = _Call()
    if isinstance(calls, list):
        # The batch's own line: no one item's task id (the context has the last one's).
        access.update(method="batch", methods=[_method_name(c.method) for c in calls])
        access["task_id"] = None
    else:
        access["method"] = _method_name(calls.method)
    if isinstance(outcome, jsonrpc.Reply):
        access.update(logs.outcome_of(outcome.payload))
