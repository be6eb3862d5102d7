"""PostgreSQL's one-statement task snapshot gives exactly what the ORM reads give.

``TaskStore.get_task`` and ``snapshot`` read a task on PostgreSQL with one SQL statement
(row, history window and artifacts aggregated to JSON); ``snapshots`` (ListTasks, and every
other database) builds the same value from three ORM queries. Every field must agree.
"""

from __future__ import annotations

import threading
import uuid
from datetime import datetime, timedelta
from typing import Any

import msgspec
import pytest
from django.db import OperationalError, connection, connections, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from a2a_endpoint import models, types
from a2a_endpoint.errors import TaskNotFoundError
from a2a_endpoint.lifecycle import TaskState
from a2a_endpoint.store import TaskStore
from a2a_endpoint.store.cursor import _read_cursor
from a2a_endpoint.testing import user_message
from tests.service.builders import DEADLINE, agent_message

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(
        connection.vendor != "postgresql", reason="the one-statement read is PostgreSQL's"
    ),
]

HISTORY_LENGTHS = [None, 0, 1, 2, 5, 100]


def orm_snapshot(task_id: str, history_length: int | None) -> types.Task:
    row = models.Task.objects.get(pk=task_id)
    [task] = TaskStore().snapshots([row], history_length=history_length, include_artifacts=True)
    return task


def wire(task: types.Task) -> dict[str, Any]:
    return msgspec.to_builtins(task)


def bare_task(
    store: TaskStore, text: str, owner: str = "user:7", tenant: str = "acme", context: str = "ctx"
) -> str:
    """A new SUBMITTED task whose history is one user message; its id."""
    message = msgspec.convert(user_message(text), types.Message)
    return store.create_task(owner=owner, tenant=tenant, context_id=context, message=message).id


def rich_task(store: TaskStore) -> str:
    """A task using every stored field: metadata, a status message, artifacts of all kinds."""
    first = msgspec.convert(
        user_message("hello", metadata={"n": 1.5, "big": 2**53, "null": None, "s": "é"}),
        types.Message,
    )
    record = store.create_task(
        owner="user:7",
        tenant="acme",
        context_id="ctx-rich",
        message=first,
        metadata={"project": {"id": 3, "tags": ["a", "b"]}},
    )
    store.update_status(record.id, TaskState.WORKING, agent_message("thinking"))
    parts = [
        types.Part(text="plain", metadata={"k": "v"}),
        types.Part(raw=b"\x00\xffbytes", filename="a.bin", media_type="application/octet-stream"),
        types.Part(url="https://example.com/f.png", media_type="image/png"),
        types.Part(data={"rows": [1, 2, {"x": None}]}),
        types.Part(data=None),
    ]
    store.add_artifact(
        record.id,
        types.Artifact(
            artifact_id="full",
            name="Full",
            description="every field",
            parts=parts,
            metadata={"m": [True, False]},
            extensions=["https://example.com/ext/v1"],
        ),
        append=False,
        last_chunk=False,
    )
    store.add_artifact(
        record.id,
        types.Artifact(artifact_id="full", parts=[types.Part(text=" more")]),
        append=True,
        last_chunk=True,
    )
    store.add_artifact(
        record.id,
        types.Artifact(artifact_id="bare", parts=[types.Part(text="x")]),
        append=False,
        last_chunk=True,
    )
    for n in range(3):
        store.update_status(record.id, TaskState.WORKING, agent_message(f"step {n}"))
    store.update_status(record.id, TaskState.INPUT_REQUIRED, agent_message("which one?"))
    return record.id


@pytest.mark.parametrize("history_length", HISTORY_LENGTHS)
def test_get_task_equals_the_orm_snapshot(history_length):
    store = TaskStore()
    task_id = rich_task(store)
    task = store.get_task(task_id, "user:7", "acme", history_length=history_length)
    assert wire(task) == wire(orm_snapshot(task_id, history_length))
    assert msgspec.json.encode(task) == msgspec.json.encode(orm_snapshot(task_id, history_length))


@pytest.mark.parametrize("history_length", HISTORY_LENGTHS)
def test_a_bare_task_equals_the_orm_snapshot(history_length):
    store = TaskStore()
    task_id = bare_task(store, "hi", owner="anonymous", tenant="")
    task = store.get_task(task_id, "anonymous", "", history_length=history_length)
    assert wire(task) == wire(orm_snapshot(task_id, history_length))
    assert task.artifacts == []
    assert task.status.state is TaskState.SUBMITTED
    assert task.metadata is None


