"""A2A v1.0 wire types as msgspec structs: exactly the ProtoJSON shapes of ``a2a.proto``.

Encoding follows ProtoJSON: lowerCamelCase names, enum names as strings, implicit-presence
defaults omitted, ``optional`` fields emitted when set (even to 0/false). Unknown fields are
ignored on input (A2A §5.7). REQUIRED fields are required by the struct definitions, and
the checks msgspec cannot express (oneof, non-empty ids and lists) live in ``__post_init__``.
"""

from __future__ import annotations

import builtins
import enum
from datetime import UTC, datetime
from typing import Annotated, Any

import msgspec

from a2a_endpoint.lifecycle import TaskState

__all__ = [
    "ANONYMOUS",
    "ANY_TENANT",
    "AgentCapabilities",
    "AgentCard",
    "AgentCardSignature",
    "AgentExtension",
    "AgentInterface",
    "AgentProvider",
    "AgentSkill",
    "Artifact",
    "AuthenticationInfo",
    "Caller",
    "CancelTaskRequest",
    "DeleteTaskPushNotificationConfigRequest",
    "GetExtendedAgentCardRequest",
    "GetTaskPushNotificationConfigRequest",
    "GetTaskRequest",
    "ListTaskPushNotificationConfigsRequest",
    "ListTaskPushNotificationConfigsResponse",
    "ListTasksRequest",
    "ListTasksResponse",
    "Message",
    "Part",
    "Role",
    "SecurityRequirement",
    "SecurityScheme",
    "SendMessageConfiguration",
    "SendMessageRequest",
    "SendMessageResponse",
    "StreamResponse",
    "SubscribeToTaskRequest",
    "Task",
    "TaskArtifactUpdateEvent",
    "TaskPushNotificationConfig",
    "TaskState",
    "TaskStatus",
    "TaskStatusUpdateEvent",
    "format_timestamp",
]

INT32_MAX = 2**31 - 1
NonNegativeInt32 = Annotated[int, msgspec.Meta(ge=0, le=INT32_MAX)]
Int32 = Annotated[int, msgspec.Meta(ge=-(2**31), le=INT32_MAX)]
Struct = dict[str, Any]


class Role(enum.StrEnum):
    UNSPECIFIED = "ROLE_UNSPECIFIED"
    USER = "ROLE_USER"
    AGENT = "ROLE_AGENT"


class Wire(msgspec.Struct, rename="camel", omit_defaults=True, kw_only=True):
    """Base of all wire types."""


def format_timestamp(value: datetime) -> str:
    """ProtoJSON timestamp: UTC, ``Z`` suffix, millisecond precision (A2A §5.6.1).

    An aware value is converted to UTC first; a naive one is taken to be UTC already.
    """
    if value.tzinfo is not None:
        value = value.astimezone(UTC).replace(tzinfo=None)
    # isoformat pads the year to four digits (strftime's %Y does not on glibc).
    return value.isoformat(timespec="milliseconds") + "Z"


def _require(condition: bool, field: str, message: str) -> None:
    # msgspec turns a ValueError raised in __post_init__ into a ValidationError that names the
    # struct's path; "field: " lets the error builder name the offending member itself.
    if not condition:
        raise ValueError(f"{field}: {message}" if field else message)


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


class DeleteTaskPushNotificationConfigRequest(Wire, kw_only=True):
    tenant: str = ""
    task_id: str
    id: str


class ListTaskPushNotificationConfigsRequest(Wire, kw_only=True):
    tenant: str = ""
    task_id: str
    page_size: Int32 = 0
    page_token: str = ""


class ListTaskPushNotificationConfigsResponse(Wire, kw_only=True):
    configs: list[TaskPushNotificationConfig] = msgspec.field(default_factory=list)
    next_page_token: str = ""


class GetExtendedAgentCardRequest(Wire, kw_only=True):
    tenant: str = ""


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


# --- Agent card (A2A §8) ------------------------------------------------------------------


class AgentInterface(Wire, kw_only=True):
    url: str
    protocol_binding: str
    tenant: str = ""
    protocol_version: str


class AgentProvider(Wire, kw_only=True):
    url: str
    organization: str


class AgentExtension(Wire, kw_only=True):
    uri: str = ""
    description: str = ""
    required: bool = False
    params: Struct | None = None


class AgentCapabilities(Wire, kw_only=True):
    streaming: bool | None = None
    push_notifications: bool | None = None
    extensions: list[AgentExtension] = msgspec.field(default_factory=list)
    extended_agent_card: bool | None = None


class StringList(Wire, kw_only=True):
    # "builtins.": the string annotation is evaluated in the class namespace, where ``list``
    # is this field (a bare ``list[str]`` made every decode raise TypeError).
    list: builtins.list[str] = msgspec.field(default_factory=builtins.list)


