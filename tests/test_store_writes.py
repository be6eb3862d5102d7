"""The store's written-out INSERTs and UPDATEs store exactly what the ORM's would.

``store.sql._insert`` and ``store.sql._save_fields`` replace ``Model.save()`` on the hot writes
(a new task, each event, each status change): the same field conversions, no query building.
"""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from typing import Any

import msgspec
import pytest
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from a2a_endpoint import models, store, types
from a2a_endpoint.lifecycle import TaskState
from a2a_endpoint.store import TaskStore
from a2a_endpoint.testing import user_message
from tests.service.builders import agent_message
from tests.test_project_settings import clean_env, run

pytestmark = [pytest.mark.django_db]

#: JSON values whose types must survive the round trip: the payloads are ProtoJSON.
ODD_JSON = {"n": 1.5, "big": 2**53, "null": None, "s": 'é \u2028 "q"', "l": [1, {"x": []}]}


def stored(instance: Any) -> dict[str, Any]:
    """Every column of ``instance``'s row, read back through the ORM."""
    model = type(instance)
    row = model.objects.get(pk=instance.pk)
    return {field.attname: getattr(row, field.attname) for field in model._meta.concrete_fields}


def without(values: dict[str, Any], *names: str) -> dict[str, Any]:
    return {name: value for name, value in values.items() if name not in names}


WHEN = timezone.now() - timedelta(minutes=5)


def a_task(origin: str, **fields: Any) -> models.Task:
    values = {
        "id": uuid.uuid4(),
        "context_id": "ctx",
        "owner": "user:7",
        "tenant": "acme",
        "origin_message_id": origin,
        "state": TaskState.SUBMITTED.value,
        "status_timestamp": WHEN,
        "metadata": ODD_JSON,
        "status_message": {"parts": [{"text": "hi"}]},
        "seq": 1,
        "history_size": 1,
        **fields,
    }
    return models.Task(**values)


def test_an_inserted_task_equals_a_created_one():
    ours, theirs = a_task("m-ours"), a_task("m-theirs")
    before = timezone.now()
    with CaptureQueriesContext(connection) as queries:
        store.sql._insert(ours)
    theirs.save()
    assert len(queries) == 1
    assert queries[0]["sql"].startswith("INSERT INTO")
    mine, orm = stored(ours), stored(theirs)
    assert without(mine, "id", "origin_message_id", "created_at", "updated_at") == without(
        orm, "id", "origin_message_id", "created_at", "updated_at"
    )
    assert mine["metadata"] == ODD_JSON
    assert mine["id"] == ours.id
    # auto_now_add and auto_now are set, on the row and on the instance.
    assert mine["created_at"] >= before
    assert mine["updated_at"] >= before
    assert ours.created_at == mine["created_at"]
    assert not ours._state.adding


@pytest.mark.parametrize("model", ["Message", "TaskEvent", "Artifact"])
def test_inserted_rows_of_a_task_equal_created_ones(model):
    mine, theirs = a_task("m-1"), a_task("m-2")
    mine.save()
    theirs.save()
    values = {
        "Message": {"position": 0, "message_id": "x", "role": "ROLE_USER", "payload": ODD_JSON},
        "TaskEvent": {
            "seq": 1,
            "kind": "task",
            "state": "TASK_STATE_SUBMITTED",
            "payload": ODD_JSON,
        },
        "Artifact": {"position": 0, "artifact_id": "a", "parts": [ODD_JSON], "metadata": None},
    }[model]
    cls = getattr(models, model)
    store.sql._insert(cls(task=mine, **values))
    cls.objects.create(task=theirs, **values)
    [ours] = cls.objects.filter(task=mine).values()
    [orm] = cls.objects.filter(task=theirs).values()
    skip = ("id", "task_id", "created_at", "updated_at")
    assert without(ours, *skip) == without(orm, *skip)
    assert ours["created_at"] is not None


def test_saving_fields_updates_those_fields_only():
    task = a_task("m-1")
    task.save()
    row = models.Task.objects.get(pk=task.pk)
    untouched = stored(row)
    row.state = TaskState.WORKING.value
    row.status_message = ODD_JSON
    row.seq = 7
    row.context_id = "not saved"
    with CaptureQueriesContext(connection) as queries:
        store.sql._save_fields(row, "state", "status_message", "seq", "updated_at")
    assert len(queries) == 1
    assert queries[0]["sql"].startswith("UPDATE")
    after = stored(row)
    assert after["state"] == TaskState.WORKING.value
    assert after["status_message"] == ODD_JSON
    assert after["seq"] == 7
    assert after["context_id"] == "ctx"  # not named, not written
    assert after["updated_at"] > untouched["updated_at"]  # auto_now
    assert without(after, "state", "status_message", "seq", "updated_at") == without(
        untouched, "state", "status_message", "seq", "updated_at"
    )


