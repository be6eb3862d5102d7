"""The A2A JSON-RPC binding (A2A §9): method table, params decoding, versions, error codes."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from a2a_endpoint import errors, jsonrpc, logs, metrics, protojson, storable, types
from a2a_endpoint.conf import app_settings
from a2a_endpoint.service import get_request_handler
from a2a_endpoint.service.agent_card import (
    SUPPORTED_MAJOR_VERSIONS,
    declared_extensions,
    required_extensions,
)

#: The ``binding`` label of this binding's request metrics (docs/metrics.md).
BINDING = "jsonrpc"
ERROR_DOMAIN = "a2a-protocol.org"
ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
BAD_REQUEST = "type.googleapis.com/google.rpc.BadRequest"
REQUEST_INFO = "type.googleapis.com/google.rpc.RequestInfo"
UNAUTHENTICATED = -31401
PERMISSION_DENIED = -31403
THROTTLED = -31429

# The one table from A2A errors to JSON-RPC codes (A2A §5.4). Subclasses inherit their
# parent's code; TaskStateError reaches a client only through a race, as "not supported".
ERROR_CODES: dict[type[errors.A2AError], int] = {
    errors.TaskNotFoundError: -32001,
    errors.TaskNotCancelableError: -32002,
    errors.PushNotificationNotSupportedError: -32003,
    errors.UnsupportedOperationError: -32004,
    errors.ContentTypeNotSupportedError: -32005,
    errors.InvalidAgentResponseError: -32006,
    errors.ExtendedAgentCardNotConfiguredError: -32007,
    errors.ExtensionSupportRequiredError: -32008,
    errors.VersionNotSupportedError: -32009,
    errors.InvalidParamsError: jsonrpc.INVALID_PARAMS,
    # A server condition, not a client error: -32603, with an ErrorInfo that says so.
    errors.ServiceUnavailableError: jsonrpc.INTERNAL_ERROR,
    errors.TaskStateError: -32004,
    # A2A defines no JSON-RPC codes for these (they are HTTP 401/403/429 at the transport):
    # application codes outside JSON-RPC's reserved range, the ones a2a-go uses.
    errors.UnauthenticatedError: UNAUTHENTICATED,
    errors.PermissionDeniedError: PERMISSION_DENIED,
    errors.ThrottledError: THROTTLED,
}


@dataclass(frozen=True, slots=True)
class RpcContext:
    """What the transport learned about the call: who, which version, which extensions."""

    caller: types.Caller
    version: str | None = None
    requested_extensions: frozenset[str] = frozenset()
    #: The SSE ``Last-Event-ID`` header: resume a SubscribeToTask after that event.
    last_event_id: str | None = None
    #: The absolute URL of this JSON-RPC interface, for the cards (computed when asked).
    interface_url: Callable[[], str] = str

    @property
    def activated_extensions(self) -> frozenset[str]:
        """Requested extensions this agent supports; unknown ones are ignored (A2A §3.6)."""
        return self.requested_extensions & declared_extensions()


@dataclass(frozen=True, slots=True)
class Operation:
    params_type: type[msgspec.Struct]
    service_method: str
    streaming: bool = False
    resumable: bool = False  # takes Last-Event-ID as ``resume_after``
    describes_interface: bool = False  # takes the interface's URL as ``jsonrpc_url``


# Wire method name → operation (A2A §9.4). PascalCase names are the v1.0 methods.
METHODS: dict[str, Operation] = {
    "SendMessage": Operation(types.SendMessageRequest, "send_message"),
    "SendStreamingMessage": Operation(
        types.SendMessageRequest, "send_streaming_message", streaming=True
    ),
    "GetTask": Operation(types.GetTaskRequest, "get_task"),
    "ListTasks": Operation(types.ListTasksRequest, "list_tasks"),
    "CancelTask": Operation(types.CancelTaskRequest, "cancel_task"),
    "SubscribeToTask": Operation(
        types.SubscribeToTaskRequest, "subscribe_to_task", streaming=True, resumable=True
    ),
    "CreateTaskPushNotificationConfig": Operation(
        types.TaskPushNotificationConfig, "create_task_push_notification_config"
    ),
    "GetTaskPushNotificationConfig": Operation(
        types.GetTaskPushNotificationConfigRequest, "get_task_push_notification_config"
    ),
    "ListTaskPushNotificationConfigs": Operation(
        types.ListTaskPushNotificationConfigsRequest, "list_task_push_notification_configs"
    ),
    "DeleteTaskPushNotificationConfig": Operation(
        types.DeleteTaskPushNotificationConfigRequest, "delete_task_push_notification_config"
    ),
    "GetExtendedAgentCard": Operation(
        types.GetExtendedAgentCardRequest, "get_extended_agent_card", describes_interface=True
    ),
}

# v0.3 method names (A2A v0.3 §7): not served yet; answered -32009 to 0.3 callers.
V03_METHODS = frozenset(
    {
        "message/send",
        "message/stream",
        "tasks/get",
        "tasks/cancel",
        "tasks/resubscribe",
        "tasks/pushNotificationConfig/set",
        "tasks/pushNotificationConfig/get",
        "tasks/pushNotificationConfig/list",
        "tasks/pushNotificationConfig/delete",
        "agent/getAuthenticatedExtendedCard",
    }
)


def negotiate_version(version: str | None) -> None:
    """A2A §3.6.2: Major.Minor decides, patch is ignored; an unsupported one is -32009."""
    if not version:
        if app_settings.STRICT_VERSION:
            raise errors.VersionNotSupportedError(
                "The A2A-Version header is required", supportedVersions="1.0"
            )
        return  # documented leniency: PascalCase methods without a version are 1.0
    major = version.strip().split(".", 1)[0]
    if major not in SUPPORTED_MAJOR_VERSIONS:
        raise errors.VersionNotSupportedError(
            f"A2A version {version} is not supported",
            requestedVersion=version,
            supportedVersions="1.0",
        )


def check_extensions(context: RpcContext) -> None:
    missing = required_extensions() - context.requested_extensions
    if missing:
        raise errors.ExtensionSupportRequiredError(
            "This agent requires extensions the request did not activate",
            extensions=",".join(sorted(missing)),
        )


_AT_PATH = re.compile(r" - at `\$(?P<path>[^`]*)`$")
_MISSING = re.compile(r"^Object missing required field `(?P<field>[^`]+)`$")
_NAMED = re.compile(r"^(?P<field>[A-Za-z][A-Za-z0-9]*): (?P<text>.+)$")


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def field_violation(exc: msgspec.ValidationError) -> tuple[str, str]:
    """The offending field (ProtoJSON path under ``params``) and what is wrong with it."""
    text = str(exc)
    match = _AT_PATH.search(text)
    path = match["path"].lstrip(".") if match else ""
    description = text[: match.start()] if match else text
    if missing := _MISSING.match(description):
        return _join(path, missing["field"]), f"{missing['field']} is required"
    if named := _NAMED.match(description):
        return _join(path, named["field"]), named["text"]
    return path, description


def decode_params(params: Any, params_type: type[msgspec.Struct]) -> Any:
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise errors.InvalidParamsError(
            field="params", description="params must be an object (by-name parameters)"
        )
    params = protojson.normalize(params, params_type)  # first: storable's paths are JSON names
    # Before the types: a value the database cannot hold is the client's error, not a
    # -32603 from deep inside a write (a2a_endpoint.storable).
    if (unstorable := storable.violation(params)) is not None:
        raise errors.InvalidParamsError(field=unstorable[0], description=unstorable[1])
    try:
        return msgspec.convert(params, params_type, strict=False)
    except msgspec.ValidationError as exc:
        name, description = field_violation(exc)
        raise errors.InvalidParamsError(field=name, description=description) from None


class StreamOpened:
    """First item of every accepted stream: the request passed validation, start the SSE."""


STREAM_OPENED = StreamOpened()


class _Opened:
    """``events`` after STREAM_OPENED; closing it closes ``events``, also before the first
    item (a generator that never started would not: its ``finally`` would never run)."""

    def __init__(self, events: AsyncIterator[Any]) -> None:
        self._events = events
        self._opened = False

    def __aiter__(self) -> _Opened:
        return self

    async def __anext__(self) -> Any:
        if not self._opened:
            self._opened = True
            return STREAM_OPENED
        return await anext(self._events)

    async def aclose(self) -> None:
        aclose = getattr(self._events, "aclose", None)
        if aclose is not None:
            await aclose()


def resume_after(last_event_id: str | None) -> dict[str, int]:
    """``Last-Event-ID`` as the service's ``resume_after``: a non-negative event number."""
    if last_event_id is None:
        return {}
    if not last_event_id.strip().isdigit():
        raise errors.InvalidParamsError(
            field="Last-Event-ID", description="Last-Event-ID must be an event number"
        )
    return {"resume_after": int(last_event_id)}


