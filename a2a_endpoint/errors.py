"""A2A error hierarchy, named after the spec (A2A §3.3.2, §5.4); codes live in ``rpc``."""

from __future__ import annotations

from typing import Any


class A2AError(Exception):
    """Base of every error the A2A service raises on purpose.

    ``reason`` is the ``google.rpc.ErrorInfo`` reason (the error name in UPPER_SNAKE_CASE
    without the ``Error`` suffix, A2A §10); ``metadata`` travels in ErrorInfo as strings.
    """

    default_message = "A2A error"
    reason = "UNKNOWN"

    def __init__(self, message: str | None = None, **metadata: Any) -> None:
        self.message = message or self.default_message
        self.metadata = {key: str(value) for key, value in metadata.items() if value is not None}
        super().__init__(self.message)


class TaskNotFoundError(A2AError):
    """The task does not exist or is not visible to the caller (A2A §3.3.2)."""

    default_message = "Task not found"
    reason = "TASK_NOT_FOUND"


class TaskNotCancelableError(A2AError):
    default_message = "Task cannot be canceled"
    reason = "TASK_NOT_CANCELABLE"


class PushNotificationNotSupportedError(A2AError):
    default_message = "Push Notification is not supported"
    reason = "PUSH_NOTIFICATION_NOT_SUPPORTED"


class UnsupportedOperationError(A2AError):
    default_message = "This operation is not supported"
    reason = "UNSUPPORTED_OPERATION"


class ContentTypeNotSupportedError(A2AError):
    default_message = "Incompatible content types"
    reason = "CONTENT_TYPE_NOT_SUPPORTED"


class InvalidAgentResponseError(A2AError):
    default_message = "Invalid agent response"
    reason = "INVALID_AGENT_RESPONSE"


class ExtendedAgentCardNotConfiguredError(A2AError):
    default_message = "Extended Agent Card is not configured"
    reason = "EXTENDED_AGENT_CARD_NOT_CONFIGURED"


class ExtensionSupportRequiredError(A2AError):
    default_message = "Extension support required"
    reason = "EXTENSION_SUPPORT_REQUIRED"


class VersionNotSupportedError(A2AError):
    default_message = "Version not supported"
    reason = "VERSION_NOT_SUPPORTED"


class ServiceUnavailableError(A2AError):
    """A service the operation needs (the event bus, the broker) cannot be reached, so the
    operation was not carried out: nothing was stored, and the client may try again."""

    default_message = "The service is unavailable; nothing was changed, try again later"
    reason = "SERVICE_UNAVAILABLE"


class UnauthenticatedError(A2AError):
    """No or bad credentials (A2A §3.3.2): HTTP 401 with the authenticators' challenges.

    A2A defines no JSON-RPC code for it; ``rpc`` uses -31401, as a2a-go does.
    """

    default_message = "Authentication credentials were not provided or are not valid"
    reason = "UNAUTHENTICATED"


class PermissionDeniedError(A2AError):
    """Authenticated, but the endpoint's permission classes refuse the caller (HTTP 403)."""

    default_message = "Permission denied"
    reason = "PERMISSION_DENIED"


class ThrottledError(A2AError):
    """The caller sent more requests than its rate allows (HTTP 429, ``Retry-After``)."""

    default_message = "Request was throttled"
    reason = "RESOURCE_EXHAUSTED"


class InvalidParamsError(A2AError):
    """Request parameters failed validation; carries ``google.rpc.BadRequest`` violations."""

    default_message = "Invalid parameters"
    reason = "INVALID_PARAMS"

    def __init__(self, message: str | None = None, *, field: str = "", description: str = ""):
        super().__init__(message)
        self.field_violations: list[dict[str, str]] = []
        if field or description:
            self.field_violations.append(
                {"field": field, "description": description or message or ""}
            )


class TaskStateError(A2AError):
    """An illegal task state transition (e.g. a write after a terminal state).

    Internal to the service: agents see it when they write to a finished task; clients
    never see it directly (the service maps it to the spec error that fits the operation).
    """

    default_message = "Illegal task state transition"
    reason = "INVALID_STATE_TRANSITION"
