"""JSON-RPC 2.0 dispatch: routing single/batch requests to async methods and mapping errors."""

import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

import msgspec

from .envelope import Request, RequestId, decode_body, failure, parse_request, success
from .errors import (
    InternalError,
    InvalidRequestError,
    JsonRpcError,
    MethodNotFoundError,
    ParseError,
)

STREAMING_IN_BATCH_MESSAGE = "Streaming methods cannot be used in a batch"

ErrorMapper: TypeAlias = Callable[[BaseException], JsonRpcError | None]

_default_logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Method:
    """A registered method.

    ``handler`` is ``async (params, context) -> result``; for a streaming method
    the awaited result is an async iterator (or iterable) of results.
    """

    handler: Callable[[Any, Any], Awaitable[Any]]
    streaming: bool = False


@dataclass(frozen=True, slots=True)
class Reply:
    """An HTTP 200 JSON body: one response object or a batch list of them, and ``body``,
    that JSON encoded (None: not encoded yet)."""

    payload: dict[str, Any] | list[dict[str, Any]]
    body: bytes | None = None

    def encoded(self) -> bytes:
        return self.body if self.body is not None else msgspec.json.encode(self.payload)


@dataclass(frozen=True, slots=True)
class NoReply:
    """Nothing to send (HTTP 204): the body contained notifications only."""


@dataclass(frozen=True, slots=True)
class StreamReply:
    """A single streaming request; the transport drives :meth:`Dispatcher.stream`."""

    request: Request
    method: Method


DispatchResult: TypeAlias = Reply | NoReply | StreamReply


def _no_mapping(exc: BaseException) -> JsonRpcError | None:
    return None


def _new_error_id() -> str:
    return uuid.uuid4().hex


