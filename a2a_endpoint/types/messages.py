"""Messages, tasks and their events: what the A2A methods send and return (A2A §4.1)."""

from __future__ import annotations

import enum
from typing import Any

import msgspec

from a2a_endpoint.lifecycle import TaskState
from a2a_endpoint.types.base import Struct, Wire, _require


class Role(enum.StrEnum):
    UNSPECIFIED = "ROLE_UNSPECIFIED"
    USER = "ROLE_USER"
    AGENT = "ROLE_AGENT"


class Part(Wire, kw_only=True):
    """A unit of content: exactly one of ``text``, ``raw``, ``url``, ``data`` (oneof content)."""

    text: str | None = None
    raw: bytes | None = None
    url: str | None = None
    data: Any = msgspec.UNSET  # google.protobuf.Value: JSON null is a real value here
    metadata: Struct | None = None
    filename: str = ""
    media_type: str = ""

    def __post_init__(self) -> None:
        present = (
            (self.text is not None)
            + (self.raw is not None)
            + (self.url is not None)
            + (self.data is not msgspec.UNSET)
        )
        _require(present == 1, "", "A part needs exactly one of text, raw, url or data")


class Message(Wire, kw_only=True):
    message_id: str
    context_id: str = ""
    task_id: str = ""
    role: Role
    parts: list[Part]
    metadata: Struct | None = None
    extensions: list[str] = msgspec.field(default_factory=list)
    reference_task_ids: list[str] = msgspec.field(default_factory=list)

    def __post_init__(self) -> None:
        _require(bool(self.message_id), "messageId", "messageId is required")
        _require(self.role is not Role.UNSPECIFIED, "role", "role must be ROLE_USER or ROLE_AGENT")
        _require(bool(self.parts), "parts", "At least one part is required")


class TaskStatus(Wire, kw_only=True):
    state: TaskState
    message: Message | None = None
    timestamp: str | None = None  # already formatted by format_timestamp


class Artifact(Wire, kw_only=True):
    artifact_id: str
    name: str = ""
    description: str = ""
    parts: list[Part]
    metadata: Struct | None = None
    extensions: list[str] = msgspec.field(default_factory=list)

    def __post_init__(self) -> None:
        _require(bool(self.artifact_id), "artifactId", "artifactId is required")
        _require(bool(self.parts), "parts", "At least one part is required")


class Task(Wire, kw_only=True):
    id: str
    context_id: str = ""
    status: TaskStatus
    artifacts: list[Artifact] = msgspec.field(default_factory=list)
    history: list[Message] = msgspec.field(default_factory=list)
    metadata: Struct | None = None


class TaskStatusUpdateEvent(Wire, kw_only=True):
    task_id: str
    context_id: str
    status: TaskStatus
    metadata: Struct | None = None


class TaskArtifactUpdateEvent(Wire, kw_only=True):
    task_id: str
    context_id: str
    artifact: Artifact
    append: bool = False
    last_chunk: bool = False
    metadata: Struct | None = None


class SendMessageResponse(Wire, kw_only=True):
    """oneof payload: exactly one of ``task`` or ``message``."""

    task: Task | None = None
    message: Message | None = None


class StreamResponse(Wire, kw_only=True):
    """oneof payload: the SSE ``result`` and the push-notification body (A2A §3.2.3)."""

    task: Task | None = None
    message: Message | None = None
    status_update: TaskStatusUpdateEvent | None = None
    artifact_update: TaskArtifactUpdateEvent | None = None