def test_saving_fields_writes_only_that_row():
    first, second = a_task("m-1"), a_task("m-2")
    first.save()
    second.save()
    first.seq = 9
    store.sql._save_fields(first, "seq")
    assert models.Task.objects.get(pk=second.pk).seq == 1


def test_a_duplicate_insert_is_an_integrity_error():
    store.sql._insert(a_task("m-1"))
    with pytest.raises(IntegrityError), transaction.atomic():
        store.sql._insert(a_task("m-1"))  # same owner, tenant and origin message


def test_a_second_task_for_one_message_returns_the_first():
    """create_task's own guard (the handler looks the message up first): the INSERT
    fails on the origin constraint, and the task that message started is returned."""
    message = msgspec.convert(user_message("once"), types.Message)
    task_store = TaskStore()
    first = task_store.create_task(owner="o", tenant="", context_id="c", message=message)
    again = task_store.create_task(owner="o", tenant="", context_id="c", message=message)
    assert again == first
    assert models.Task.objects.count() == 1
    assert models.Message.objects.count() == 1
    assert models.TaskEvent.objects.count() == 1


def test_a_jobs_writes_store_what_the_orm_path_read_back():
    """A task through claim, status changes with messages and an artifact: every row as the
    reads (ORM and the one-statement snapshot) give it back."""
    task_store = TaskStore()
    message = msgspec.convert(user_message("go"), types.Message)
    task_id = task_store.create_task(owner="o", tenant="", context_id="c", message=message).id
    assert task_store.claim_job(task_id, "job-1", 30)
    task_store.update_status(task_id, TaskState.WORKING, agent_message("working"))
    artifact = types.Artifact(
        artifact_id="a1", name="out", parts=[types.Part(text="x")], metadata=ODD_JSON
    )
    task_store.add_artifact(task_id, artifact, append=False, last_chunk=True)
    task_store.update_status(task_id, TaskState.COMPLETED, agent_message("done"))
    row = models.Task.objects.get(pk=task_id)
    assert (row.state, row.seq, row.history_size, row.job_id) == (
        TaskState.COMPLETED.value,
        4,
        3,
        "job-1",
    )
    assert row.status_message["parts"] == [{"text": "done"}]
    events = list(models.TaskEvent.objects.filter(task=row).order_by("seq"))
    assert [(e.seq, e.kind, e.state) for e in events] == [
        (1, "task", TaskState.SUBMITTED.value),
        (2, "statusUpdate", TaskState.WORKING.value),
        (3, "artifactUpdate", TaskState.WORKING.value),
        (4, "statusUpdate", TaskState.COMPLETED.value),
    ]
    assert [e.seq for e in task_store.events_after(task_id, 0)] == [1, 2, 3, 4]
    task = task_store.get_task(task_id, "o", "")
    assert task.status.state is TaskState.COMPLETED
    assert task.artifacts[0].metadata == ODD_JSON
    assert [m.message_id for m in task.history] == [
        message.message_id,
        "agent-working",
        "agent-done",
    ]


def test_an_artifacts_written_out_read_equals_the_orms():
    """``_artifact_row``: one statement for the artifact a chunk continues (every column as
    the ORM reads it) and the position a new one takes."""
    task = a_task("artifact-read")
    task.save()
    for position, artifact_id in enumerate(["a", "b"]):
        models.Artifact.objects.create(
            task=task,
            position=position,
            artifact_id=artifact_id,
            name=f"name {artifact_id}",
            description="d",
            parts=[ODD_JSON],
            metadata=ODD_JSON,
            extensions=["https://example.com/ext"],
            complete=True,
        )
    with CaptureQueriesContext(connection) as queries:
        row, position = store.sql._artifact_row(task, "b")
    assert len(queries) == 1
    expected = models.Artifact.objects.get(task=task, artifact_id="b")
    assert row is not None
    assert {f.attname: getattr(row, f.attname) for f in row._meta.concrete_fields} == stored(
        expected
    )
    assert not row._state.adding  # saved as an UPDATE of that row
    assert position == 2
    assert store.sql._artifact_row(task, "c") == (None, 2)
    empty = a_task("no-artifacts")
    empty.save()
    assert store.sql._artifact_row(empty, "a") == (None, 0)


def test_new_artifacts_take_the_next_positions_and_chunks_keep_theirs():
    task_store = TaskStore()
    message = msgspec.convert(user_message("go"), types.Message)
    task_id = task_store.create_task(owner="o", tenant="", context_id="c", message=message).id
    for artifact_id, append in [("a", False), ("b", False), ("a", True), ("c", False)]:
        chunk = types.Artifact(artifact_id=artifact_id, parts=[types.Part(text=artifact_id)])
        task_store.add_artifact(task_id, chunk, append=append, last_chunk=False)
    rows = models.Artifact.objects.filter(task_id=task_id).order_by("position")
    assert [(row.artifact_id, row.position, len(row.parts)) for row in rows] == [
        ("a", 0, 2),
        ("b", 1, 1),
        ("c", 2, 1),
    ]


