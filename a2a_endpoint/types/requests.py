"""The params and results of each A2A method, and the push-notification configs they carry."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import msgspec

from a2a_endpoint.lifecycle import TaskState
from a2a_endpoint.types.base import Int32, NonNegativeInt32, Struct, Wire, _require
from a2a_endpoint.types.messages import Message, Task


class AuthenticationInfo(Wire, kw_only=True):
    scheme: str
    credentials: str = ""


class TaskPushNotificationConfig(Wire, kw_only=True):
    tenant: str = ""
    id: str = ""
    task_id: str = ""
    url: str
    token: str = ""
    authentication: AuthenticationInfo | None = None


class SendMessageConfiguration(Wire, kw_only=True):
    accepted_output_modes: list[str] = msgspec.field(default_factory=list)
    task_push_notification_config: TaskPushNotificationConfig | None = None
    history_length: NonNegativeInt32 | None = None
    return_immediately: bool = False


class SendMessageRequest(Wire, kw_only=True):
    tenant: str = ""
    message: Message
    configuration: SendMessageConfiguration | None = None
    metadata: Struct | None = None


class GetTaskRequest(Wire, kw_only=True):
    tenant: str = ""
    id: str
    history_length: NonNegativeInt32 | None = None

    def __post_init__(self) -> None:
        _require(bool(self.id), "id", "id is required")


class ListTasksRequest(Wire, kw_only=True):
    tenant: str = ""
    context_id: str = ""
    status: TaskState = TaskState.UNSPECIFIED
    page_size: Annotated[int, msgspec.Meta(ge=1, le=100)] | None = None
    page_token: str = ""
    history_length: NonNegativeInt32 | None = None
    # ProtoJSON Timestamps carry an offset; a naive value is rejected, as the SDK does.
    status_timestamp_after: Annotated[datetime, msgspec.Meta(tz=True)] | None = None
    include_artifacts: bool | None = None


class ListTasksResponse(Wire, kw_only=True, omit_defaults=False):
    """All four fields are always emitted: ``nextPageToken`` MUST be present (A2A §3.1.4).

    They still have defaults so that ProtoJSON from other peers, which omits ``""``, ``0``
    and ``[]`` (e.g. the last, empty page), decodes.
    """

    tasks: list[Task] = msgspec.field(default_factory=list)
    next_page_token: str = ""
    page_size: int = 0
    total_size: int = 0


class CancelTaskRequest(Wire, kw_only=True):
    tenant: str = ""
    id: str
    metadata: Struct | None = None

    def __post_init__(self) -> None:
        _require(bool(self.id), "id", "id is required")


class SubscribeToTaskRequest(Wire, kw_only=True):
    tenant: str = ""
    id: str

    def __post_init__(self) -> None:
        _require(bool(self.id), "id", "id is required")


class GetTaskPushNotificationConfigRequest(Wire, kw_only=True):
    tenant: str = ""
    task_id: str
    id: str

    def __post_init__(self) -> None:
        _require(bool(self.task_id), "taskId", "taskId is required")
        _require(bool(self.id), "id", "id is required")


class DeleteTaskPushNotificationConfigRequest(Wire, kw_only=True):
    tenant: str = ""
    task_id: str
    id: str

    def __post_init__(self) -> None:
        _require(bool(self.task_id), "taskId", "taskId is required")
        _require(bool(self.id), "id", "id is required")


class ListTaskPushNotificationConfigsRequest(Wire, kw_only=True):
    tenant: str = ""
    task_id: str
    page_size: Int32 = 0  # proto int32: a negative size decodes, and the service refuses it
    page_token: str = ""

    def __post_init__(self) -> None:
        _require(bool(self.task_id), "taskId", "taskId is required")


class ListTaskPushNotificationConfigsResponse(Wire, kw_only=True):
    configs: list[TaskPushNotificationConfig] = msgspec.field(default_factory=list)
    next_page_token: str = ""


class GetExtendedAgentCardRequest(Wire, kw_only=True):
    tenant: str = ""
