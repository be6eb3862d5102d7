"""Interoperability: the official a2a-sdk client against a real daphne serving a2a_endpoint."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pytest
from a2a.client import Client, ClientConfig, ClientFactory
from a2a.helpers import get_artifact_text, get_message_text, new_text_message
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    SendMessageResponse,
    StreamResponse,
    Task,
    TaskNotCancelableError,
    TaskNotFoundError,
    TaskState,
    UnsupportedOperationError,
)
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
from google.protobuf.json_format import ParseDict
from google.protobuf.message import Message as ProtoMessage

from tests.integration.conftest import WireLog
from tests.integration.servers import DaphneServer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(30)]

# What each answer must parse as. The SDK parses leniently (unknown fields are dropped), so a
# misspelled field would go unnoticed: every answer is parsed strictly as well.
RESULT_TYPES: dict[str, type[ProtoMessage]] = {
    "SendMessage": SendMessageResponse,
    "GetTask": Task,
    "ListTasks": ListTasksResponse,
    "CancelTask": Task,
}


@pytest.fixture(autouse=True)
def _strict_protojson(wire: WireLog) -> Iterator[None]:
    yield
    for exchange in wire.exchanges:
        if exchange.url.endswith(AGENT_CARD_WELL_KNOWN_PATH):
            ParseDict(exchange.answer, AgentCard())
        elif exchange.answer is not None and "result" in exchange.answer:
            ParseDict(exchange.answer["result"], RESULT_TYPES[exchange.body["method"]]())


def user_text(text: str, *, task_id: str | None = None, context_id: str | None = None) -> Message:
    return new_text_message(text, role=Role.ROLE_USER, task_id=task_id, context_id=context_id)


async def send(
    client: Client, message: Message, configuration: SendMessageConfiguration | None = None
) -> list[StreamResponse]:
    """Everything the SDK yields for one SendMessage."""
    request = SendMessageRequest(message=message, configuration=configuration)
    return [response async for response in client.send_message(request)]


async def send_for_task(
    client: Client, message: Message, configuration: SendMessageConfiguration | None = None
) -> Task:
    """SendMessage whose answer must be one Task (the non-streaming call yields once)."""
    responses = await send(client, message, configuration)
    assert len(responses) == 1, responses
    assert responses[0].WhichOneof("payload") == "task", responses[0]
    return responses[0].task


def final_state(responses: list[StreamResponse]) -> int:
    """The task state the last task or status update says (streamed or not)."""
    last = responses[-1]
    return (
        last.status_update.status.state
        if last.HasField("status_update")
        else last.task.status.state
    )


def history_texts(task: Task) -> list[tuple[int, str]]:
    return [(message.role, get_message_text(message)) for message in task.history]


# --- agent card -------------------------------------------------------------------------------


async def test_card_resolves_with_the_sdk_resolver(
    agent_card: AgentCard, a2a_server: DaphneServer
) -> None:
    assert isinstance(agent_card, AgentCard)
    assert agent_card.name == "Test agent"
    assert [skill.id for skill in agent_card.skills] == ["script"]
    interfaces = [i for i in agent_card.supported_interfaces if i.protocol_binding == "JSONRPC"]
    assert [(i.url, i.protocol_version) for i in interfaces] == [(a2a_server.url("/a2a/"), "1.0")]


# --- SendMessage --------------------------------------------------------------------------------


async def test_blocking_send_completes_the_task(client: Client, wire: WireLog) -> None:
    message = user_text("echo hi")
    task = await send_for_task(client, message)

    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert [get_artifact_text(artifact) for artifact in task.artifacts] == ["hi"]
    assert task.history[0].message_id == message.message_id
    call = wire.last_call
    assert call.body["method"] == "SendMessage"
    assert not call.body["params"].get("configuration", {}).get("returnImmediately")
    assert call.headers.get("a2a-version") == "1.0"


async def test_default_client_follows_the_card_streaming_capability(
    agent_card: AgentCard, http: httpx.AsyncClient, wire: WireLog
) -> None:
    # ClientConfig() prefers streaming; the SDK must fall back to SendMessage when the card
    # says capabilities.streaming is false (A2A §3.3.4).
    client = ClientFactory(ClientConfig(httpx_client=http)).create(agent_card)
    responses = await send(client, user_text("echo hi"))

    expected = "SendStreamingMessage" if agent_card.capabilities.streaming else "SendMessage"
    assert wire.last_call.body["method"] == expected
    assert final_state(responses) == TaskState.TASK_STATE_COMPLETED


async def test_direct_message_reply_is_a_message(client: Client) -> None:
    responses = await send(client, user_text("reply x"))

    assert len(responses) == 1, responses
    assert responses[0].WhichOneof("payload") == "message", responses[0]
    reply = responses[0].message
    assert reply.role == Role.ROLE_AGENT
    assert get_message_text(reply) == "you said x"
    assert reply.message_id


# --- GetTask ------------------------------------------------------------------------------------


async def test_get_task_applies_history_length(client: Client) -> None:
    message = user_text("echo hi")
    sent = await send_for_task(client, message)

    full = await client.get_task(GetTaskRequest(id=sent.id))
    tail = await client.get_task(GetTaskRequest(id=sent.id, history_length=1))
    none = await client.get_task(GetTaskRequest(id=sent.id, history_length=0))

    assert full.id == sent.id
    assert full.context_id == sent.context_id
    assert full.status.state == TaskState.TASK_STATE_COMPLETED
    assert [get_artifact_text(artifact) for artifact in full.artifacts] == ["hi"]
    # The user's message, then the agent's "echoing" progress message (A2A §3.2.4).
    assert history_texts(full) == [(Role.ROLE_USER, "echo hi"), (Role.ROLE_AGENT, "echoing")]
    assert full.history[0].message_id == message.message_id
    assert all(m.task_id == sent.id and m.context_id == sent.context_id for m in full.history)
    assert history_texts(tail) == history_texts(full)[-1:]
    assert list(none.history) == []


async def test_get_task_of_an_unknown_id_raises_task_not_found(
    client: Client, wire: WireLog
) -> None:
    unknown = str(uuid.uuid4())
    with pytest.raises(TaskNotFoundError) as raised:
        await client.get_task(GetTaskRequest(id=unknown))
    assert wire.last_call.answer["error"]["code"] == -32001
    # The SDK lifts google.rpc.ErrorInfo metadata into the error's data.
    assert raised.value.data == {"taskId": unknown}

    with pytest.raises(TaskNotFoundError):
        await client.get_task(GetTaskRequest(id="not-a-task-id"))


# --- ListTasks ----------------------------------------------------------------------------------


async def test_list_tasks_newest_first_with_cursor_pages(client: Client, wire: WireLog) -> None:
    context_id = str(uuid.uuid4())
    first = await send_for_task(client, user_text("echo one", context_id=context_id))
    second = await send_for_task(client, user_text("echo two", context_id=context_id))

    listed = await client.list_tasks(ListTasksRequest(context_id=context_id))
    assert [task.id for task in listed.tasks] == [second.id, first.id]
    assert listed.total_size == 2
    assert listed.next_page_token == ""
    # Protobuf cannot tell "" from absent: check the wire, where it MUST be present (A2A §3.1.4).
    assert wire.last_call.answer["result"]["nextPageToken"] == ""

    page_one = await client.list_tasks(ListTasksRequest(context_id=context_id, page_size=1))
    page_two = await client.list_tasks(
        ListTasksRequest(context_id=context_id, page_size=1, page_token=page_one.next_page_token)
    )
    assert [task.id for task in page_one.tasks] == [second.id]
    assert page_one.next_page_token
    assert (page_one.total_size, page_one.page_size) == (2, 1)
    assert [task.id for task in page_two.tasks] == [first.id]
    assert page_two.next_page_token == ""


async def test_list_tasks_spans_contexts_by_status_timestamp(client: Client) -> None:
    created = await send_for_task(client, user_text("echo all"))

    listed = await client.list_tasks(ListTasksRequest())
    timestamps = [task.status.timestamp.ToDatetime() for task in listed.tasks]
    assert created.id in {task.id for task in listed.tasks}
    assert timestamps == sorted(timestamps, reverse=True)
    assert listed.total_size == len(listed.tasks)


# --- CancelTask ---------------------------------------------------------------------------------


async def test_cancel_a_running_task(client: Client, wire: WireLog) -> None:
    started = await send_for_task(
        client, user_text("wait 30"), SendMessageConfiguration(return_immediately=True)
    )
    assert wire.last_call.body["params"]["configuration"]["returnImmediately"] is True
    assert started.status.state in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)

    canceled = await client.cancel_task(CancelTaskRequest(id=started.id))
    assert canceled.id == started.id
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED

    fetched = await client.get_task(GetTaskRequest(id=started.id))
    assert fetched.status.state == TaskState.TASK_STATE_CANCELED

    with pytest.raises(TaskNotCancelableError):
        await client.cancel_task(CancelTaskRequest(id=started.id))
    assert wire.last_call.answer["error"]["code"] == -32002


# --- multi-turn ---------------------------------------------------------------------------------


async def test_input_required_then_continue_the_task(client: Client) -> None:
    asked = await send_for_task(client, user_text("ask"))
    assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert asked.status.message.role == Role.ROLE_AGENT
    assert get_message_text(asked.status.message) == "What is your name?"

    answer = user_text("Ada", task_id=asked.id, context_id=asked.context_id)
    done = await send_for_task(client, answer)

    assert (done.id, done.context_id) == (asked.id, asked.context_id)
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert get_message_text(done.status.message) == "Hello Ada"
    assert history_texts(done) == [
        (Role.ROLE_USER, "ask"),
        (Role.ROLE_AGENT, "What is your name?"),
        (Role.ROLE_USER, "Ada"),
        (Role.ROLE_AGENT, "Hello Ada"),
    ]


async def test_continuing_a_finished_task_is_unsupported(client: Client, wire: WireLog) -> None:
    done = await send_for_task(client, user_text("echo hi"))

    with pytest.raises(UnsupportedOperationError):
        await send(client, user_text("more", task_id=done.id, context_id=done.context_id))
    assert wire.last_call.answer["error"]["code"] == -32004