#: The writes on SQLite, the embedded default (this suite's database is PostgreSQL): a task
#: through claim, updates and an artifact, in a process of its own on a fresh file.
SQLITE_ROUND_TRIP = """
import json
import django
django.setup()
from django.core.management import call_command
from django.db import connection
import msgspec
from a2a_endpoint import models, types
from a2a_endpoint.lifecycle import TaskState
from a2a_endpoint.store import TaskStore
from a2a_endpoint.testing import user_message

call_command("migrate", verbosity=0)
store = TaskStore()
message = msgspec.convert(user_message("hi", metadata={"n": 1.5}), types.Message)
new = {"owner": "o", "tenant": "", "context_id": "c", "message": message}
first = store.create_task(**new, metadata={"k": [1, None]})
again = store.create_task(**new)
claimed = store.claim_job(first.id, "job-1", 30)
store.update_status(first.id, TaskState.WORKING, msgspec.convert(
    {"messageId": "a1", "role": "ROLE_AGENT", "parts": [{"text": "w"}]}, types.Message))
artifact = types.Artifact(artifact_id="x", parts=[types.Part(text="out")])
store.add_artifact(first.id, artifact, append=False, last_chunk=False)
second = types.Artifact(artifact_id="y", parts=[types.Part(text="2nd")])
store.add_artifact(first.id, second, append=False, last_chunk=True)
store.add_artifact(first.id, artifact, append=True, last_chunk=True)
store.update_status(first.id, TaskState.COMPLETED)
task = store.get_task(first.id, "o", "")
row = models.Task.objects.get(pk=first.id)
print(json.dumps({
    "vendor": connection.vendor,
    "retry": again == first,
    "claimed": [m.message_id for m in claimed.history],
    "task": msgspec.to_builtins(task),
    "total": store.list_tasks("o", "", types.ListTasksRequest()).total_size,
    "events": [event.seq for event in store.events_after(first.id, 0)],
    "job": [row.job_id, row.job_position, row.lease_expires_at is not None],
    "times": row.created_at <= row.updated_at,
}))
"""


def test_the_writes_work_on_sqlite(tmp_path):
    env = clean_env(A2A_DEMO_DB=str(tmp_path / "db.sqlite3"))
    result = run(["-c", SQLITE_ROUND_TRIP], env)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["vendor"] == "sqlite"
    assert out["retry"] is True
    assert len(out["claimed"]) == 1
    task = out["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert [m["messageId"] for m in task["history"]] == [*out["claimed"], "a1"]
    assert task["history"][0]["metadata"] == {"n": 1.5}
    assert task["metadata"] == {"k": [1, None]}
    assert task["artifacts"] == [
        {"artifactId": "x", "parts": [{"text": "out"}, {"text": "out"}]},
        {"artifactId": "y", "parts": [{"text": "2nd"}]},
    ]
    assert out["total"] == 1
    assert out["events"] == [1, 2, 3, 4, 5, 6]
    assert out["job"] == ["job-1", 1, True]
    assert out["times"] is True


def test_a_later_chunk_stores_every_change_to_its_artifact():
    """An artifact's row is inserted with its first chunk and updated by later ones: each
    field a chunk may change is written."""
    task_store = TaskStore()
    message = msgspec.convert(user_message("go"), types.Message)
    task_id = task_store.create_task(owner="o", tenant="", context_id="c", message=message).id
    first = types.Artifact(
        artifact_id="a1", name="draft", parts=[types.Part(text="one ")], metadata={"x": 1}
    )
    task_store.add_artifact(task_id, first, append=False, last_chunk=False)
    inserted = models.Artifact.objects.get(task_id=task_id).updated_at
    later = types.Artifact(
        artifact_id="a1",
        name="final",
        description="both chunks",
        parts=[types.Part(text="two")],
        metadata={"y": 2},
        extensions=["https://example.com/ext"],
    )
    task_store.add_artifact(task_id, later, append=True, last_chunk=True)
    [row] = models.Artifact.objects.filter(task_id=task_id)
    assert (row.name, row.description, row.metadata, row.extensions, row.complete) == (
        "final",
        "both chunks",
        {"x": 1, "y": 2},
        ["https://example.com/ext"],
        True,
    )
    assert row.parts == [{"text": "one "}, {"text": "two"}]
    assert row.updated_at > inserted  # auto_now
    [stored] = task_store.get_task(task_id, "o", "").artifacts
    assert stored.name == "final"
    assert stored.metadata == {"x": 1, "y": 2}
