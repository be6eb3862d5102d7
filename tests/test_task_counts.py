"""PostgreSQL keeps each caller's number of tasks (migration 0003), and ListTasks' unfiltered
``totalSize`` reads it: every kind of write keeps it equal to ``COUNT(*)``.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Iterator
from datetime import timedelta

import msgspec
import pytest
from django.core.management import CommandError, call_command
from django.db import connection, connections
from django.db.migrations.executor import MigrationExecutor
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from a2a_endpoint import models, store, types
from a2a_endpoint.lifecycle import TaskState
from a2a_endpoint.store import TaskStore
from a2a_endpoint.testing import user_message
from tests.service.builders import DEADLINE

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL keeps the counts"),
]

COUNTS = "a2a_endpoint_task_count"


@pytest.fixture(autouse=True)
def found_afresh() -> Iterator[None]:
    """Each test looks the counts up itself; the next finds what was found before."""
    found = dict(store.counts._counts_found)
    store.forget_task_counts()
    yield
    store.counts._counts_found.clear()
    store.counts._counts_found.update(found)


def kept() -> dict[tuple[str, str], int]:
    """Each caller's kept count (callers whose count is 0 left out)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT owner, tenant, SUM(tasks) FROM {COUNTS} GROUP BY owner, tenant "
            "HAVING SUM(tasks) <> 0"
        )
        return {(owner, tenant): int(total) for owner, tenant, total in cursor.fetchall()}


