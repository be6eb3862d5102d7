"""JSON-RPC 2.0 error exceptions and their wire (error object) representation."""

from typing import Any, ClassVar

from . import codes


class JsonRpcError(Exception):
    """An error that is sent to the client as a JSON-RPC error object.

    Subclasses only override the class-level defaults (DRF style); every
    instance may still override ``message``, ``data`` and ``code``.
    ``data=None`` means the "data" member is omitted from the wire object.
    """

    default_code: ClassVar[int] = codes.INTERNAL_ERROR
    default_message: ClassVar[str] = "Internal error"

    code: int
    message: str
    data: Any | None

    def __init__(
        self, message: str | None = None, data: Any | None = None, code: int | None = None
    ) -> None:
        self.code = self.default_code if code is None else code
        self.message = self.default_message if message is None else message
        self.data = data
        super().__init__(self.message)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, message={self.message!r})"

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON-RPC error object (``code``, ``message`` and optional ``data``)."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


class ParseError(JsonRpcError):
    """The request body is not valid JSON (or is unacceptable JSON, e.g. too deep)."""

    default_code = codes.PARSE_ERROR
    default_message = "Invalid JSON payload"


class InvalidRequestError(JsonRpcError):
    """The JSON value is not a valid JSON-RPC request object.

    ``request_id`` is the request's id when it could be read from the invalid
    request (it is echoed in the error response), otherwise None.
    """

    default_code = codes.INVALID_REQUEST
    default_message = "Request payload validation error"

    request_id: str | int | float | None

    def __init__(
        self,
        message: str | None = None,
        data: Any | None = None,
        code: int | None = None,
        *,
        request_id: str | int | float | None = None,
    ) -> None:
        super().__init__(message, data, code)
        self.request_id = request_id


class MethodNotFoundError(JsonRpcError):
    """The requested method does not exist."""

    default_code = codes.METHOD_NOT_FOUND
    default_message = "Method not found"


class InvalidParamsError(JsonRpcError):
    """The method parameters are invalid."""

    default_code = codes.INVALID_PARAMS
    default_message = "Invalid parameters"


class InternalError(JsonRpcError):
    """An unexpected server-side failure; never carries exception text."""

    default_code = codes.INTERNAL_ERROR
    default_message = "Internal error"