class Dispatcher:
    """Routes decoded JSON-RPC requests to :class:`Method` handlers.

    Pipeline: decode -> single or batch -> parse_request -> look up -> call -> wrap.
    Handler exceptions never escape: ``JsonRpcError`` is sent as is, others go
    through ``error_mapper`` and, if unmapped, are logged and answered with a
    bare -32603 whose ``data`` is ``internal_error_data(error_id)`` (if given).
    """

    def __init__(
        self,
        methods: Mapping[str, Method],
        *,
        error_mapper: ErrorMapper = _no_mapping,
        internal_error_data: Callable[[str], Any] | None = None,
        max_depth: int = 100,
        max_batch_items: int | None = None,
        max_response_bytes: int | None = None,
        encode: Callable[[Any], bytes] = msgspec.json.encode,
        logger: logging.Logger | None = None,
        error_id: Callable[[], str] | None = None,
    ) -> None:
        if max_depth < 1:
            raise ValueError("max_depth must be >= 1: a request object is already depth 1")
        # A batch holds at most max_batch_items requests (a larger one is one -32600), and
        # once its answers pass max_response_bytes the requests left are not run (each is
        # answered -32600): one body cannot make the server build an unbounded answer.
        self._max_batch_items = max_batch_items
        self._max_response_bytes = max_response_bytes
        self._encode = encode
        # Copied so that the routing table cannot change under a running server.
        self._methods: dict[str, Method] = dict(methods)
        self._error_mapper = error_mapper
        self._internal_error_data = internal_error_data
        self._max_depth = max_depth
        self._logger = logger if logger is not None else _default_logger
        # The id an internal error reports and logs (e.g. the HTTP request's); default: new.
        self._error_id = error_id if error_id is not None else _new_error_id

    async def dispatch(self, body: bytes, context: Any) -> DispatchResult:
        """Handle one HTTP body; never raises for any input bytes."""
        try:
            obj = decode_body(body, max_depth=self._max_depth)
        except ParseError as exc:
            return Reply(failure(None, exc))
        if isinstance(obj, list):
            return await self._dispatch_batch(obj, context)
        return await self._dispatch_single(obj, context)

    async def stream(
        self, request: Request, method: Method, context: Any
    ) -> AsyncIterator[dict[str, Any]]:
        """Yield one success response per streamed item, or a final error response.

        The handler's iterator is always closed, also when the consumer stops early.
        """
        try:
            iterator = aiter(await method.handler(request.params, context))
        except Exception as exc:
            yield self.error_response(exc, request.id, method=request.method)
            return
        try:
            while True:
                try:
                    item = await anext(iterator)
                except StopAsyncIteration:
                    return
                except Exception as exc:
                    yield self.error_response(exc, request.id, method=request.method)
                    return
                yield success(request.id, item)
        finally:
            await self._close(iterator, request.method)

    def error_response(
        self, exc: BaseException, request_id: RequestId, *, method: str | None = None
    ) -> dict[str, Any]:
        """Map ``exc`` to a JSON-RPC error response for ``request_id``.

        ``method`` is only used in the log record of unexpected errors.
        """
        return failure(request_id, self._to_jsonrpc_error(exc, method))

    async def _dispatch_single(self, obj: Any, context: Any) -> DispatchResult:
        try:
            request = parse_request(obj)
        except InvalidRequestError as exc:
            return Reply(failure(exc.request_id, exc))
        method = self._methods.get(request.method)
        if method is not None and method.streaming:
            # The transport picks the streaming framing, so the handler is not called here.
            return StreamReply(request, method)
        response = await self._call(request, method, context)
        if response is None:
            return NoReply()
        response, body = self._encoded(response, request)
        return Reply(response, body)

    async def _dispatch_batch(self, items: list[Any], context: Any) -> DispatchResult:
        if not items:
            # The spec answers an empty batch with a single error object, not a list.
            return Reply(failure(None, InvalidRequestError()))
        limit = self._max_batch_items
        if limit is not None and len(items) > limit:
            error = InvalidRequestError(
                f"A batch may hold at most {limit} requests; this one holds {len(items)}"
            )
            return Reply(failure(None, error))
        responses: list[dict[str, Any]] = []
        encoded: list[bytes] = []
        size = 2  # the brackets
        # Sequential on purpose: deterministic ordering of side effects within a batch.
        for item in items:
            if self._max_response_bytes is not None and size > self._max_response_bytes:
                response = self._not_run(item)
            else:
                response = await self._dispatch_batch_item(item, context)
            if response is not None:
                response, body = self._encoded(response, None)
                responses.append(response)
                encoded.append(body)
                size += len(body) + 1
        if not responses:
            return NoReply()
        return Reply(responses, b"[" + b",".join(encoded) + b"]")

    def _encoded(
        self, response: dict[str, Any], request: Request | None
    ) -> tuple[dict[str, Any], bytes]:
        """``response`` and its JSON; a result that cannot be encoded is a -32603 (logged),
        never an exception out of the dispatcher."""
        try:
            return response, self._encode(response)
        except Exception as exc:
            method = request.method if request is not None else None
            response = self.error_response(exc, response.get("id"), method=method)
            return response, self._encode(response)

    def _not_run(self, item: Any) -> dict[str, Any] | None:
        """The answer of a batch request left unrun: the batch's answers are full."""
        try:
            request = parse_request(item)
        except InvalidRequestError as exc:
            return failure(exc.request_id, exc)
        if request.is_notification:
            return None
        message = (
            f"Not run: the batch's answers passed {self._max_response_bytes} bytes; "
            "send this request again in another batch"
        )
        return failure(request.id, InvalidRequestError(message))

    async def _dispatch_batch_item(self, item: Any, context: Any) -> dict[str, Any] | None:
        try:
            request = parse_request(item)
        except InvalidRequestError as exc:
            return failure(exc.request_id, exc)
        method = self._methods.get(request.method)
        if method is not None and method.streaming:
            if request.is_notification:
                return None
            return failure(request.id, InvalidRequestError(STREAMING_IN_BATCH_MESSAGE))
        return await self._call(request, method, context)

    async def _call(
        self, request: Request, method: Method | None, context: Any
    ) -> dict[str, Any] | None:
        """Run a non-streaming request; None for notifications (executed, never answered)."""
        if method is None:
            response = failure(request.id, MethodNotFoundError())
        else:
            response = await self._invoke(request, method, context)
        return None if request.is_notification else response

    async def _invoke(self, request: Request, method: Method, context: Any) -> dict[str, Any]:
        try:
            result = await method.handler(request.params, context)
        except Exception as exc:
            # Exception, not BaseException: cancellation must keep propagating.
            return self.error_response(exc, request.id, method=request.method)
        return success(request.id, result)

    def _to_jsonrpc_error(self, exc: BaseException, method: str | None) -> JsonRpcError:
        if isinstance(exc, JsonRpcError):
            return exc
        mapped = self._map_error(exc)
        if mapped is not None:
            return mapped
        return self._internal_error(exc, method)

    def _map_error(self, exc: BaseException) -> JsonRpcError | None:
        try:
            mapped = self._error_mapper(exc)
        except Exception:
            # A broken mapper must not turn one failure into an escaping exception.
            self._logger.exception("JSON-RPC error mapper failed")
            return None
        return mapped if isinstance(mapped, JsonRpcError) else None

    def _internal_error(self, exc: BaseException, method: str | None) -> InternalError:
        # The id correlates the client-visible error with the server log, which holds
        # the traceback; exception text itself never reaches the client.
        error_id = self._error_id()
        self._logger.exception(
            "JSON-RPC method %s failed (request id %s)", method, error_id, exc_info=exc
        )
        data = None if self._internal_error_data is None else self._internal_error_data(error_id)
        return InternalError(data=data)

    async def _close(self, iterator: AsyncIterator[Any], method: str) -> None:
        aclose = getattr(iterator, "aclose", None)
        if aclose is None:
            return
        try:
            await aclose()
        except Exception:
            # Cleanup failures are worth a log line but must not replace the stream outcome.
            self._logger.exception("Closing the stream of JSON-RPC method %s failed", method)
