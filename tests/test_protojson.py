"""ProtoJSON input names and Timestamps: proto (snake_case) names are accepted as the JSON
names are, free-form values are left alone, a field under both names and a Timestamp that is
not an RFC 3339 string are -32602. The SDK's protobuf parser is the reference."""

from __future__ import annotations

import copy
import uuid
from datetime import UTC, datetime

import msgspec
import pytest
from a2a.types import a2a_pb2 as pb
from asgiref.sync import sync_to_async
from google.protobuf import json_format

from a2a_endpoint import errors, protojson, types
from a2a_endpoint.rpc import METHODS, decode_params
from a2a_endpoint.testing import user_message
from tests.service.builders import poll_task, stored_task

BAD_REQUEST = "type.googleapis.com/google.rpc.BadRequest"
COMPLETED = "TASK_STATE_COMPLETED"

#: User data whose keys look like proto names: never renamed.
USER_DATA = {"history_length": 1, "message_id": "x", "nested_key": [{"context_id": "y"}]}

SEND_CAMEL = {
    "tenant": "t",
    "message": {
        "messageId": "m-1",
        "contextId": "c-1",
        "taskId": "t-1",
        "role": "ROLE_USER",
        "parts": [
            {"text": "hi", "mediaType": "text/plain", "metadata": USER_DATA},
            {"data": USER_DATA, "filename": "d.json", "mediaType": "application/json"},
        ],
        "metadata": USER_DATA,
        "referenceTaskIds": ["r-1"],
    },
    "configuration": {
        "acceptedOutputModes": ["text/plain"],
        "taskPushNotificationConfig": {
            "taskId": "t-1",
            "url": "https://example.com/hook",
            "authentication": {"scheme": "Bearer"},
        },
        "historyLength": 2,
        "returnImmediately": True,
    },
    "metadata": USER_DATA,
}
SEND_SNAKE = {
    "tenant": "t",
    "message": {
        "message_id": "m-1",
        "context_id": "c-1",
        "task_id": "t-1",
        "role": "ROLE_USER",
        "parts": [
            {"text": "hi", "media_type": "text/plain", "metadata": USER_DATA},
            {"data": USER_DATA, "filename": "d.json", "media_type": "application/json"},
        ],
        "metadata": USER_DATA,
        "reference_task_ids": ["r-1"],
    },
    "configuration": {
        "accepted_output_modes": ["text/plain"],
        "task_push_notification_config": {
            "task_id": "t-1",
            "url": "https://example.com/hook",
            "authentication": {"scheme": "Bearer"},
        },
        "history_length": 2,
        "return_immediately": True,
    },
    "metadata": USER_DATA,
}


def invalid(params: dict, params_type: type[msgspec.Struct]) -> dict[str, str]:
    """The one field violation decoding ``params`` raises."""
    with pytest.raises(errors.InvalidParamsError) as raised:
        decode_params(params, params_type)
    [violation] = raised.value.field_violations
    assert violation["description"]
    return violation


def sdk_parse(params: dict, params_type: type[msgspec.Struct]) -> dict:
    """``params`` through the SDK's protobuf parser and back to ProtoJSON (JSON names)."""
    message = json_format.ParseDict(params, getattr(pb, params_type.__name__)())
    return json_format.MessageToDict(message)


# --- renames -----------------------------------------------------------------------------------


def test_proto_names_decode_like_json_names_at_every_level():
    snake = decode_params(SEND_SNAKE, types.SendMessageRequest)
    assert snake == decode_params(SEND_CAMEL, types.SendMessageRequest)
    assert snake.message.message_id == "m-1"
    assert snake.message.task_id == "t-1"
    assert snake.message.parts[1].media_type == "application/json"
    assert snake.message.reference_task_ids == ["r-1"]
    assert snake.configuration.history_length == 2
    assert snake.configuration.accepted_output_modes == ["text/plain"]
    assert snake.configuration.return_immediately is True
    assert snake.configuration.task_push_notification_config.task_id == "t-1"


def test_proto_names_are_read_as_the_sdk_reads_them():
    assert sdk_parse(SEND_SNAKE, types.SendMessageRequest) == sdk_parse(
        SEND_CAMEL, types.SendMessageRequest
    )
    ours = protojson.normalize(SEND_SNAKE, types.SendMessageRequest)
    assert ours == SEND_CAMEL  # the same keys, free-form values included


