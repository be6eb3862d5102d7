"""TaskStore: row-locked writes, the numbered event log, history, and query cost."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from a2a_endpoint import models, types
from a2a_endpoint.errors import (
    TaskNotCancelableError,
    TaskNotFoundError,
    TaskStateError,
    UnsupportedOperationError,
)
from a2a_endpoint.lifecycle import TERMINAL_STATES, TaskState
from a2a_endpoint.store import StoredEvent, TaskStore
from a2a_endpoint.testing import user_message
from tests.service.builders import agent_message, stored_task

pytestmark = [pytest.mark.django_db]

TERMINAL = sorted(TERMINAL_STATES)


@pytest.fixture
def published() -> list[StoredEvent]:
    return []


@pytest.fixture
def store(published) -> TaskStore:
    return TaskStore(publisher=published.append)


def user(text: str, **fields: Any) -> types.Message:
    return msgspec.convert(user_message(text, **fields), types.Message)


def artifact(text: str, artifact_id: str = "art") -> types.Artifact:
    return types.Artifact(artifact_id=artifact_id, parts=[types.Part(text=text)])


def create(store: TaskStore, text: str = "hi", **fields: Any) -> str:
    fields = {"owner": "anonymous", "tenant": "", "context_id": "ctx", **fields}
    return store.create_task(message=user(text), **fields).id


def events(task_id: str) -> list[tuple[int, str]]:
    return list(models.TaskEvent.objects.filter(task_id=task_id).values_list("seq", "kind"))


def footprint(task_id: str) -> tuple[Any, ...]:
    """Everything a write could change about a task."""
    task = models.Task.objects.get(pk=task_id)
    return (
        task.state,
        task.status_message,
        task.status_timestamp,
        task.seq,
        task.history_size,
        events(task_id),
        list(task.messages.values_list("position", "payload")),
        list(task.artifacts.values_list("artifact_id", "parts", "complete")),
    )


# --- create ---------------------------------------------------------------------------------


def test_create_task_stores_the_task_its_message_and_first_event(store):
    message = user("hello")
    record = store.create_task(owner="anonymous", tenant="", context_id="c1", message=message)
    assert record.state is TaskState.SUBMITTED
    assert record.seq == 1
    [row] = models.Message.objects.filter(task_id=record.id)
    assert (row.position, row.message_id, row.role) == (0, message.message_id, "ROLE_USER")
    assert row.payload["taskId"] == record.id
    assert row.payload["contextId"] == "c1"
    [event] = models.TaskEvent.objects.filter(task_id=record.id)
    assert (event.seq, event.kind) == (1, "task")
    assert event.payload["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
    assert event.payload["task"]["history"] == [row.payload]


# --- the event log --------------------------------------------------------------------------


def test_each_change_writes_one_event_numbered_per_task(store):
    first, second = create(store), create(store)
    store.update_status(first, TaskState.WORKING)
    store.update_status(second, TaskState.WORKING, agent_message("working"))
    store.add_artifact(first, artifact("a"), append=False, last_chunk=False)
    store.add_artifact(first, artifact("b"), append=True, last_chunk=True)
    store.update_status(second, TaskState.INPUT_REQUIRED, agent_message("name?"))
    store.update_status(first, TaskState.COMPLETED, agent_message("done"))
    assert events(first) == [
        (1, "task"),
        (2, "statusUpdate"),
        (3, "artifactUpdate"),
        (4, "artifactUpdate"),
        (5, "statusUpdate"),
    ]
    assert events(second) == [(1, "task"), (2, "statusUpdate"), (3, "statusUpdate")]
    assert models.Task.objects.get(pk=first).seq == 5
    assert models.Task.objects.get(pk=second).seq == 3


def test_event_payloads_are_stream_responses(store):
    task_id = create(store)
    working = store.update_status(task_id, TaskState.WORKING, agent_message("busy"))
    update = working.payload["statusUpdate"]
    assert update["taskId"] == task_id
    assert update["contextId"] == "ctx"
    assert update["status"]["state"] == "TASK_STATE_WORKING"
    assert update["status"]["message"]["parts"] == [{"text": "busy"}]
    chunk = store.add_artifact(task_id, artifact("x"), append=True, last_chunk=True)
    assert chunk.payload["artifactUpdate"]["append"] is True
    assert chunk.payload["artifactUpdate"]["lastChunk"] is True
    assert chunk.payload["artifactUpdate"]["artifact"]["parts"] == [{"text": "x"}]


def test_a_change_and_its_event_are_one_transaction(store):
    task_id = create(store)
    before = footprint(task_id)

    def broken_log(execute, sql, params, many, context):
        if sql.startswith(f'INSERT INTO "{models.TaskEvent._meta.db_table}"'):
            raise RuntimeError("event log unavailable")
        return execute(sql, params, many, context)

    with connection.execute_wrapper(broken_log):
        with pytest.raises(RuntimeError):
            store.update_status(task_id, TaskState.WORKING, agent_message("lost"))
        with pytest.raises(RuntimeError):
            store.add_artifact(task_id, artifact("lost"), append=False, last_chunk=True)
    assert footprint(task_id) == before


def test_a_new_task_logs_its_first_event_without_publishing_it(
    store, published, django_capture_on_commit_callbacks
):
    """No one can be subscribed to a task that does not exist yet, and a later subscriber
    starts from a snapshot holding event 1: the creation is logged (for Last-Event-ID
    resumes and the blocking wait) but not sent through the bus."""
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        task_id = create(store)
    assert callbacks == []
    assert published == []
    [event] = store.events_after(task_id, 0)
    assert (event.seq, event.state, next(iter(event.payload))) == (1, TaskState.SUBMITTED, "task")
    assert models.Task.objects.get(pk=task_id).seq == 1


def complete_then_roll_back(store: TaskStore, task_id: str) -> None:
    with transaction.atomic():
        store.update_status(task_id, TaskState.COMPLETED)
        raise ValueError("rolled back")


def test_events_are_published_only_after_commit(
    store, published, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks() as callbacks:
        task_id = create(store)
        store.update_status(task_id, TaskState.WORKING)
        assert published == []
    assert len(callbacks) == 1
    for callback in callbacks:
        callback()
    assert [(event.task_id, event.seq) for event in published] == [(task_id, 2)]
    assert published[0].state is TaskState.WORKING

    published.clear()
    with django_capture_on_commit_callbacks(execute=True) as callbacks, pytest.raises(ValueError):
        complete_then_roll_back(store, task_id)
    assert callbacks == []
    assert published == []
    assert models.Task.objects.get(pk=task_id).state == TaskState.WORKING.value


# --- terminal tasks never change -----------------------------------------------------------


WRITES: dict[str, Callable[[TaskStore, str], Any]] = {
    "working": lambda store, task_id: store.update_status(task_id, TaskState.WORKING),
    "completed": lambda store, task_id: store.update_status(task_id, TaskState.COMPLETED),
    "failed with message": lambda store, task_id: store.update_status(
        task_id, TaskState.FAILED, agent_message("late")
    ),
    "input required": lambda store, task_id: store.update_status(
        task_id, TaskState.INPUT_REQUIRED, agent_message("late question")
    ),
    "artifact": lambda store, task_id: store.add_artifact(
        task_id, artifact("late"), append=False, last_chunk=True
    ),
    "artifact chunk": lambda store, task_id: store.add_artifact(
        task_id, artifact("late", artifact_id="a0"), append=True, last_chunk=False
    ),
    "reply": lambda store, task_id: store.reply(task_id, agent_message("late reply")),
}


@pytest.mark.parametrize("state", TERMINAL)
@pytest.mark.parametrize("write", WRITES.values(), ids=WRITES.keys())
def test_terminal_tasks_refuse_every_write(store, published, state, write):
    task_id = stored_task(state=state, history=2, artifacts=["kept"], store=store)
    before = footprint(task_id)
    published.clear()
    with pytest.raises(TaskStateError):
        write(store, task_id)
    assert footprint(task_id) == before
    assert published == []


@pytest.mark.parametrize("state", TERMINAL)
def test_terminal_tasks_refuse_messages_and_cancel(store, state):
    task_id = stored_task(state=state, store=store)
    before = footprint(task_id)
    with pytest.raises(UnsupportedOperationError):
        store.continue_task(task_id, "anonymous", "", user("more"))
    with pytest.raises(TaskNotCancelableError):
        store.cancel(task_id, "anonymous", "")
    assert footprint(task_id) == before


def test_cancel_writes_canceled_and_its_event(store):
    task_id = create(store)
    store.update_status(task_id, TaskState.WORKING)
    task = store.cancel(task_id, "anonymous", "")
    assert task.status.state is TaskState.CANCELED
    assert events(task_id)[-1] == (3, "statusUpdate")
    with pytest.raises(TaskStateError):
        store.update_status(task_id, TaskState.COMPLETED)


# --- history ------------------------------------------------------------------------------


def test_history_positions_are_contiguous(store):
    task_id = create(store, "ask")
    question = agent_message("name?")
    store.update_status(task_id, TaskState.INPUT_REQUIRED, question)
    _, resumed = store.continue_task(task_id, "anonymous", "", user("Ann"))
    assert resumed
    store.update_status(task_id, TaskState.WORKING, question)  # re-sent: kept once
    store.update_status(task_id, TaskState.WORKING)  # no message: no history row
    store.update_status(task_id, TaskState.COMPLETED, agent_message("Hello Ann"))
    task = models.Task.objects.get(pk=task_id)
    positions = list(task.messages.order_by("position").values_list("position", flat=True))
    assert positions == list(range(4))
    assert task.history_size == 4
    texts = [m.parts[0].text for m in store.history(task_id)]
    assert texts == ["ask", "name?", "Ann", "Hello Ann"]


def test_repeated_message_does_not_resume_the_task(store):
    task_id = create(store, "ask")
    store.update_status(task_id, TaskState.INPUT_REQUIRED, agent_message("name?"))
    answer = user("Ann")
    store.continue_task(task_id, "anonymous", "", answer)
    store.update_status(task_id, TaskState.INPUT_REQUIRED, agent_message("surname?"))
    before = footprint(task_id)
    record, resumed = store.continue_task(task_id, "anonymous", "", answer)
    assert not resumed
    assert record.state is TaskState.INPUT_REQUIRED
    assert footprint(task_id) == before


def test_continuation_is_stored_in_the_tasks_context(store):
    task_id = create(store, "ask", context_id="blue")
    store.update_status(task_id, TaskState.INPUT_REQUIRED, agent_message("name?"))
    store.continue_task(task_id, "anonymous", "", user("Ann"))
    assert {m.context_id for m in store.history(task_id)} == {"blue"}
    assert {m.task_id for m in store.history(task_id)} == {task_id}


def test_snapshot_history_is_that_of_the_row_read(store):
    task_id = stored_task(state=TaskState.WORKING, history=3, store=store)
    row = models.Task.objects.get(pk=task_id)
    store.update_status(task_id, TaskState.WORKING, agent_message("newer"))
    for length in (None, 2):
        [task] = store.snapshots([row], history_length=length, include_artifacts=False)
        texts = [m.parts[0].text for m in task.history]
        assert texts == ["hello 0", "step 1", "step 2"][-(length or 3) :]


# --- artifacts ----------------------------------------------------------------------------


def test_artifact_chunks_append_and_replace(store):
    task_id = create(store)
    store.add_artifact(task_id, artifact("one ", "story"), append=False, last_chunk=False)
    store.add_artifact(task_id, artifact("two", "story"), append=True, last_chunk=True)
    store.add_artifact(task_id, artifact("other", "notes"), append=False, last_chunk=True)
    task = store.get_task(task_id, "anonymous", "")
    assert [(a.artifact_id, [p.text for p in a.parts]) for a in task.artifacts] == [
        ("story", ["one ", "two"]),
        ("notes", ["other"]),
    ]
    store.add_artifact(task_id, artifact("new", "story"), append=False, last_chunk=True)
    task = store.get_task(task_id, "anonymous", "")
    assert [p.text for p in task.artifacts[0].parts] == ["new"]
    assert models.Artifact.objects.filter(task_id=task_id).count() == 2


# --- reads and scoping --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("owner", "tenant"), [("user:2", ""), ("anonymous", "acme"), ("Anonymous", "")]
)
def test_reads_and_writes_are_scoped_to_the_owner(store, owner, tenant):
    task_id = create(store)
    with pytest.raises(TaskNotFoundError):
        store.get_task(task_id, owner, tenant)
    with pytest.raises(TaskNotFoundError):
        store.cancel(task_id, owner, tenant)
    with pytest.raises(TaskNotFoundError):
        store.continue_task(task_id, owner, tenant, user("x"))
    assert store.get_task(task_id, "anonymous", "").id == task_id


@pytest.mark.parametrize("task_id", ["", "x", "123", "00000000-0000-0000-0000-000000000000"])
def test_unknown_or_malformed_ids_are_not_found(store, task_id):
    with pytest.raises(TaskNotFoundError):
        store.get_task(task_id, "anonymous", "")


def test_task_for_message_is_scoped_and_only_for_user_messages(store):
    message = user("once")
    record = store.create_task(owner="anonymous", tenant="", context_id="c", message=message)
    store.update_status(record.id, TaskState.WORKING, agent_message("agent says"))
    assert store.task_for_message("anonymous", "", message.message_id) == record.id
    assert store.task_for_message("user:1", "", message.message_id) is None
    assert store.task_for_message("anonymous", "", "agent-agent says") is None


def test_direct_reply_is_remembered(store):
    replied, worked = create(store), create(store)
    answer = agent_message("you said hi")
    store.reply(replied, answer)
    store.update_status(worked, TaskState.COMPLETED, agent_message("done"))
    reply = store.direct_reply(replied)
    assert reply is not None
    assert reply.parts == answer.parts
    assert reply.context_id == "ctx"
    assert reply.task_id == ""
    assert store.direct_reply(worked) is None


# --- query cost ---------------------------------------------------------------------------


def count_queries(read: Callable[[], Any]) -> int:
    with CaptureQueriesContext(connection) as queries:
        read()
    return len(queries)


@pytest.mark.parametrize("history_length", [None, 0, 3])
def test_get_task_query_count_is_constant(store, history_length):
    small = stored_task(history=1, store=store)
    big = stored_task(history=30, artifacts=[f"a{n}" for n in range(10)], store=store)

    def get(task_id: str) -> Callable[[], Any]:
        return lambda: store.get_task(task_id, "anonymous", "", history_length=history_length)

    assert count_queries(get(small)) == count_queries(get(big)) <= 3


@pytest.mark.parametrize(("history_length", "include_artifacts"), [(None, True), (2, False)])
def test_list_tasks_query_count_is_constant(store, history_length, include_artifacts):
    request = types.ListTasksRequest(
        history_length=history_length, include_artifacts=include_artifacts
    )

    def list_for(owner: str) -> Callable[[], Any]:
        return lambda: store.list_tasks(owner, "", request)

    stored_task(owner="one", history=1, store=store)
    for _ in range(12):
        stored_task(owner="many", history=8, artifacts=["x", "y", "z"], store=store)
    one = count_queries(list_for("one"))
    many = count_queries(list_for("many"))
    assert one == many <= 4
    assert len(store.list_tasks("many", "", request).tasks) == 12


# --- ListTasks at scale: the query plan, not a stopwatch -----------------------------------

BULK_TASKS = """
INSERT INTO a2a_endpoint_task
    (id, context_id, owner, tenant, origin_message_id, job_id, job_position, job_attempts,
     state, status_timestamp, seq, history_size, created_at, updated_at)