def test_the_history_window_is_the_newest_messages():
    store = TaskStore()
    task_id = rich_task(store)
    texts = [m.parts[0].text for m in store.get_task(task_id, "user:7", "acme").history]
    assert texts == ["hello", "thinking", "step 0", "step 1", "step 2", "which one?"]
    tail = store.get_task(task_id, "user:7", "acme", history_length=2).history
    assert [m.parts[0].text for m in tail] == ["step 2", "which one?"]
    assert store.get_task(task_id, "user:7", "acme", history_length=0).history == []


def test_snapshot_returns_the_seq_of_the_row_in_one_statement():
    store = TaskStore()
    task_id = rich_task(store)
    with CaptureQueriesContext(connection) as queries:
        task, seq = store.snapshot(task_id, "user:7", "acme", history_length=3)
    assert len(queries) == 1  # one statement: one consistent view, no transaction needed
    assert seq == models.Task.objects.get(pk=task_id).seq
    assert wire(task) == wire(orm_snapshot(task_id, 3))


@pytest.mark.parametrize(
    ("owner", "tenant"), [("user:8", "acme"), ("user:7", ""), ("anonymous", "acme")]
)
def test_another_callers_task_is_not_found(owner, tenant):
    store = TaskStore()
    task_id = rich_task(store)
    with pytest.raises(TaskNotFoundError):
        store.get_task(task_id, owner, tenant)
    with pytest.raises(TaskNotFoundError):
        store.snapshot(task_id, owner, tenant)


@pytest.mark.parametrize("task_id", ["4b7c1b6e-0000-4000-8000-000000000000", "not-a-uuid", ""])
def test_unknown_task_ids_are_not_found(task_id):
    with pytest.raises(TaskNotFoundError):
        TaskStore().get_task(task_id, "anonymous", "")


def test_the_id_is_spelled_canonically():
    store = TaskStore()
    task_id = rich_task(store)
    task = store.get_task(task_id.upper(), "user:7", "acme")
    assert task.id == task_id


@pytest.mark.parametrize("include_artifacts", [False, True])
@pytest.mark.parametrize("history_length", HISTORY_LENGTHS)
def test_list_tasks_pages_equal_the_orm_snapshots(history_length, include_artifacts):
    """ListTasks reads each page's lists in the page query; the ORM path agrees task by task."""
    store = TaskStore()
    ids = {rich_task(store) for _ in range(3)}
    ids |= {bare_task(store, f"bare {n}", context=f"ctx-{n}") for n in range(3)}
    request = types.ListTasksRequest(
        page_size=4, history_length=history_length, include_artifacts=include_artifacts
    )
    first = store.list_tasks("user:7", "acme", request)
    second = store.list_tasks(
        "user:7", "acme", msgspec.structs.replace(request, page_token=first.next_page_token)
    )
    assert first.total_size == second.total_size == 6
    listed = [*first.tasks, *second.tasks]
    assert {task.id for task in listed} == ids
    rows = {str(row.id): row for row in models.Task.objects.filter(pk__in=ids)}
    for task in listed:
        [expected] = TaskStore().snapshots(
            [rows[task.id]], history_length=history_length, include_artifacts=include_artifacts
        )
        assert wire(task) == wire(expected)
    assert any(task.artifacts for task in listed) is include_artifacts


def test_a_list_page_is_one_statement_whatever_its_size():
    store = TaskStore()
    for _ in range(5):
        rich_task(store)
    request = types.ListTasksRequest(page_size=50, include_artifacts=True)
    with CaptureQueriesContext(connection) as queries:
        page = store.list_tasks("user:7", "acme", request)
    assert len(page.tasks) == 5
    assert page.total_size == 5
    assert len(queries) == 1  # the page with its lists and totalSize: one snapshot
    # The page reads the columns a Task needs, not whole rows (job and lease bookkeeping).
    assert "lease_expires_at" not in queries[0]["sql"]
    assert "status_message" in queries[0]["sql"]


def cursor(token: str) -> tuple[datetime, uuid.UUID] | None:
    return _read_cursor(token) if token else None


