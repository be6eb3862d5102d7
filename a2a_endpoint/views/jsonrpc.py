"""The JSON-RPC endpoint: POST a JSON-RPC 2.0 request or batch, answered in JSON or SSE."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from typing import Any

import msgspec
from asgiref.sync import SyncToAsync
from django.core.signals import setting_changed
from django.db import connections
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.utils.decorators import method_decorator
from django.views import View
from django.views.decorators.csrf import csrf_exempt

from a2a_endpoint import auth, jsonrpc, logs, metrics, rpc
from a2a_endpoint.conf import SETTING_NAME, app_settings
from a2a_endpoint.rpc import RpcContext, build_dispatcher
from a2a_endpoint.service.streams import Keepalive
from a2a_endpoint.store import StoredEvent
from a2a_endpoint.streaming.presence import presence
from a2a_endpoint.streaming.sse import encode_sse, keepalive
from a2a_endpoint.views.card import jsonrpc_url
from a2a_endpoint.views.observed import count_unrouted, counted, note_access, refused_under_wsgi

JSON_TYPES = frozenset({"application/json", "application/a2a+json"})
VERSION_HEADER = "A2A-Version"
EXTENSIONS_HEADER = "A2A-Extensions"


@functools.cache
def _dispatcher() -> jsonrpc.Dispatcher:
    return build_dispatcher()


def _reset(*, setting: str, **kwargs: Any) -> None:
    if setting == SETTING_NAME:
        _dispatcher.cache_clear()


setting_changed.connect(_reset)


def _json(payload: Any, status: int = 200, context: RpcContext | None = None) -> HttpResponse:
    return _json_body(msgspec.json.encode(payload), status, context)


def _json_body(body: bytes, status: int = 200, context: RpcContext | None = None) -> HttpResponse:
    response = HttpResponse(body, content_type="application/json", status=status)
    if context is not None and (activated := context.activated_extensions):
        response[EXTENSIONS_HEADER] = ", ".join(sorted(activated))
    return response


def _refusal(status: int, message: str) -> HttpResponse:
    """An HTTP-level refusal that still carries a JSON-RPC error body (id unknown: null)."""
    error = jsonrpc.InvalidRequestError(message)
    return _json(jsonrpc.failure(None, error), status=status)


class _Id(msgspec.Struct):
    id: str | int | None = None


def _request_id(body: bytes) -> str | int | None:
    """The ``id`` of a single request in ``body``, for a refusal's error (null otherwise)."""
    try:
        return msgspec.json.decode(body, type=_Id).id
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None  # not JSON, a batch, or no valid id


def _refused(refusal: auth.Refusal, body: bytes) -> HttpResponse:
    """401/403/429 before any method ran, with a JSON-RPC error body (A2A §3.3.2)."""
    error = rpc.map_error(refusal.error)
    return refusal.apply(_json(jsonrpc.failure(_request_id(body), error)))


def _header_list(value: str) -> frozenset[str]:
    return frozenset(item.strip() for item in value.split(",") if item.strip())


async def _context(request: HttpRequest) -> RpcContext:
    caller = await auth.authenticate(request)
    logs.update(caller=caller.owner, tenant=caller.tenant or None)
    version = request.headers.get(VERSION_HEADER) or request.GET.get(VERSION_HEADER)
    extensions = request.headers.get(EXTENSIONS_HEADER) or request.headers.get("X-A2A-Extensions")
    return RpcContext(
        caller=caller,
        version=version,
        requested_extensions=_header_list(extensions or ""),
        last_event_id=request.headers.get("Last-Event-ID"),
        interface_url=functools.partial(jsonrpc_url, request),
    )


def _is_error(payload: Any, code: int) -> bool:
    """``payload`` is one response (not a batch) carrying error ``code``."""
    return isinstance(payload, dict) and (payload.get("error") or {}).get("code") == code


def _declared_length(request: HttpRequest) -> int:
    try:
        return int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:  # a malformed header is no reason for a 500: the real size decides
        return 0


def _read_body(request: HttpRequest) -> bytes | HttpResponse:
    """The body, or a refusal when it is too large or not JSON (checked before parsing)."""
    limit = int(app_settings.MAX_REQUEST_BYTES)
    if _declared_length(request) > limit:
        return _too_large(limit)
    # A JSON content type makes browsers preflight cross-site calls (no CSRF via forms).
    if request.content_type not in JSON_TYPES:
        return _refusal(415, "Content-Type must be application/json")
    # read(), not .body: MAX_REQUEST_BYTES alone is the limit (not DATA_UPLOAD_MAX_MEMORY_SIZE),
    # and at most limit + 1 bytes are read when Content-Length lies or is absent.
    body = request.read(limit + 1)
    return _too_large(limit) if len(body) > limit else body


