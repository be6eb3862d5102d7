"""Pure JSON-RPC 2.0 protocol layer (no Django, no A2A knowledge): envelope and dispatch."""

from .codes import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    SERVER_ERROR_MAX,
    SERVER_ERROR_MIN,
)
from .dispatcher import (
    STREAMING_IN_BATCH_MESSAGE,
    Dispatcher,
    DispatchResult,
    ErrorMapper,
    Method,
    NoReply,
    Reply,
    StreamReply,
)
from .envelope import Request, RequestId, decode_body, failure, parse_request, success
from .errors import (
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    JsonRpcError,
    MethodNotFoundError,
    ParseError,
)

__all__ = [
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "SERVER_ERROR_MAX",
    "SERVER_ERROR_MIN",
    "STREAMING_IN_BATCH_MESSAGE",
    "DispatchResult",
    "Dispatcher",
    "ErrorMapper",
    "InternalError",
    "InvalidParamsError",
    "InvalidRequestError",
    "JsonRpcError",
    "Method",
    "MethodNotFoundError",
    "NoReply",
    "ParseError",
    "Reply",
    "Request",
    "RequestId",
    "StreamReply",
    "decode_body",
    "failure",
    "parse_request",
    "success",
]