def counted() -> dict[tuple[str, str], int]:
    """Each caller's number of task rows."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT owner, tenant, COUNT(*) FROM a2a_endpoint_task GROUP BY 1, 2")
        return {(owner, tenant): total for owner, tenant, total in cursor.fetchall()}


def new_task(owner: str = "user:7", tenant: str = "", context: str = "ctx") -> str:
    message = msgspec.convert(user_message("hi"), types.Message)
    created = TaskStore().create_task(
        owner=owner, tenant=tenant, context_id=context, message=message
    )
    return created.id


def rows(
    count: int,
    owner: str,
    tenant: str = "",
    state: str = "TASK_STATE_WORKING",
    model: type[models.Task] = models.Task,
):
    now = timezone.now()
    return [
        model(
            context_id="bulk",
            owner=owner,
            tenant=tenant,
            origin_message_id=f"bulk-{owner}-{tenant}-{n}",
            state=state,
            status_timestamp=now - timedelta(seconds=n),
        )
        for n in range(count)
    ]


def total(owner: str, tenant: str = "", **filters) -> int:
    request = types.ListTasksRequest(page_size=5, **filters)
    return TaskStore().list_tasks(owner, tenant, request).total_size


def test_new_tasks_are_counted_per_caller():
    for owner, tenant in [("user:7", ""), ("user:7", "acme"), ("user:8", ""), ("user:7", "")]:
        new_task(owner, tenant)
    assert kept() == counted() == {("user:7", ""): 2, ("user:7", "acme"): 1, ("user:8", ""): 1}


def test_a_bulk_insert_counts_every_row():
    models.Task.objects.bulk_create(rows(300, "user:1") + rows(200, "user:2", "acme"))
    assert kept() == counted() == {("user:1", ""): 300, ("user:2", "acme"): 200}


def test_deleted_tasks_are_uncounted():
    first = new_task("user:7")
    new_task("user:7")
    models.Task.objects.bulk_create(rows(50, "user:1") + rows(40, "user:2"))
    models.Task.objects.get(pk=first).delete()  # the admin's delete: cascades first
    # One DELETE of rows of two callers (every fifth bulk row).
    models.Task.objects.filter(origin_message_id__regex=r"^bulk-.*-[0-9]*[05]$").delete()
    assert kept() == counted()
    assert counted() == {("user:7", ""): 1, ("user:1", ""): 40, ("user:2", ""): 32}


def test_a_task_given_to_another_caller_moves_its_count():
    task_id = new_task("user:7")
    new_task("user:7")
    models.Task.objects.filter(pk=task_id).update(owner="user:9")
    assert kept() == counted() == {("user:7", ""): 1, ("user:9", ""): 1}
    models.Task.objects.filter(pk=task_id).update(tenant="acme")
    assert kept() == counted() == {("user:7", ""): 1, ("user:9", "acme"): 1}
    # Saving a row rewrites every column; the owner did not change, so neither do counts.
    task = models.Task.objects.get(pk=task_id)
    task.state = TaskState.WORKING.value
    task.save()
    assert kept() == counted() == {("user:7", ""): 1, ("user:9", "acme"): 1}


@pytest.mark.django_db(transaction=True)  # Django's foreign keys are checked at commit
def test_truncating_the_tasks_clears_the_counts():
    new_task("user:7")
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE a2a_endpoint_task CASCADE")
    assert kept() == counted() == {}
    new_task("user:7")
    assert kept() == counted() == {("user:7", ""): 1}


def test_the_unfiltered_total_is_the_kept_count():
    """The total without filters is read from the counts (a wrong count shows), a filtered
    one is counted (it does not)."""
    for _ in range(3):
        new_task("user:7", context="a")
    assert total("user:7") == 3
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {COUNTS} SET tasks = tasks + 10 WHERE owner = 'user:7'")
    assert total("user:7") == 3 + 10 * len(kept_rows("user:7"))
    assert total("user:7", context_id="a") == 3
    assert total("user:7", status=TaskState.SUBMITTED) == 3
    assert total("user:8") == 0


def kept_rows(owner: str) -> list[int]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT slot FROM {COUNTS} WHERE owner = %s", [owner])
        return [slot for (slot,) in cursor.fetchall()]


def test_a_page_past_the_last_task_reads_the_kept_count():
    ids = [new_task("user:7") for _ in range(3)]
    first = TaskStore().list_tasks("user:7", "", types.ListTasksRequest(page_size=2))
    models.Task.objects.filter(pk=ids[0]).update(status_timestamp=timezone.now() + timedelta(1))
    later = types.ListTasksRequest(page_size=2, page_token=first.next_page_token)
    with CaptureQueriesContext(connection) as queries:
        past = TaskStore().list_tasks("user:7", "", later)
    assert past.tasks == []
    assert past.total_size == 3
    assert COUNTS in queries[-1]["sql"]


def test_without_the_counts_the_total_is_counted(monkeypatch):
    """A database built without migrations has no counts: ListTasks counts the rows."""
    for _ in range(2):
        new_task("user:7")
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {COUNTS}")  # proves the count is not read from here
    monkeypatch.setattr(store.counts, "TASK_COUNT_TABLE", "a2a_endpoint_no_such_table")
    with CaptureQueriesContext(connection) as queries:
        assert total("user:7") == 2
    assert "to_regclass" in queries[0]["sql"]
    assert all(COUNTS not in query["sql"] for query in queries)
    with CaptureQueriesContext(connection) as queries:
        assert total("user:7") == 2
    assert len(queries) == 1  # looked up once


def test_a_migration_run_looks_the_counts_up_again():
    new_task("user:7")
    key = (connection.alias, str(connection.settings_dict["NAME"]))
    store.counts._counts_found[key] = False
    call_command("migrate", "a2a_endpoint", verbosity=0)  # nothing to apply: post_migrate
    assert key not in store.counts._counts_found
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {COUNTS} SET tasks = tasks + 1")
    assert total("user:7") > 1  # read from the counts again


@pytest.mark.django_db(transaction=True)
def test_concurrent_senders_of_one_caller_are_all_counted():
    """Callers' new tasks on many connections at once: none lost, none waits for a lock
    it cannot get (a deadlock would raise here)."""
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def sender() -> None:
        try:
            start.wait(DEADLINE)
            for _ in range(10):
                new_task("anonymous")
                new_task("user:1", "acme")
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=sender) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(DEADLINE)
    assert not errors
    assert kept() == counted() == {("anonymous", ""): 80, ("user:1", "acme"): 80}
    assert total("anonymous") == 80


@pytest.mark.django_db(transaction=True)
def test_the_migration_counts_the_tasks_already_stored():
    """Applied to a table with tasks, 0003 counts them; unapplied, it leaves no trace."""
    executor = MigrationExecutor(connection)
    try:
        before = [("a2a_endpoint", "0002_job_leases")]
        executor.migrate(before)
        with connection.cursor() as cursor:
            cursor.execute("SELECT to_regclass(%s), to_regproc(%s)", [COUNTS, f"{COUNTS}_added"])
            assert cursor.fetchone() == (None, None)
        # The task model as it was then (later migrations add columns).
        then = executor.loader.project_state(before).apps.get_model("a2a_endpoint", "Task")
        then.objects.bulk_create(
            rows(30, "user:1", model=then) + rows(20, "user:2", "acme", model=then)
        )
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes("a2a_endpoint"))
    assert kept() == counted() == {("user:1", ""): 30, ("user:2", "acme"): 20}
    new_task("user:1")
    assert kept() == counted() == {("user:1", ""): 31, ("user:2", "acme"): 20}


def recount(*args: str) -> str:
    out = io.StringIO()
    call_command("a2a_recount_tasks", *args, stdout=out)
    return out.getvalue()


def test_the_recount_command_checks_and_rebuilds_the_counts():
    for owner in ("user:1", "user:1", "user:2", "user:3"):
        new_task(owner)
    assert "Every task count is right." in recount("--check")
    with connection.cursor() as cursor:  # what triggers bypassed would leave
        cursor.execute(f"UPDATE {COUNTS} SET tasks = tasks + 5 WHERE owner = 'user:1'")
        cursor.execute(f"DELETE FROM {COUNTS} WHERE owner = 'user:2'")
        cursor.execute(f"INSERT INTO {COUNTS} VALUES ('user:9', 'acme', 3, 4)")
    before = kept()
    with pytest.raises(CommandError, match="3 wrong task count") as raised:
        recount("--check")
    assert raised.value.returncode == 1
    assert kept() == before  # --check changes nothing
    out = recount()
    assert "user:1: kept 7, counted 2" in out
    assert "user:2: kept 0, counted 1" in out
    assert "user:9 (tenant 'acme'): kept 4, counted 0" in out
    assert "3 were wrong" in out
    assert kept() == counted() == {("user:1", ""): 2, ("user:2", ""): 1, ("user:3", ""): 1}
    assert len(kept_rows("user:1")) == 1  # one row per caller again
    assert "none was wrong" in recount()


def test_the_recount_command_needs_the_counts(monkeypatch):
    monkeypatch.setattr(store.counts, "TASK_COUNT_TABLE", "a2a_endpoint_no_such_table")
    with pytest.raises(CommandError, match=r"run `manage\.py migrate`"):
        recount("--check")


def test_the_recount_command_has_nothing_to_do_elsewhere(monkeypatch):
    monkeypatch.setattr(connection, "vendor", "sqlite")
    assert "Only PostgreSQL keeps task counts" in recount()