def test_mixed_names_and_top_level_proto_names():
    params = {"id": "t-1", "history_length": 1}
    assert decode_params(params, types.GetTaskRequest) == types.GetTaskRequest(
        id="t-1", history_length=1
    )
    mixed = {"contextId": "c", "page_size": 5, "pageToken": "", "include_artifacts": True}
    decoded = protojson.normalize(mixed, types.ListTasksRequest)
    assert decoded == {"contextId": "c", "pageSize": 5, "pageToken": "", "includeArtifacts": True}


def test_free_form_values_keep_their_keys():
    decoded = decode_params(SEND_SNAKE, types.SendMessageRequest)
    assert decoded.metadata == USER_DATA
    assert decoded.message.metadata == USER_DATA
    assert decoded.message.parts[0].metadata == USER_DATA
    assert decoded.message.parts[1].data == USER_DATA
    cancel = {"id": "t-1", "metadata": {"task_id": "x"}}
    assert protojson.normalize(cancel, types.CancelTaskRequest) is cancel


def test_json_names_pass_through_uncopied():
    params = copy.deepcopy(SEND_CAMEL)
    assert protojson.normalize(params, types.SendMessageRequest) is params
    get = {"id": "t-1", "historyLength": 1}
    assert protojson.normalize(get, types.GetTaskRequest) is get


def test_only_what_changes_is_copied_and_the_input_is_left_as_it_was():
    params = copy.deepcopy(SEND_CAMEL)
    params["configuration"] = {"history_length": 2}
    before = copy.deepcopy(params)
    decoded = protojson.normalize(params, types.SendMessageRequest)
    assert params == before
    assert decoded["configuration"] == {"historyLength": 2}
    assert decoded["message"] is params["message"]
    assert decoded["metadata"] is params["metadata"]


def test_map_values_are_walked_and_map_keys_are_not():
    card = {
        "securitySchemes": {
            "my_scheme": {"http_auth_security_scheme": {"scheme": "Bearer", "bearer_format": "JWT"}}
        },
        "skills": [{"id": "s", "input_modes": ["text/plain"]}],
    }
    assert protojson.normalize(card, types.AgentCard) == {
        "securitySchemes": {
            "my_scheme": {"httpAuthSecurityScheme": {"scheme": "Bearer", "bearerFormat": "JWT"}}
        },
        "skills": [{"id": "s", "inputModes": ["text/plain"]}],
    }


class Circle(msgspec.Struct, tag="circle", rename="camel", kw_only=True):
    outer_radius: float


class Square(msgspec.Struct, tag="square", rename="camel", kw_only=True):
    side_length: float


class Drawing(msgspec.Struct, rename="camel", kw_only=True):
    main_shape: Circle | Square | None = None
    extra_shapes: list[Circle | Square] = msgspec.field(default_factory=list)


def test_a_union_of_structs_is_walked_by_its_tag():
    params = {
        "main_shape": {"type": "square", "side_length": 2.0},
        "extraShapes": [{"type": "circle", "outer_radius": 1.0}, {"type": "hexagon", "a_b": 1}],
    }
    assert protojson.normalize(params, Drawing) == {
        "mainShape": {"type": "square", "sideLength": 2.0},
        "extraShapes": [{"type": "circle", "outerRadius": 1.0}, {"type": "hexagon", "a_b": 1}],
    }


@pytest.mark.parametrize("operation", METHODS.values(), ids=METHODS.keys())
def test_every_method_has_a_plan(operation):
    assert protojson.normalize({}, operation.params_type) == {}


# --- a field under both names --------------------------------------------------------------------


BOTH_MEDIA_TYPES = {"mediaType": "text/plain", "media_type": "text/markdown"}
DUPLICATES = {
    "top level": (
        {"id": "t-1", "historyLength": 1, "history_length": 2},
        types.GetTaskRequest,
        "historyLength",
    ),
    "nested": (
        {"message": {**user_message("x"), "message_id": "m-2"}},
        types.SendMessageRequest,
        "message.messageId",
    ),
    "in a list": (
        {"message": user_message("x", parts=[{"text": "a"}, {"text": "b", **BOTH_MEDIA_TYPES}])},
        types.SendMessageRequest,
        "message.parts[1].mediaType",
    ),
    "deeper": (
        {
            "message": user_message("x"),
            "configuration": {
                "taskPushNotificationConfig": {"url": "u", "taskId": "a", "task_id": "b"}
            },
        },
        types.SendMessageRequest,
        "configuration.taskPushNotificationConfig.taskId",
    ),
}


@pytest.mark.parametrize(
    ("params", "params_type", "field"), DUPLICATES.values(), ids=DUPLICATES.keys()
)
def test_a_field_under_both_names_is_invalid(params, params_type, field):
    assert invalid(params, params_type)["field"] == field


