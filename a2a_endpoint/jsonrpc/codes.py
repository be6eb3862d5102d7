"""JSON-RPC 2.0 error code constants (spec section 5.1)."""

from typing import Final

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603

# Inclusive range reserved by the spec for implementation-defined server errors.
SERVER_ERROR_MIN: Final = -32099
SERVER_ERROR_MAX: Final = -32000