def _bind(operation: Operation) -> jsonrpc.Method:
    async def call(params: Any, context: RpcContext) -> Any:
        negotiate_version(context.version)
        check_extensions(context)
        typed = decode_params(params, operation.params_type)
        kwargs = resume_after(context.last_event_id) if operation.resumable else {}
        if operation.describes_interface:
            kwargs["jsonrpc_url"] = context.interface_url()
        handler = get_request_handler()
        result = await getattr(handler, operation.service_method)(typed, context.caller, **kwargs)
        return _Opened(aiter(result)) if operation.streaming else result

    return jsonrpc.Method(call, streaming=operation.streaming)


async def _legacy_method(params: Any, context: RpcContext) -> Any:
    if not context.version or context.version.strip().startswith("0."):
        raise errors.VersionNotSupportedError(
            "A2A v0.3 methods are not served; use the v1.0 methods", supportedVersions="1.0"
        )
    # An explicit unsupported version is -32009 whatever the method (A2A §3.6.2).
    negotiate_version(context.version)
    raise jsonrpc.MethodNotFoundError()


def _error_data(exc: errors.A2AError) -> list[dict[str, Any]]:
    if isinstance(exc, errors.InvalidParamsError):
        return [{"@type": BAD_REQUEST, "fieldViolations": exc.field_violations}]
    info: dict[str, Any] = {"@type": ERROR_INFO, "reason": exc.reason, "domain": ERROR_DOMAIN}
    if exc.metadata:
        info["metadata"] = exc.metadata
    return [info]