class SecurityRequirement(Wire, kw_only=True):
    schemes: dict[str, StringList] = msgspec.field(default_factory=dict)


class APIKeySecurityScheme(Wire, kw_only=True):
    description: str = ""
    location: str
    name: str


class HTTPAuthSecurityScheme(Wire, kw_only=True):
    description: str = ""
    scheme: str
    bearer_format: str = ""


class AuthorizationCodeOAuthFlow(Wire, kw_only=True):
    authorization_url: str
    token_url: str
    refresh_url: str = ""
    scopes: dict[str, str] = msgspec.field(default_factory=dict)  # MAY be empty; omitted then
    pkce_required: bool = False


class ClientCredentialsOAuthFlow(Wire, kw_only=True):
    token_url: str
    refresh_url: str = ""
    scopes: dict[str, str] = msgspec.field(default_factory=dict)  # MAY be empty; omitted then


class ImplicitOAuthFlow(Wire, kw_only=True):
    authorization_url: str = ""
    refresh_url: str = ""
    scopes: dict[str, str] = msgspec.field(default_factory=dict)


class PasswordOAuthFlow(Wire, kw_only=True):
    token_url: str = ""
    refresh_url: str = ""
    scopes: dict[str, str] = msgspec.field(default_factory=dict)


class DeviceCodeOAuthFlow(Wire, kw_only=True):
    device_authorization_url: str
    token_url: str
    refresh_url: str = ""
    scopes: dict[str, str] = msgspec.field(default_factory=dict)  # MAY be empty; omitted then


class OAuthFlows(Wire, kw_only=True):
    authorization_code: AuthorizationCodeOAuthFlow | None = None
    client_credentials: ClientCredentialsOAuthFlow | None = None
    implicit: ImplicitOAuthFlow | None = None
    password: PasswordOAuthFlow | None = None
    device_code: DeviceCodeOAuthFlow | None = None


class OAuth2SecurityScheme(Wire, kw_only=True):
    description: str = ""
    flows: OAuthFlows
    oauth2_metadata_url: str = msgspec.field(default="", name="oauth2MetadataUrl")


class OpenIdConnectSecurityScheme(Wire, kw_only=True):
    description: str = ""
    open_id_connect_url: str


class MutualTlsSecurityScheme(Wire, kw_only=True):
    description: str = ""


class SecurityScheme(Wire, kw_only=True):
    api_key_security_scheme: APIKeySecurityScheme | None = None
    http_auth_security_scheme: HTTPAuthSecurityScheme | None = None
    oauth2_security_scheme: OAuth2SecurityScheme | None = msgspec.field(
        default=None, name="oauth2SecurityScheme"
    )
    open_id_connect_security_scheme: OpenIdConnectSecurityScheme | None = None
    mtls_security_scheme: MutualTlsSecurityScheme | None = None


class AgentSkill(Wire, kw_only=True):
    id: str
    name: str
    description: str
    tags: list[str]
    examples: list[str] = msgspec.field(default_factory=list)
    input_modes: list[str] = msgspec.field(default_factory=list)
    output_modes: list[str] = msgspec.field(default_factory=list)
    security_requirements: list[SecurityRequirement] = msgspec.field(default_factory=list)


class AgentCardSignature(Wire, kw_only=True):
    protected: str
    signature: str
    header: Struct | None = None


class AgentCard(Wire, kw_only=True):
    name: str
    description: str
    supported_interfaces: list[AgentInterface]
    provider: AgentProvider | None = None
    version: str
    documentation_url: str | None = None
    capabilities: AgentCapabilities
    security_schemes: dict[str, SecurityScheme] = msgspec.field(default_factory=dict)
    security_requirements: list[SecurityRequirement] = msgspec.field(default_factory=list)
    default_input_modes: list[str]
    default_output_modes: list[str]
    skills: list[AgentSkill]
    signatures: list[AgentCardSignature] = msgspec.field(default_factory=list)
    icon_url: str | None = None


# --- Callers -------------------------------------------------------------------------------


class Caller(msgspec.Struct, frozen=True):
    """Who is calling: every task belongs to its ``owner`` within a tenant (A2A §13.1).

    ``tenant`` is the caller's own tenant, used when a request names none; ``tenants`` are
    the other tenants it may name in a request's ``tenant`` field (``"*"``: any, for a
    trusted gateway that checked the tenant itself). Any other tenant is answered as if
    nothing were there (TaskNotFoundError). ``authenticated`` is False only
    for callers nobody vouched for (GetExtendedAgentCard refuses them).
    """

    owner: str
    tenant: str = ""
    tenants: frozenset[str] = frozenset()
    authenticated: bool = True

    def may_use(self, tenant: str) -> bool:
        return tenant == self.tenant or tenant in self.tenants or ANY_TENANT in self.tenants


ANY_TENANT = "*"
ANONYMOUS = Caller(owner="anonymous", authenticated=False)