def listed_tasks(store: TaskStore) -> list[str]:
    """Eight tasks of user:7/acme in two contexts and three states, two by two on the same
    status timestamp (the id breaks the tie), and one task of each other caller; the ids of
    user:7's, newest first."""
    ids = []
    base = timezone.now() - timedelta(hours=1)
    states = [TaskState.WORKING, TaskState.COMPLETED, TaskState.INPUT_REQUIRED]
    for n in range(8):
        task_id = bare_task(store, f"task {n}", context=f"ctx-{n % 2}")
        if n % 4:
            store.update_status(task_id, states[n % 3], agent_message(f"now {n}"))
        models.Task.objects.filter(pk=task_id).update(
            status_timestamp=base + timedelta(seconds=n // 2)
        )
        ids.append(task_id)
    for owner, tenant in [("user:8", "acme"), ("user:7", "")]:
        bare_task(store, "not yours", owner=owner, tenant=tenant, context="ctx-0")
    newest_first = models.Task.objects.filter(pk__in=ids).order_by("-status_timestamp", "-id")
    return [str(task_id) for task_id in newest_first.values_list("id", flat=True)]


FILTERS = {
    "none": {},
    "context": {"context_id": "ctx-1"},
    "state": {"status": TaskState.SUBMITTED},
    "after": {"status_timestamp_after": "+1"},
    "context and state": {"context_id": "ctx-0", "status": TaskState.SUBMITTED},
    "all three": {
        "context_id": "ctx-1",
        "status": TaskState.INPUT_REQUIRED,
        "status_timestamp_after": "+0",
    },
    "nothing matches": {"context_id": "ctx-none"},
}


@pytest.mark.parametrize("name", FILTERS)
def test_every_filter_pages_as_the_orm_path_does(monkeypatch, name):
    """contextId, status and statusTimestampAfter, alone and together, page by page with
    the cursor and past the last page: one statement gives the ORM path's pages and totals."""
    store = TaskStore()
    ids = listed_tasks(store)
    filters = dict(FILTERS[name])
    if "status_timestamp_after" in filters:
        seconds = int(filters["status_timestamp_after"])
        oldest = models.Task.objects.get(pk=ids[-1]).status_timestamp
        filters["status_timestamp_after"] = oldest + timedelta(seconds=seconds)

    def pages() -> list[types.ListTasksResponse]:
        request = types.ListTasksRequest(page_size=2, history_length=1, **filters)
        listed = [store.list_tasks("user:7", "acme", request)]
        while listed[-1].next_page_token:
            request = msgspec.structs.replace(request, page_token=listed[-1].next_page_token)
            listed.append(store.list_tasks("user:7", "acme", request))
        return listed

    def contents(listed: list[types.ListTasksResponse]) -> list[tuple[Any, ...]]:
        # A token is signed with a timestamp: compare the cursor it holds, not its spelling.
        return [
            (wire(page.tasks), page.total_size, page.page_size, cursor(page.next_page_token))
            for page in listed
        ]

    one_statement = pages()
    monkeypatch.setattr(connection, "vendor", "sqlite")
    through_orm = pages()
    assert contents(one_statement) == contents(through_orm)
    listed = [task.id for page in one_statement for task in page.tasks]
    assert len(set(listed)) == len(listed) == one_statement[0].total_size
    assert set(listed) <= set(ids)
    assert listed == [task_id for task_id in ids if task_id in listed]  # newest first
    if name == "none":
        assert listed == ids
    if name == "nothing matches":
        assert one_statement == [types.ListTasksResponse(page_size=2)]


def test_a_page_past_the_last_task_still_counts_them():
    """A cursor whose tasks are all behind it: no rows, and the total from its own count."""
    store = TaskStore()
    ids = listed_tasks(store)
    request = types.ListTasksRequest(page_size=len(ids) - 1)
    first = store.list_tasks("user:7", "acme", request)
    assert first.next_page_token
    models.Task.objects.filter(pk=ids[-1]).update(
        status_timestamp=timezone.now() + timedelta(hours=1)
    )
    with CaptureQueriesContext(connection) as queries:
        past = store.list_tasks(
            "user:7", "acme", msgspec.structs.replace(request, page_token=first.next_page_token)
        )
    assert past.tasks == []
    assert past.next_page_token == ""
    assert past.total_size == len(ids)
    assert len(queries) == 2  # the empty page, then the count


@pytest.mark.parametrize("history_length", [None, 0, 2])
def test_other_databases_read_the_same_values_through_the_orm(monkeypatch, history_length):
    """SQLite and the rest take the ORM path of get_task, snapshot and list_tasks."""
    store = TaskStore()
    task_id = rich_task(store)
    request = types.ListTasksRequest(history_length=history_length, include_artifacts=True)
    one_statement = (
        store.get_task(task_id, "user:7", "acme", history_length=history_length),
        store.snapshot(task_id, "user:7", "acme", history_length=history_length),
        store.list_tasks("user:7", "acme", request),
    )
    monkeypatch.setattr(connection, "vendor", "sqlite")
    with CaptureQueriesContext(connection) as queries:
        through_orm = (
            store.get_task(task_id, "user:7", "acme", history_length=history_length),
            store.snapshot(task_id, "user:7", "acme", history_length=history_length),
            store.list_tasks("user:7", "acme", request),
        )
    assert len(queries) > 3 + 1 + 2  # the ORM path ran: 3 + 3 (in a transaction) + 4
    assert msgspec.to_builtins(through_orm) == msgspec.to_builtins(one_statement)


# --- the locking read of every write -------------------------------------------------------


def test_the_locked_row_is_the_orm_row():
    """``_locked`` and ``_visible(lock=True)`` read the row with one written-out statement on
    PostgreSQL: every field is the value the ORM's ``select_for_update`` reads."""
    store = TaskStore()
    task_id = rich_task(store)
    models.Task.objects.filter(pk=task_id).update(
        job_id="job-1", job_position=1, lease_expires_at=timezone.now()
    )
    names = [field.attname for field in models.Task._meta.concrete_fields]
    with transaction.atomic():
        expected = models.Task.objects.select_for_update().get(pk=task_id)
        with CaptureQueriesContext(connection) as queries:
            locked = store._locked(task_id)
            visible = store._visible(task_id.upper(), "user:7", "acme", lock=True)
        assert all("FOR UPDATE" in query["sql"] for query in queries)
    for task in (locked, visible):
        assert isinstance(task, models.Task)
        assert task._state.adding is False
        assert task._state.db == "default"
        assert {name: getattr(task, name) for name in names} == {
            name: getattr(expected, name) for name in names
        }
    assert locked.metadata == {"project": {"id": 3, "tags": ["a", "b"]}}
    assert locked.status_message["parts"] == [{"text": "which one?"}]


@pytest.mark.parametrize(("owner", "tenant"), [("user:8", "acme"), ("user:7", "")])
def test_a_locked_read_of_another_callers_task_is_not_found(owner, tenant):
    store = TaskStore()
    task_id = rich_task(store)
    with transaction.atomic(), pytest.raises(TaskNotFoundError):
        store._visible(task_id, owner, tenant, lock=True)
    with transaction.atomic(), pytest.raises(TaskNotFoundError):
        store._locked("4b7c1b6e-0000-4000-8000-000000000000")


@pytest.mark.django_db(transaction=True)
def test_a_write_holds_the_row_lock_until_it_commits():
    """Concurrent writers of a task serialize on its row: while one holds ``_locked``, another
    connection cannot lock the row (NOWAIT fails at once); after its commit it can."""
    store = TaskStore()
    task_id = bare_task(store, "hi", owner="anonymous", tenant="")
    locked, release = threading.Event(), threading.Event()

    def writer() -> None:
        try:
            with transaction.atomic():
                store._locked(task_id)
                locked.set()
                release.wait(DEADLINE)
        finally:
            connections.close_all()

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        assert locked.wait(DEADLINE)
        with (
            pytest.raises(OperationalError, match="could not obtain lock"),
            transaction.atomic(),
            connection.cursor() as cursor,
        ):
            cursor.execute(
                "SELECT 1 FROM a2a_endpoint_task WHERE id = %s FOR UPDATE NOWAIT", [task_id]
            )
    finally:
        release.set()
        thread.join(DEADLINE)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM a2a_endpoint_task WHERE id = %s FOR UPDATE NOWAIT", [task_id])
        assert cursor.fetchone() == (1,)
