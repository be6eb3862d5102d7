"""A2A v1.0 wire types as msgspec structs: exactly the ProtoJSON shapes of ``a2a.proto``.

Encoding follows ProtoJSON: lowerCamelCase names, enum names as strings, implicit-presence
defaults omitted, ``optional`` fields emitted when set (even to 0/false). Unknown fields are
ignored on input (A2A §5.7). REQUIRED fields are required by the struct definitions, and
the checks msgspec cannot express (oneof, non-empty ids and lists) live in ``__post_init__``.

One module per concern, each importing only the ones above it: ``base`` (``Wire``, the
integer and Struct aliases, ``format_timestamp``), ``messages`` (parts, messages, tasks and
their events), ``requests`` (each method's params and results, push-notification configs),
``card`` (the agent card and security schemes) and ``callers`` (``Caller``). Every name is
re-exported here: use them as ``types.X``.
"""

from a2a_endpoint.lifecycle import TaskState
from a2a_endpoint.types.base import INT32_MAX as INT32_MAX
from a2a_endpoint.types.base import Int32 as Int32
from a2a_endpoint.types.base import NonNegativeInt32 as NonNegativeInt32
from a2a_endpoint.types.base import Struct as Struct
from a2a_endpoint.types.base import Wire as Wire
from a2a_endpoint.types.base import format_timestamp
from a2a_endpoint.types.callers import ANONYMOUS, ANY_TENANT, Caller
from a2a_endpoint.types.card import (
    AgentCapabilities,
    AgentCard,
    AgentCardSignature,
    AgentExtension,
    AgentInterface,
    AgentProvider,
    AgentSkill,
    SecurityRequirement,
    SecurityScheme,
)
from a2a_endpoint.types.card import APIKeySecurityScheme as APIKeySecurityScheme
from a2a_endpoint.types.card import AuthorizationCodeOAuthFlow as AuthorizationCodeOAuthFlow
from a2a_endpoint.types.card import ClientCredentialsOAuthFlow as ClientCredentialsOAuthFlow
from a2a_endpoint.types.card import DeviceCodeOAuthFlow as DeviceCodeOAuthFlow
from a2a_endpoint.types.card import HTTPAuthSecurityScheme as HTTPAuthSecurityScheme
from a2a_endpoint.types.card import ImplicitOAuthFlow as ImplicitOAuthFlow
from a2a_endpoint.types.card import MutualTlsSecurityScheme as MutualTlsSecurityScheme
from a2a_endpoint.types.card import OAuth2SecurityScheme as OAuth2SecurityScheme
from a2a_endpoint.types.card import OAuthFlows as OAuthFlows
from a2a_endpoint.types.card import OpenIdConnectSecurityScheme as OpenIdConnectSecurityScheme
from a2a_endpoint.types.card import PasswordOAuthFlow as PasswordOAuthFlow
from a2a_endpoint.types.card import StringList as StringList
from a2a_endpoint.types.messages import (
    Artifact,
    Message,
    Part,
    Role,
    SendMessageResponse,
    StreamResponse,
    Task,
    TaskArtifactUpdateEvent,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a_endpoint.types.requests import (
    AuthenticationInfo,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    SendMessageConfiguration,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
)

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