SELECT gen_random_uuid(), 'ctx-' || (n %% 100),
       CASE WHEN n %% 4 = 0 THEN 'user:' || (n %% 50) ELSE 'anonymous' END, '', 'm-' || n,
       '', 0, 0,
       CASE WHEN n %% 3 = 0 THEN 'TASK_STATE_WORKING' ELSE 'TASK_STATE_COMPLETED' END,
       now() - n * interval '1 second', 1, 0, now(), now()
FROM generate_series(1, %s) AS n
"""


def page_queries(read: Callable[[], Any]) -> list[tuple[str, Any]]:
    """The (sql, params) of the task page queries ``read`` runs."""
    seen: list[tuple[str, Any]] = []

    def record(execute, sql, params, many, context):
        if 'FROM "a2a_endpoint_task"' in sql and "ORDER BY" in sql:
            seen.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        read()
    return seen


def explain(sql: str, params: Any) -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {sql}", params)
        return "\n".join(row[0] for row in cursor.fetchall())


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL query plans")
def test_list_tasks_pages_walk_the_owner_index(store):
    with connection.cursor() as cursor:
        cursor.execute(BULK_TASKS, [20_000])
        cursor.execute("ANALYZE a2a_endpoint_task")
    request = types.ListTasksRequest(page_size=50)
    first = store.list_tasks("anonymous", "", request)
    assert first.total_size == 15_000
    queries = page_queries(lambda: store.list_tasks("anonymous", "", request))
    later = types.ListTasksRequest(page_size=50, page_token=first.next_page_token)
    queries += page_queries(lambda: store.list_tasks("anonymous", "", later))
    assert len(queries) == 2
    for sql, params in queries:
        plan = explain(sql, params)
        assert "OFFSET" not in sql.upper()
        assert "Index Scan using a2a_task_owner_recent" in plan, plan
        assert "Sort" not in plan, plan  # the index order is the page order
    # Keyset paging: a later page starts its index scan at the cursor (an Index Cond),
    # instead of filtering every newer row of the owner.
    cursor_plan = explain(*queries[1]).splitlines()
    scan = next(i for i, line in enumerate(cursor_plan) if "a2a_task_owner_recent" in line)
    index_cond = next(line for line in cursor_plan[scan:] if "Index Cond" in line)
    assert "status_timestamp" in index_cond, "\n".join(cursor_plan)
    # The total is the sum of the caller's kept counts (migration 0003), not a count of
    # its 15,000 index entries: the page's scan is the only one of the task table.
    for sql, params in queries:
        plan = explain(sql, params)
        assert "a2a_endpoint_task_count_pkey" in plan, plan
        assert plan.count("on a2a_endpoint_task ") == 1, plan