def _too_large(limit: int) -> HttpResponse:
    return _refusal(413, f"Request body is larger than {limit} bytes")


def _release_request_thread() -> None:
    """Give back the thread Django's ASGI handler keeps for this request while it streams.

    The handler runs each request in an asgiref ``ThreadSensitiveContext``, whose one-thread
    executor (used by thread-sensitive sync code: signal receivers, sync middleware, session
    lookups) lives until the response ends (``a2a_endpoint.asgi``'s handler lends it from a
    pool and takes it back then). A stream lasts minutes and needs no thread: when its body
    starts (after the middleware), close that thread's DB connection and let it exit (it is
    not given back). Thread-sensitive code later in the request (``request_finished``) gets
    a fresh executor, shut down with the context.
    """
    context = SyncToAsync.thread_sensitive_context.get(None)
    executors = getattr(SyncToAsync, "context_to_thread_executor", None)
    if context is None or executors is None:
        return
    executor = executors.pop(context, None)
    if executor is not None:
        executor.submit(connections.close_all)
        executor.shutdown(wait=False)


def _frame(item: dict[str, Any]) -> bytes:
    """One SSE frame: a JSON-RPC response per event, ``id:`` its task event seq."""
    result = item.get("result")
    if isinstance(result, Keepalive):
        return keepalive()
    if isinstance(result, StoredEvent):
        # {"jsonrpc":"2.0","id":…,"result":…} around the payload encoded once per event:
        # a thousand streams of one task do not encode it a thousand times.
        response = b'{"jsonrpc":"2.0","id":%b,"result":%b}' % (
            msgspec.json.encode(item["id"]),
            result.payload_json,
        )
        return encode_sse(response, event_id=result.seq)
    return encode_sse(msgspec.json.encode(item))  # an error after the stream started


async def _sse(items: AsyncIterator[dict[str, Any]], method: str) -> AsyncIterator[bytes]:
    # Here the middleware is done with the response (it may run thread-sensitive code).
    _release_request_thread()
    with metrics.stream_open(rpc.BINDING, method):  # until it ends or the client leaves
        # A comment first: headers and a first byte reach the client (and proxies) at once.
        yield keepalive("stream opened")
        async for item in items:
            yield _frame(item)


@method_decorator(csrf_exempt, name="dispatch")
class JsonRpcView(View):
    """POST a JSON-RPC 2.0 request or batch; A2A methods answer JSON or an SSE stream."""

    http_method_names = ["post"]

    @logs.access_logged
    async def post(self, request: HttpRequest) -> HttpResponse:
        await presence.beat()  # EVENT_BUS "memory": at most one heartbeat an interval
        body = _read_body(request)
        if isinstance(body, HttpResponse):
            return counted(body)
        try:
            context = await _context(request)
        except auth.Refusal as refusal:
            return counted(_refused(refusal, body))
        except Exception as exc:
            # A broken resolver is a server error, answered in JSON-RPC (logged, request id).
            metrics.request_refused(rpc.BINDING, str(jsonrpc.INTERNAL_ERROR))
            return _json(_dispatcher().error_response(exc, _request_id(body)))
        outcome = await _dispatcher().dispatch(body, context)
        note_access(request, body, outcome)
        if isinstance(outcome, jsonrpc.Reply):
            count_unrouted(outcome.payload)
            response = _json_body(outcome.encoded(), context=context)
            if _is_error(outcome.payload, rpc.UNAUTHENTICATED):
                # A method that needs a caller the endpoint let in anonymously (the
                # extended card): a 401 with the challenges, as authentication failures are.
                auth.unauthenticated(request).apply(response)
            return response
        if isinstance(outcome, jsonrpc.NoReply):
            return HttpResponse(status=204)
        if (refused := refused_under_wsgi(request, outcome)) is not None:
            return refused
        return await self.stream(outcome, context)

    async def stream(self, outcome: jsonrpc.StreamReply, context: RpcContext) -> HttpResponse:
        items = _dispatcher().stream(outcome.request, outcome.method, context)
        first = await anext(items)
        if "error" in first or outcome.request.is_notification:
            # Errors found before the stream starts are a plain JSON-RPC response (A2A §9.4).
            await items.aclose()
            if outcome.request.is_notification:
                return HttpResponse(status=204)
            return _json(first, context=context)
        method = outcome.request.method  # a registered streaming method's name
        response = StreamingHttpResponse(_sse(items, method), content_type="text/event-stream")
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"  # nginx: do not buffer the stream
        return response

    async def http_method_not_allowed(
        self, request: HttpRequest, *args: Any, **kwargs: Any
    ) -> HttpResponse:
        response = _refusal(405, "The JSON-RPC endpoint accepts POST only")
        response["Allow"] = "POST"
        return counted(response)
