"""Input the database cannot hold is -32602 at the edge, naming the field, and stores nothing.

On PostgreSQL (tests.settings) such input used to reach the database and come back as
-32603 with a ``DataError`` in the log: identifiers longer than their ``varchar(255)``
columns, and U+0000 anywhere (``text`` and ``jsonb`` cannot hold it).
"""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from a2a_endpoint import models, storable
from a2a_endpoint.lifecycle import TaskState
from a2a_endpoint.testing import user_message
from tests.service.builders import stored_task

pytestmark = [pytest.mark.django_db(transaction=True)]

BAD_REQUEST = "type.googleapis.com/google.rpc.BadRequest"
LONG = "x" * 256
NUL = "a\x00b"


def send(**message: Any) -> dict[str, Any]:
    return {
        "message": user_message("echo x", **message),
        "configuration": {"returnImmediately": True},
    }


async def assert_refused(rpc, method: str, params: dict[str, Any], field: str) -> dict[str, Any]:
    before = await models.Task.objects.acount()
    error = await rpc.error(method, params)
    assert error["code"] == -32602, error
    violation = error["data"][0]
    assert violation["@type"] == BAD_REQUEST
    assert violation["fieldViolations"][0]["field"] == field
    assert await models.Task.objects.acount() == before  # nothing stored
    return violation["fieldViolations"][0]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        (send(messageId=LONG), "message.messageId"),
        (send(contextId=LONG), "message.contextId"),
        ({**send(), "tenant": LONG}, "tenant"),
    ],
    ids=["messageId", "contextId", "tenant"],
)
async def test_identifiers_longer_than_their_columns_are_refused(rpc, params, field):
    violation = await assert_refused(rpc, "SendMessage", params, field)
    assert violation["description"] == "At most 255 characters (256 given)"


async def test_identifiers_as_long_as_their_columns_are_stored(rpc):
    params = {**send(messageId="m" * 255, contextId="c" * 255), "tenant": "t" * 255}
    task = (await rpc.result("SendMessage", params))["task"]
    assert task["contextId"] == "c" * 255
    row = await models.Task.objects.aget(pk=task["id"])
    assert (row.origin_message_id, row.tenant) == ("m" * 255, "t" * 255)


def test_the_limits_are_the_columns():
    assert storable.column_length(models.Task, "context_id") == 255
    for model, field in storable.IDENTIFIER_COLUMNS.values():
        assert storable.column_length(model, field) == model._meta.get_field(field).max_length


@pytest.mark.parametrize(
    ("method", "params", "field"),
    [
        ("SendMessage", send(parts=[{"text": NUL}]), "message.parts[0].text"),
        ("SendMessage", send(messageId=NUL), "message.messageId"),
        ("SendMessage", send(contextId=NUL), "message.contextId"),
        ("SendMessage", {**send(), "metadata": {"k": [1, {"deep": NUL}]}}, "metadata.k[1].deep"),
        ("SendMessage", {**send(), "metadata": {NUL: 1}}, f"metadata.{NUL}"),
        ("SendMessage", send(parts=[{"data": {"v": NUL}}]), "message.parts[0].data.v"),
        ("SendStreamingMessage", send(parts=[{"text": NUL}]), "message.parts[0].text"),
        ("ListTasks", {"contextId": NUL}, "contextId"),
        ("GetTask", {"id": "00000000-0000-0000-0000-000000000000", "tenant": NUL}, "tenant"),
    ],
    ids=[
        "text part",
        "messageId",
        "contextId",
        "metadata value",
        "metadata key",
        "data part",
        "streaming",
        "ListTasks contextId",
        "GetTask tenant",
    ],
)
async def test_nul_characters_are_refused(rpc, method, params, field):
    violation = await assert_refused(rpc, method, params, field)
    assert "U+0000" in violation["description"]


async def test_a_nul_in_a_continued_tasks_message_changes_nothing(rpc):
    task_id = await sync_to_async(stored_task)(state=TaskState.INPUT_REQUIRED)
    before = await models.Task.objects.aget(pk=task_id)
    await assert_refused(
        rpc, "SendMessage", send(taskId=task_id, parts=[{"text": NUL}]), "message.parts[0].text"
    )
    after = await models.Task.objects.aget(pk=task_id)
    assert (after.state, after.seq, after.history_size) == (
        before.state,
        before.seq,
        before.history_size,
    )


# Any text (hypothesis' default alphabet: every code point but surrogates, which JSON
# decoding already refuses), of any length up to past the columns, in each stored field.
texts = st.text(max_size=300)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(message_id=texts, context_id=texts, tenant=texts, text=texts, key=texts)
async def test_no_text_reaches_the_database_as_an_internal_error(
    rpc, message_id, context_id, tenant, text, key
):
    params = {
        "message": user_message(text, messageId=message_id or "m", contextId=context_id),
        "configuration": {"returnImmediately": True},
        "metadata": {key: text},
        "tenant": tenant,
    }
    answer = await rpc.call("SendMessage", params)
    if "error" in answer:
        assert answer["error"]["code"] == -32602, answer
    else:
        listed = await rpc.result("ListTasks", {"contextId": context_id, "tenant": tenant})
        assert listed["totalSize"] >= 0