def test_the_sdk_refuses_an_optional_field_under_both_names_too():
    with pytest.raises(json_format.ParseError):
        sdk_parse({"id": "t-1", "historyLength": 1, "history_length": 2}, types.GetTaskRequest)


# --- Timestamps ----------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [12345, 1.5, 0, True, False, "12345", "1e3"])
@pytest.mark.parametrize("name", ["statusTimestampAfter", "status_timestamp_after"])
def test_a_timestamp_is_a_string_not_a_number(name, value):
    params = {name: value}
    assert invalid(params, types.ListTasksRequest)["field"] == "statusTimestampAfter"
    with pytest.raises(json_format.ParseError):
        sdk_parse(params, types.ListTasksRequest)


@pytest.mark.parametrize("name", ["statusTimestampAfter", "status_timestamp_after"])
def test_an_rfc3339_timestamp_is_still_accepted(name):
    decoded = decode_params({name: "2025-06-01T14:30:00+02:00"}, types.ListTasksRequest)
    assert decoded.status_timestamp_after == datetime(2025, 6, 1, 12, 30, tzinfo=UTC)
    assert decode_params({name: None}, types.ListTasksRequest).status_timestamp_after is None


def test_a_naive_timestamp_is_still_invalid():
    params = {"status_timestamp_after": "2025-06-01T14:30:00"}
    assert invalid(params, types.ListTasksRequest)["field"] == "statusTimestampAfter"


# --- through the endpoint ------------------------------------------------------------------------


async def assert_invalid(rpc_client, method: str, params: dict, field: str) -> None:
    error = await rpc_client.error(method, params)
    assert error["code"] == -32602, error
    [detail] = error["data"]
    assert detail["@type"] == BAD_REQUEST
    assert detail["fieldViolations"][0]["field"] == field


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("length", "expected"), [(1, ["step 4"]), (2, ["step 3", "step 4"])])
async def test_get_task_history_length_under_its_proto_name(rpc, length, expected):
    task_id = await sync_to_async(stored_task)(history=5)
    task = await rpc.result("GetTask", {"id": task_id, "history_length": length})
    assert [message["parts"][0]["text"] for message in task["history"]] == expected
    assert "history" not in await rpc.result("GetTask", {"id": task_id, "history_length": 0})


@pytest.mark.django_db(transaction=True)
async def test_send_message_under_proto_names(rpc):
    message_id = str(uuid.uuid4())
    params = {
        "message": {
            "message_id": message_id,
            "context_id": "ctx-snake",
            "role": "ROLE_USER",
            "parts": [{"text": "echo hi", "media_type": "text/plain"}],
            "metadata": USER_DATA,
        },
        "configuration": {
            "accepted_output_modes": ["text/plain"],
            "history_length": 0,
            "return_immediately": True,
        },
    }
    task = (await rpc.result("SendMessage", params))["task"]
    assert task["status"]["state"] == "TASK_STATE_SUBMITTED"  # returnImmediately
    assert "history" not in task  # historyLength 0
    assert task["contextId"] == "ctx-snake"
    done = await poll_task(rpc, task["id"], COMPLETED)
    [sent, _] = done["history"]
    assert sent["messageId"] == message_id
    assert sent["parts"] == [{"text": "echo hi", "mediaType": "text/plain"}]
    assert sent["metadata"] == USER_DATA


@pytest.mark.django_db(transaction=True)
async def test_continuation_by_task_id_under_its_proto_name(rpc):
    asked = (await rpc.result("SendMessage", {"message": user_message("ask")}))["task"]
    answer = {
        "message_id": str(uuid.uuid4()),
        "task_id": asked["id"],
        "role": "ROLE_USER",
        "parts": [{"text": "Ann"}],
    }
    answered = (await rpc.result("SendMessage", {"message": answer}))["task"]
    assert answered["id"] == asked["id"]
    assert answered["status"]["message"]["parts"] == [{"text": "Hello Ann"}]


@pytest.mark.django_db(transaction=True)
async def test_errors_through_the_endpoint_name_the_json_field(rpc):
    await assert_invalid(
        rpc, "GetTask", {"id": "t-1", "historyLength": 1, "history_length": 1}, "historyLength"
    )
    await assert_invalid(rpc, "ListTasks", {"statusTimestampAfter": 12345}, "statusTimestampAfter")
    await assert_invalid(rpc, "ListTasks", {"status_timestamp_after": True}, "statusTimestampAfter")
    # The database's bounds are checked after the rename: a long id under its proto name too.
    message = {"message_id": "m" * 300, "role": "ROLE_USER", "parts": [{"text": "echo x"}]}
    await assert_invalid(rpc, "SendMessage", {"message": message}, "message.messageId")