def map_error(exc: BaseException) -> jsonrpc.JsonRpcError | None:
    """A2A errors → JSON-RPC errors with typed ``data``; anything else is unexpected."""
    if not isinstance(exc, errors.A2AError):
        return None
    code = next(ERROR_CODES[cls] for cls in type(exc).__mro__ if cls in ERROR_CODES)
    return jsonrpc.JsonRpcError(exc.message, data=_error_data(exc), code=code)


def _request_info(request_id: str) -> list[dict[str, str]]:
    return [{"@type": REQUEST_INFO, "requestId": request_id}]


def _outcome(exc: Exception) -> str:
    """The ``outcome`` label of a call that raised: the JSON-RPC code its client gets."""
    if isinstance(exc, jsonrpc.JsonRpcError):
        return str(exc.code)
    mapped = map_error(exc)
    return str(mapped.code if mapped is not None else jsonrpc.INTERNAL_ERROR)


def _instrumented(name: str, method: jsonrpc.Method) -> jsonrpc.Method:
    """``method`` with its name and the task its params name in the log context, counted
    and timed (``a2a_requests_total``, ``a2a_request_duration_seconds``) until its answer or,
    for a streaming method, until its stream can start.

    The log fields are set, not scoped: the dispatcher's line for an unexpected error (after
    the call) carries them too. Every call sets both, so a batch item's never reach the next
    item's lines, and the request's scope (views) drops them with the request.
    """

    async def call(params: Any, context: Any) -> Any:
        logs.update(**logs.call_fields(name, params))
        started, outcome = time.perf_counter(), "ok"
        try:
            return await method.handler(params, context)
        except jsonrpc.MethodNotFoundError:
            outcome = ""  # a v0.3 name under 1.0: the view counts it as an unknown method
            raise
        except asyncio.CancelledError:  # the client went away before its answer
            outcome = "cancelled"
            raise
        except Exception as exc:
            outcome = _outcome(exc)
            raise
        finally:
            if outcome:
                metrics.request_observed(BINDING, name, outcome, started)

    return jsonrpc.Method(call, streaming=method.streaming)


def build_dispatcher() -> jsonrpc.Dispatcher:
    methods = {name: _bind(operation) for name, operation in METHODS.items()}
    methods.update({name: jsonrpc.Method(_legacy_method) for name in V03_METHODS})
    methods = {name: _instrumented(name, method) for name, method in methods.items()}
    return jsonrpc.Dispatcher(
        methods,
        error_mapper=map_error,
        internal_error_data=_request_info,
        error_id=logs.error_id,  # the request's id: the client's report finds the traceback
        max_depth=int(app_settings.MAX_JSON_DEPTH),
        max_batch_items=int(app_settings.MAX_BATCH_ITEMS),
        max_response_bytes=int(app_settings.MAX_RESPONSE_BYTES),
    )
