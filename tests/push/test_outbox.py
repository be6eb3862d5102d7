"""The outbox in the store: a delivery row per config for each event, written in the event's
transaction, and no statement at all for the events of a task that never had a config."""

from __future__ import annotations

import msgspec
import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from a2a_endpoint import models, types
from a2a_endpoint.lifecycle import TaskState
from a2a_endpoint.store import TaskStore
from tests.service.builders import stored_task

pytestmark = pytest.mark.django_db(transaction=True)

HOOK = "https://hooks.example/a2a"


def config(config_id: str) -> types.TaskPushNotificationConfig:
    return msgspec.convert({"id": config_id, "url": HOOK}, types.TaskPushNotificationConfig)


def outbox_statements(queries: CaptureQueriesContext) -> list[str]:
    return [q["sql"] for q in queries.captured_queries if "a2a_endpoint_pushdelivery" in q["sql"]]


def owed(task_id: str) -> list[tuple[str, int]]:
    rows = models.PushDelivery.objects.filter(task_id=task_id).select_related("config")
    return sorted((row.config.config_id, row.seq) for row in rows)


def test_a_task_without_configs_writes_no_outbox_statement():
    store = TaskStore()
    task_id = stored_task(state=TaskState.WORKING, store=store)
    with CaptureQueriesContext(connection) as queries:
        store.update_status(task_id, TaskState.WORKING)
    assert outbox_statements(queries) == []


def test_each_event_is_owed_to_each_config_in_its_transaction():
    store = TaskStore()
    task_id = stored_task(state=TaskState.WORKING, store=store)
    store.create_push_config(task_id, "anonymous", "", config("a"))
    store.create_push_config(task_id, "anonymous", "", config("b"))
    seq = store.update_status(task_id, TaskState.WORKING).seq
    assert owed(task_id) == [("a", seq), ("b", seq)]

    def rolled_back() -> None:
        with transaction.atomic():
            store.update_status(task_id, TaskState.WORKING)
            raise RuntimeError("rolled back")

    with pytest.raises(RuntimeError):
        rolled_back()
    assert owed(task_id) == [("a", seq), ("b", seq)]  # nothing owed for what never happened


def test_a_task_whose_configs_were_deleted_still_owes_a_new_one():
    store = TaskStore()
    task_id = stored_task(state=TaskState.WORKING, store=store)
    store.create_push_config(task_id, "anonymous", "", config("a"))
    store.delete_push_config(task_id, "anonymous", "", "a")
    with CaptureQueriesContext(connection) as queries:
        store.update_status(task_id, TaskState.WORKING)
    assert outbox_statements(queries)  # still looked: the flag is never cleared
    assert owed(task_id) == []
    store.create_push_config(task_id, "anonymous", "", config("b"))
    seq = store.update_status(task_id, TaskState.WORKING).seq
    assert owed(task_id) == [("b", seq)]


def test_a_config_given_with_the_first_message_is_owed_the_first_event():
    store = TaskStore()
    first = msgspec.convert(
        {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}, types.Message
    )
    record = store.create_task(
        owner="o", tenant="", context_id="c", message=first, push_config=config("inline")
    )
    assert owed(record.id) == [("inline", 1)]
    assert models.Task.objects.get(pk=record.id).push_configured is True
