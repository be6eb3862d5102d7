"""Conformance of the wire types with the official a2a-sdk protobuf messages (ProtoJSON).

The reference is ``a2a.proto`` as compiled into ``a2a.types.a2a_pb2`` and the protobuf
``json_format`` codec. Generated values go both ways: ours → SDK → ours and SDK → ours → SDK,
and our encoding is compared field by field with what ``MessageToDict`` writes.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import msgspec
import pytest
from a2a.types import a2a_pb2 as pb
from google.api import field_behavior_pb2
from google.protobuf import json_format, timestamp_pb2
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message as ProtoMessage
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from a2a_endpoint import types as wire
from a2a_endpoint.types import TaskState

CONFORMANCE = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

INT32_MAX = 2**31 - 1
JSON_INT_LIMIT = 2**53  # google.protobuf.Value numbers are doubles

WIRE_TYPES: list[type[wire.Wire]] = sorted(
    (
        obj
        for obj in vars(wire).values()
        if isinstance(obj, type) and issubclass(obj, wire.Wire) and obj is not wire.Wire
    ),
    key=lambda cls: cls.__name__,
)


def sdk_type(wire_type: type[wire.Wire]) -> type[ProtoMessage]:
    return getattr(pb, wire_type.__name__)


# --- strategies ------------------------------------------------------------------------------

TEXT = st.text(st.characters(codec="utf-8"), max_size=8)
NAME = st.text(st.characters(codec="utf-8"), min_size=1, max_size=8)  # REQUIRED strings
TEXTS = st.lists(TEXT, max_size=2)
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=1 - JSON_INT_LIMIT, max_value=JSON_INT_LIMIT - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=8,
)
STRUCTS = st.dictionaries(TEXT, JSON_VALUES, max_size=3)
METADATA = st.none() | STRUCTS  # {} is a set-but-empty Struct and is emitted
OPTIONAL_BOOLS = st.none() | st.booleans()
OPTIONAL_TEXT = st.none() | TEXT
HISTORY_LENGTHS = st.none() | st.just(0) | st.integers(min_value=0, max_value=INT32_MAX)
STATES = st.sampled_from([state for state in TaskState if state is not TaskState.UNSPECIFIED])
TIMESTAMPS = st.datetimes(
    min_value=datetime(1, 1, 1),
    max_value=datetime(9999, 12, 31, 23, 59, 59, 999999),
    timezones=st.just(UTC),
).map(wire.format_timestamp)
OFFSETS = st.sampled_from(
    [UTC, timezone(timedelta(hours=5, minutes=30)), timezone(-timedelta(hours=8))]
)
AWARE_DATETIMES = st.datetimes(
    min_value=datetime(1900, 1, 1), max_value=datetime(2200, 1, 1), timezones=OFFSETS
)

PARTS = st.one_of(
    *(
        st.builds(wire.Part, **{member: content}, metadata=METADATA, filename=TEXT, media_type=TEXT)
        for member, content in [
            ("text", TEXT),
            ("raw", st.binary(max_size=12)),
            ("url", TEXT),
            ("data", JSON_VALUES),  # includes JSON null, a real google.protobuf.Value
        ]
    )
)
MESSAGES = st.builds(
    wire.Message,
    message_id=NAME,
    context_id=TEXT,
    task_id=TEXT,
    role=st.sampled_from([wire.Role.USER, wire.Role.AGENT]),
    parts=st.lists(PARTS, min_size=1, max_size=3),
    metadata=METADATA,
    extensions=TEXTS,
    reference_task_ids=TEXTS,
)
ARTIFACTS = st.builds(
    wire.Artifact,
    artifact_id=NAME,
    name=TEXT,
    description=TEXT,
    parts=st.lists(PARTS, min_size=1, max_size=2),
    metadata=METADATA,
    extensions=TEXTS,
)
STATUSES = st.builds(
    wire.TaskStatus, state=STATES, message=st.none() | MESSAGES, timestamp=st.none() | TIMESTAMPS
)
TASKS = st.builds(
    wire.Task,
    id=NAME,
    context_id=TEXT,
    status=STATUSES,
    artifacts=st.lists(ARTIFACTS, max_size=2),
    history=st.lists(MESSAGES, max_size=2),
    metadata=METADATA,
)
STATUS_UPDATES = st.builds(
    wire.TaskStatusUpdateEvent, task_id=NAME, context_id=NAME, status=STATUSES, metadata=METADATA
)
ARTIFACT_UPDATES = st.builds(
    wire.TaskArtifactUpdateEvent,
    task_id=NAME,
    context_id=NAME,
    artifact=ARTIFACTS,
    append=st.booleans(),
    last_chunk=st.booleans(),
    metadata=METADATA,
)
STREAM_RESPONSES = st.one_of(
    st.builds(wire.StreamResponse, task=TASKS),
    st.builds(wire.StreamResponse, message=MESSAGES),
    st.builds(wire.StreamResponse, status_update=STATUS_UPDATES),
    st.builds(wire.StreamResponse, artifact_update=ARTIFACT_UPDATES),
)
SEND_MESSAGE_RESPONSES = st.builds(wire.SendMessageResponse, task=TASKS) | st.builds(
    wire.SendMessageResponse, message=MESSAGES
)
AUTHENTICATIONS = st.builds(wire.AuthenticationInfo, scheme=NAME, credentials=TEXT)
PUSH_CONFIGS = st.builds(
    wire.TaskPushNotificationConfig,
    tenant=TEXT,
    id=TEXT,
    task_id=TEXT,
    url=NAME,
    token=TEXT,
    authentication=st.none() | AUTHENTICATIONS,
)
SEND_CONFIGURATIONS = st.builds(
    wire.SendMessageConfiguration,
    accepted_output_modes=TEXTS,
    task_push_notification_config=st.none() | PUSH_CONFIGS,
    history_length=HISTORY_LENGTHS,
    return_immediately=st.booleans(),
)
SEND_MESSAGE_REQUESTS = st.builds(
    wire.SendMessageRequest,
    tenant=TEXT,
    message=MESSAGES,
    configuration=st.none() | SEND_CONFIGURATIONS,
    metadata=METADATA,
)
LIST_TASKS_REQUESTS = st.builds(
    wire.ListTasksRequest,
    tenant=TEXT,
    context_id=TEXT,
    status=st.sampled_from(TaskState),
    page_size=st.none() | st.integers(min_value=1, max_value=100),
    page_token=TEXT,
    history_length=HISTORY_LENGTHS,
    status_timestamp_after=st.none() | AWARE_DATETIMES,
    include_artifacts=OPTIONAL_BOOLS,
)
LIST_TASKS_RESPONSES = st.builds(
    wire.ListTasksResponse,
    tasks=st.lists(TASKS, max_size=2),
    next_page_token=TEXT,
    page_size=st.integers(min_value=0, max_value=INT32_MAX),
    total_size=st.integers(min_value=0, max_value=INT32_MAX),
)


def _push_config_request(wire_type: type[wire.Wire]) -> st.SearchStrategy[Any]:
    return st.builds(wire_type, tenant=TEXT, task_id=NAME, id=NAME)


# --- agent card ------------------------------------------------------------------------------

SCOPES = st.dictionaries(TEXT, TEXT, max_size=2)  # may be empty (OpenAPI scopes map)
OAUTH_FLOWS = st.one_of(
    st.builds(
        wire.OAuthFlows,
        authorization_code=st.builds(
            wire.AuthorizationCodeOAuthFlow,
            authorization_url=NAME,
            token_url=NAME,
            refresh_url=TEXT,
            scopes=SCOPES,
            pkce_required=st.booleans(),
        ),
    ),
    st.builds(
        wire.OAuthFlows,
        client_credentials=st.builds(
            wire.ClientCredentialsOAuthFlow, token_url=NAME, refresh_url=TEXT, scopes=SCOPES
        ),
    ),
    st.builds(
        wire.OAuthFlows,
        implicit=st.builds(
            wire.ImplicitOAuthFlow, authorization_url=TEXT, refresh_url=TEXT, scopes=SCOPES
        ),
    ),
    st.builds(
        wire.OAuthFlows,
        password=st.builds(wire.PasswordOAuthFlow, token_url=TEXT, refresh_url=TEXT, scopes=SCOPES),
    ),
    st.builds(
        wire.OAuthFlows,
        device_code=st.builds(
            wire.DeviceCodeOAuthFlow,
            device_authorization_url=NAME,
            token_url=NAME,
            refresh_url=TEXT,
            scopes=SCOPES,
        ),
    ),
)
SECURITY_SCHEMES = st.one_of(
    st.builds(
        wire.SecurityScheme,
        api_key_security_scheme=st.builds(
            wire.APIKeySecurityScheme,
            description=TEXT,
            location=st.sampled_from(["query", "header", "cookie"]),
            name=NAME,
        ),
    ),
    st.builds(
        wire.SecurityScheme,
        http_auth_security_scheme=st.builds(
            wire.HTTPAuthSecurityScheme, description=TEXT, scheme=NAME, bearer_format=TEXT
        ),
    ),
    st.builds(
        wire.SecurityScheme,
        oauth2_security_scheme=st.builds(
            wire.OAuth2SecurityScheme,
            description=TEXT,
            flows=OAUTH_FLOWS,
            oauth2_metadata_url=TEXT,
        ),
    ),
    st.builds(
        wire.SecurityScheme,
        open_id_connect_security_scheme=st.builds(
            wire.OpenIdConnectSecurityScheme, description=TEXT, open_id_connect_url=NAME
        ),
    ),
    st.builds(
        wire.SecurityScheme,
        mtls_security_scheme=st.builds(wire.MutualTlsSecurityScheme, description=TEXT),
    ),
)
SECURITY_REQUIREMENTS = st.builds(
    wire.SecurityRequirement,
    schemes=st.dictionaries(TEXT, st.builds(wire.StringList, list=TEXTS), max_size=2),
)
SKILLS = st.builds(
    wire.AgentSkill,
    id=NAME,
    name=NAME,
    description=NAME,
    tags=st.lists(TEXT, min_size=1, max_size=2),
    examples=TEXTS,
    input_modes=TEXTS,
    output_modes=TEXTS,
    security_requirements=st.lists(SECURITY_REQUIREMENTS, max_size=2),
)
CAPABILITIES = st.builds(
    wire.AgentCapabilities,
    streaming=OPTIONAL_BOOLS,
    push_notifications=OPTIONAL_BOOLS,
    extensions=st.lists(
        st.builds(
            wire.AgentExtension,
            uri=TEXT,
            description=TEXT,
            required=st.booleans(),
            params=METADATA,
        ),
        max_size=2,
    ),
    extended_agent_card=OPTIONAL_BOOLS,
)
AGENT_CARDS = st.builds(
    wire.AgentCard,
    name=NAME,
    description=NAME,
    supported_interfaces=st.lists(
        st.builds(
            wire.AgentInterface,
            url=NAME,
            protocol_binding=st.sampled_from(["JSONRPC", "GRPC", "HTTP+JSON"]),
            tenant=TEXT,
            protocol_version=st.sampled_from(["1.0", "0.3"]),
        ),
        min_size=1,
        max_size=2,
    ),
    provider=st.none() | st.builds(wire.AgentProvider, url=NAME, organization=NAME),
    version=NAME,
    documentation_url=OPTIONAL_TEXT,
    capabilities=CAPABILITIES,
    security_schemes=st.dictionaries(TEXT, SECURITY_SCHEMES, max_size=2),
    security_requirements=st.lists(SECURITY_REQUIREMENTS, max_size=2),
    default_input_modes=st.lists(TEXT, min_size=1, max_size=2),
    default_output_modes=st.lists(TEXT, min_size=1, max_size=2),
    skills=st.lists(SKILLS, min_size=1, max_size=2),
    signatures=st.lists(
        st.builds(wire.AgentCardSignature, protected=NAME, signature=NAME, header=METADATA),
        max_size=2,
    ),
    icon_url=OPTIONAL_TEXT,
)

STRATEGIES: dict[type[wire.Wire], st.SearchStrategy[Any]] = {
    wire.Part: PARTS,
    wire.Message: MESSAGES,
    wire.Artifact: ARTIFACTS,
    wire.TaskStatus: STATUSES,
    wire.Task: TASKS,
    wire.TaskStatusUpdateEvent: STATUS_UPDATES,
    wire.TaskArtifactUpdateEvent: ARTIFACT_UPDATES,
    wire.StreamResponse: STREAM_RESPONSES,
    wire.SendMessageResponse: SEND_MESSAGE_RESPONSES,
    wire.SendMessageConfiguration: SEND_CONFIGURATIONS,
    wire.SendMessageRequest: SEND_MESSAGE_REQUESTS,
    wire.GetTaskRequest: st.builds(
        wire.GetTaskRequest, tenant=TEXT, id=NAME, history_length=HISTORY_LENGTHS
    ),
    wire.ListTasksRequest: LIST_TASKS_REQUESTS,
    wire.ListTasksResponse: LIST_TASKS_RESPONSES,
    wire.CancelTaskRequest: st.builds(
        wire.CancelTaskRequest, tenant=TEXT, id=NAME, metadata=METADATA
    ),
    wire.SubscribeToTaskRequest: st.builds(wire.SubscribeToTaskRequest, tenant=TEXT, id=NAME),
    wire.TaskPushNotificationConfig: PUSH_CONFIGS,
    wire.GetTaskPushNotificationConfigRequest: _push_config_request(
        wire.GetTaskPushNotificationConfigRequest
    ),
    wire.DeleteTaskPushNotificationConfigRequest: _push_config_request(
        wire.DeleteTaskPushNotificationConfigRequest
    ),
    wire.ListTaskPushNotificationConfigsRequest: st.builds(
        wire.ListTaskPushNotificationConfigsRequest,
        tenant=TEXT,
        task_id=NAME,
        page_size=st.integers(min_value=-(2**31), max_value=INT32_MAX),
        page_token=TEXT,
    ),
    wire.ListTaskPushNotificationConfigsResponse: st.builds(
        wire.ListTaskPushNotificationConfigsResponse,
        configs=st.lists(PUSH_CONFIGS, max_size=2),
        next_page_token=TEXT,
    ),
    wire.GetExtendedAgentCardRequest: st.builds(wire.GetExtendedAgentCardRequest, tenant=TEXT),
    wire.AgentCard: AGENT_CARDS,
}


# --- comparison helpers ----------------------------------------------------------------------

JSON_WELL_KNOWN = {"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"}


def canonical(obj: Any, descriptor: Descriptor) -> Any:
    """A ProtoJSON object with Timestamps as datetimes and Struct/Value numbers as floats."""
    if descriptor.full_name == "google.protobuf.Timestamp":
        return msgspec.convert(obj, datetime)
    if descriptor.full_name in JSON_WELL_KNOWN:
        return _canonical_json(obj)
    fields = {field.json_name: field for field in descriptor.fields}
    return {key: _canonical_field(value, fields[key]) for key, value in obj.items()}


def _canonical_field(value: Any, field: FieldDescriptor) -> Any:
    if field.message_type is None:
        return value
    if field.message_type.GetOptions().map_entry:
        value_field = field.message_type.fields_by_name["value"]
        return {key: _canonical_field(item, value_field) for key, item in value.items()}
    if field.is_repeated:
        return [canonical(item, field.message_type) for item in value]
    return canonical(value, field.message_type)


def _canonical_json(value: Any) -> Any:
    # Value numbers are doubles: the SDK writes 5 as 5.0. Booleans must stay booleans.
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, list):
        return [_canonical_json(item) for item in value]
    return {key: _canonical_json(item) for key, item in value.items()}


def assert_same_json(ours: Any, sdk: Any, path: str = "$") -> None:
    """Equality field by field, types included, naming the first differing path."""
    if isinstance(ours, dict) and isinstance(sdk, dict):
        assert ours.keys() == sdk.keys(), (
            f"{path}: only we emit {sorted(ours.keys() - sdk.keys())}, "
            f"only the SDK emits {sorted(sdk.keys() - ours.keys())}"
        )
        for key in ours:
            assert_same_json(ours[key], sdk[key], f"{path}.{key}")
    elif isinstance(ours, list) and isinstance(sdk, list):
        assert len(ours) == len(sdk), f"{path}: {len(ours)} items != {len(sdk)}"
        for index, (mine, theirs) in enumerate(zip(ours, sdk, strict=True)):
            assert_same_json(mine, theirs, f"{path}[{index}]")
    else:
        assert type(ours) is type(sdk), f"{path}: {ours!r} ({type(ours)}) != {sdk!r} ({type(sdk)})"
        assert ours == sdk, f"{path}: {ours!r} != {sdk!r}"


def sdk_json(message: ProtoMessage) -> dict[str, Any]:
    """What the SDK writes: ``MessageToDict``, plus ListTasksResponse's always-present fields.

    A2A §3.1.4 makes ``nextPageToken`` mandatory; the SDK's own ListTasks serializer prints
    the response's fields with ``always_print_fields_with_no_presence``.
    """
    result = json_format.MessageToDict(message)
    if isinstance(message, pb.ListTasksResponse):
        full = json_format.MessageToDict(message, always_print_fields_with_no_presence=True)
        result = {key: result.get(key, full[key]) for key in full}
    return result


def with_canonical_timestamps(value: Any) -> Any:
    """Our ``TaskStatus.timestamp`` is a plain string, and the SDK writes ``.000Z`` as ``Z``."""
    if isinstance(value, list):
        return [with_canonical_timestamps(item) for item in value]
    if not isinstance(value, msgspec.Struct):
        return value
    changes = {
        name: with_canonical_timestamps(getattr(value, name)) for name in value.__struct_fields__
    }
    if isinstance(value, wire.TaskStatus) and value.timestamp is not None:
        changes["timestamp"] = wire.format_timestamp(msgspec.convert(value.timestamp, datetime))
    return msgspec.structs.replace(value, **changes)


def parse(data: Any, wire_type: type[wire.Wire]) -> ProtoMessage:
    return json_format.ParseDict(data, sdk_type(wire_type)(), ignore_unknown_fields=False)


def decode(data: Any, wire_type: type[wire.Wire]) -> Any:
    return msgspec.convert(data, wire_type, strict=False)


# --- structure: every message, every field ---------------------------------------------------


def test_every_proto_message_has_a_wire_type() -> None:
    assert {cls.__name__ for cls in WIRE_TYPES} == set(pb.DESCRIPTOR.message_types_by_name)


def test_the_strategies_reach_every_message() -> None:
    # The nested ones are generated inside these (e.g. OAuthFlows inside AgentCard).
    pending = [sdk_type(wire_type).DESCRIPTOR for wire_type in STRATEGIES]
    reached: set[str] = set()
    while pending:
        descriptor = pending.pop()
        if descriptor.full_name not in reached:
            reached.add(descriptor.full_name)
            pending.extend(f.message_type for f in descriptor.fields if f.message_type)
    package = pb.DESCRIPTOR.package
    assert {name.removeprefix(package + ".") for name in reached if name.startswith(package)} >= {
        cls.__name__ for cls in WIRE_TYPES
    }


@pytest.mark.parametrize("wire_type", WIRE_TYPES, ids=lambda cls: cls.__name__)
def test_field_names_match_the_proto(wire_type: type[wire.Wire]) -> None:
    ours = {field.encode_name for field in msgspec.structs.fields(wire_type)}
    assert ours == {field.json_name for field in sdk_type(wire_type).DESCRIPTOR.fields}


# REQUIRED in the proto, yet defaulted here: ProtoJSON omits their zero value, so a peer's
# valid output would not decode otherwise (e.g. the last page, or an OAuth flow without scopes).
REQUIRED_BUT_DEFAULTED = {
    ("ListTasksResponse", "tasks"),
    ("ListTasksResponse", "next_page_token"),
    ("ListTasksResponse", "page_size"),
    ("ListTasksResponse", "total_size"),
    ("AuthorizationCodeOAuthFlow", "scopes"),
    ("ClientCredentialsOAuthFlow", "scopes"),
    ("DeviceCodeOAuthFlow", "scopes"),
}
ZERO_VALUES = {
    FieldDescriptor.TYPE_STRING: "",
    FieldDescriptor.TYPE_BYTES: b"",
    FieldDescriptor.TYPE_BOOL: False,
    FieldDescriptor.TYPE_INT32: 0,
}


def _has_explicit_presence(field: FieldDescriptor) -> bool:
    """Message fields, oneof members and proto3 ``optional`` scalars."""
    return field.has_presence and not field.is_repeated


def _expected_default(field: FieldDescriptor) -> Any:
    if field.type == FieldDescriptor.TYPE_ENUM:
        return field.enum_type.values[0].name  # the *_UNSPECIFIED name
    return ZERO_VALUES[field.type]


@pytest.mark.parametrize("wire_type", WIRE_TYPES, ids=lambda cls: cls.__name__)
def test_presence_and_requiredness_match_the_proto(wire_type: type[wire.Wire]) -> None:
    ours = {field.encode_name: field for field in msgspec.structs.fields(wire_type)}
    for field in sdk_type(wire_type).DESCRIPTOR.fields:
        mine = ours[field.json_name]
        behaviors = field.GetOptions().Extensions[field_behavior_pb2.field_behavior]
        required = field_behavior_pb2.REQUIRED in behaviors
        where = f"{wire_type.__name__}.{field.name}"
        if mine.required:
            assert required, f"{where} is required here but not in the proto"
            continue
        assert not required or (wire_type.__name__, field.name) in REQUIRED_BUT_DEFAULTED, where
        if mine.default_factory is not msgspec.NODEFAULT:
            assert field.is_repeated, where
            assert mine.default_factory() in ([], {}), where
        elif _has_explicit_presence(field):
            assert mine.default in (None, msgspec.UNSET), f"{where}: set-but-zero must be emitted"
        else:
            assert mine.default == _expected_default(field), f"{where}: zero must be omitted"


# --- round trips -----------------------------------------------------------------------------

GENERATED = pytest.mark.parametrize("wire_type", list(STRATEGIES), ids=lambda cls: cls.__name__)


@GENERATED
@CONFORMANCE
@given(data=st.data())
def test_ours_to_sdk_to_ours(wire_type: type[wire.Wire], data: st.DataObject) -> None:
    value = data.draw(STRATEGIES[wire_type])
    ours = msgspec.to_builtins(value)
    assert msgspec.json.decode(msgspec.json.encode(value)) == ours

    message = parse(ours, wire_type)  # the SDK accepts every name and shape we emit
    sdk = sdk_json(message)
    descriptor = message.DESCRIPTOR
    assert_same_json(canonical(ours, descriptor), canonical(sdk, descriptor))

    assert with_canonical_timestamps(decode(sdk, wire_type)) == value


@GENERATED
@CONFORMANCE
@given(data=st.data())
def test_sdk_to_ours_to_sdk(wire_type: type[wire.Wire], data: st.DataObject) -> None:
    original = parse(msgspec.to_builtins(data.draw(STRATEGIES[wire_type])), wire_type)
    # Both the default output and the one that prints every field without presence.
    for always_print in (False, True):
        sdk = json_format.MessageToDict(original, always_print_fields_with_no_presence=always_print)
        again = parse(msgspec.to_builtins(decode(sdk, wire_type)), wire_type)
        assert again == original


@CONFORMANCE
@given(moment=st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime.max))
def test_format_timestamp_is_a_protojson_timestamp(moment: datetime) -> None:
    expected = moment.replace(microsecond=moment.microsecond // 1000 * 1000, tzinfo=UTC)
    for value in (moment, moment.replace(tzinfo=UTC)):
        text = wire.format_timestamp(value)
        assert len(text) == len("YYYY-MM-DDTHH:MM:SS.mmmZ")
        parsed = json_format.ParseDict(text, timestamp_pb2.Timestamp())
        assert parsed.ToDatetime(tzinfo=UTC) == expected


@CONFORMANCE
@given(moment=AWARE_DATETIMES)
def test_format_timestamp_converts_offsets_to_utc(moment: datetime) -> None:
    text = wire.format_timestamp(moment)
    assert text.endswith("Z")
    parsed = json_format.ParseDict(text, timestamp_pb2.Timestamp()).ToDatetime(tzinfo=UTC)
    assert parsed == moment.replace(microsecond=moment.microsecond // 1000 * 1000)


# --- sharp edges -----------------------------------------------------------------------------


def assert_like_sdk(value: wire.Wire, expected: dict[str, Any]) -> None:
    """We emit ``expected``, and so does the SDK for the same message."""
    assert msgspec.to_builtins(value) == expected
    assert sdk_json(parse(expected, type(value))) == expected


def test_history_length_zero_is_emitted_when_set() -> None:
    assert_like_sdk(wire.SendMessageConfiguration(history_length=0), {"historyLength": 0})
    assert_like_sdk(
        wire.GetTaskRequest(id="t1", history_length=0), {"id": "t1", "historyLength": 0}
    )
    assert_like_sdk(wire.ListTasksRequest(history_length=0), {"historyLength": 0})
    assert_like_sdk(wire.SendMessageConfiguration(), {})
    assert parse({"historyLength": 0}, wire.SendMessageConfiguration).HasField("history_length")
    assert decode({"historyLength": 0}, wire.SendMessageConfiguration).history_length == 0
    assert decode({}, wire.SendMessageConfiguration).history_length is None


def test_optional_bools_are_emitted_when_set_to_false() -> None:
    assert_like_sdk(wire.AgentCapabilities(streaming=False), {"streaming": False})
    assert_like_sdk(
        wire.AgentCapabilities(push_notifications=False, extended_agent_card=True),
        {"pushNotifications": False, "extendedAgentCard": True},
    )
    assert_like_sdk(wire.AgentCapabilities(), {})
    assert_like_sdk(wire.ListTasksRequest(include_artifacts=False), {"includeArtifacts": False})
    assert decode({"streaming": False}, wire.AgentCapabilities).streaming is False
    assert decode({}, wire.AgentCapabilities).streaming is None


def test_implicit_presence_defaults_are_omitted() -> None:
    assert_like_sdk(
        wire.TaskArtifactUpdateEvent(
            task_id="t1",
            context_id="c1",
            artifact=wire.Artifact(artifact_id="a1", parts=[wire.Part(text="")]),
            append=False,
            last_chunk=False,
        ),
        {
            "taskId": "t1",
            "contextId": "c1",
            "artifact": {"artifactId": "a1", "parts": [{"text": ""}]},
        },
    )
    assert_like_sdk(wire.ListTasksRequest(status=TaskState.UNSPECIFIED, page_token=""), {})


def test_set_but_empty_messages_are_emitted() -> None:
    assert_like_sdk(
        wire.Part(text="hi", metadata={}, filename="", media_type=""),
        {"text": "hi", "metadata": {}},
    )
    assert_like_sdk(wire.Part(data={}), {"data": {}})
    assert_like_sdk(wire.Part(data=None), {"data": None})


def test_list_tasks_response_always_emits_every_field() -> None:
    empty = {"tasks": [], "nextPageToken": "", "pageSize": 0, "totalSize": 0}
    assert msgspec.to_builtins(wire.ListTasksResponse()) == empty
    assert msgspec.json.decode(msgspec.json.encode(wire.ListTasksResponse())) == empty
    assert sdk_json(pb.ListTasksResponse()) == empty
    # ProtoJSON from another peer may omit all four.
    assert decode({}, wire.ListTasksResponse) == wire.ListTasksResponse()
    last_page = wire.ListTasksResponse(
        tasks=[wire.Task(id="t1", status=wire.TaskStatus(state=TaskState.WORKING))],
        page_size=50,
        total_size=1,
    )
    assert msgspec.to_builtins(last_page) == {
        "tasks": [{"id": "t1", "status": {"state": "TASK_STATE_WORKING"}}],
        "nextPageToken": "",
        "pageSize": 50,
        "totalSize": 1,
    }


def test_bytes_are_standard_base64_with_padding() -> None:
    raw = b"\xfb\xff\xbf\x00"  # uses both "+" and "/", and needs padding
    value = wire.Part(raw=raw)
    expected = {"raw": base64.b64encode(raw).decode()}
    assert expected == {"raw": "+/+/AA=="}
    assert_like_sdk(value, expected)
    assert msgspec.json.encode(value) == b'{"raw":"+/+/AA=="}'
    assert decode(expected, wire.Part) == value
    assert_like_sdk(wire.Part(raw=b""), {"raw": ""})


def test_enums_are_names() -> None:
    status = wire.TaskStatus(
        state=TaskState.INPUT_REQUIRED,
        message=wire.Message(message_id="m1", role=wire.Role.AGENT, parts=[wire.Part(text="?")]),
        timestamp="2025-10-28T10:30:00.123Z",
    )
    expected = {
        "state": "TASK_STATE_INPUT_REQUIRED",
        "message": {"messageId": "m1", "role": "ROLE_AGENT", "parts": [{"text": "?"}]},
        "timestamp": "2025-10-28T10:30:00.123Z",
    }
    assert_like_sdk(status, expected)
    assert decode(expected, wire.TaskStatus) == status
    assert_like_sdk(
        wire.ListTasksRequest(status=TaskState.AUTH_REQUIRED),
        {"status": "TASK_STATE_AUTH_REQUIRED"},
    )


def test_numeric_strings_are_accepted_for_integers_like_the_sdk() -> None:
    data = {"id": "t1", "historyLength": "3"}
    assert decode(data, wire.GetTaskRequest) == wire.GetTaskRequest(id="t1", history_length=3)
    assert parse(data, wire.GetTaskRequest).history_length == 3


@pytest.mark.parametrize(
    "moment",
    ["2025-10-27T10:00:00Z", "2025-10-27T10:00:00.123456789Z", "2025-10-27T15:30:00+05:30"],
)
def test_status_timestamp_after_accepts_rfc3339(moment: str) -> None:
    decoded = decode({"statusTimestampAfter": moment}, wire.ListTasksRequest)
    message = parse({"statusTimestampAfter": moment}, wire.ListTasksRequest)
    expected = message.status_timestamp_after.ToDatetime(tzinfo=UTC)
    # datetime holds microseconds: msgspec rounds the nanoseconds, protobuf truncates them.
    assert abs(decoded.status_timestamp_after - expected) <= timedelta(microseconds=1)


def test_status_timestamp_after_without_offset_is_rejected_like_the_sdk() -> None:
    data = {"statusTimestampAfter": "2025-10-27T10:00:00"}
    with pytest.raises(msgspec.ValidationError):
        decode(data, wire.ListTasksRequest)
    with pytest.raises(json_format.ParseError):
        parse(data, wire.ListTasksRequest)


@pytest.mark.parametrize(
    "part",
    [
        {"text": "a", "url": "https://example.com/a"},
        {"raw": "AA==", "data": {"k": 1}},
        {"text": "a", "raw": "AA==", "url": "u", "data": 1},
    ],
)
def test_part_with_two_content_members_is_rejected(part: dict[str, Any]) -> None:
    with pytest.raises(msgspec.ValidationError):
        decode(part, wire.Part)
    with pytest.raises(json_format.ParseError):
        parse(part, wire.Part)


def test_part_with_text_and_null_data_is_rejected() -> None:
    # JSON null is a present google.protobuf.Value, so this is two oneof members. Python's
    # json_format skips nulls in its oneof check (the last member wins); we reject it.
    with pytest.raises(msgspec.ValidationError):
        decode({"text": "a", "data": None}, wire.Part)
    assert decode({"data": None}, wire.Part).data is None


@pytest.mark.parametrize("part", [{}, {"metadata": {}, "filename": "a.txt", "mediaType": "x/y"}])
def test_part_without_content_is_rejected(part: dict[str, Any]) -> None:
    with pytest.raises(msgspec.ValidationError):
        decode(part, wire.Part)


def test_unknown_fields_are_ignored() -> None:
    data = {
        "messageId": "m1",
        "role": "ROLE_USER",
        "parts": [{"text": "hi", "futurePartField": 1}],
        "futureField": {"nested": [1, 2]},
    }
    expected = wire.Message(message_id="m1", role=wire.Role.USER, parts=[wire.Part(text="hi")])
    assert decode(data, wire.Message) == expected
    request = {"message": data, "configuration": {"unknownOption": True}, "x": None}
    assert decode(request, wire.SendMessageRequest) == wire.SendMessageRequest(
        message=expected, configuration=wire.SendMessageConfiguration()
    )


@pytest.mark.parametrize(
    "message",
    [
        {
            "kind": "message",
            "messageId": "m1",
            "role": "user",
            "parts": [{"kind": "text", "text": "hi"}],
        },
        {
            "kind": "message",
            "messageId": "m1",
            "role": "ROLE_USER",
            "parts": [{"kind": "file", "file": {"uri": "https://example.com/f"}}],
        },
        {
            "kind": "message",
            "messageId": "m1",
            "role": "ROLE_USER",
            "parts": [],
        },
    ],
    ids=["lowercase-role", "file-part", "no-parts"],
)
def test_v03_messages_are_rejected(message: dict[str, Any]) -> None:
    with pytest.raises(msgspec.ValidationError):
        decode(message, wire.Message)


@pytest.mark.parametrize("role", ["ROLE_UNSPECIFIED", "agent", "", None])
def test_message_role_must_be_user_or_agent(role: Any) -> None:
    with pytest.raises(msgspec.ValidationError):
        decode({"messageId": "m1", "role": role, "parts": [{"text": "hi"}]}, wire.Message)
