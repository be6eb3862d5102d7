"""The task admin as an operator console: list filters and state counts, the timeline of a
task's page, its Cancel task button, its job, and queries that do not grow with the rows."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import threading
import uuid
from datetime import timedelta

import msgspec
import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Permission
from django.contrib.messages import constants as message_levels
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from a2a_endpoint import admin as task_admin
from a2a_endpoint import models, store, types
from a2a_endpoint.admin import counting, timeline
from a2a_endpoint.execution import runtime
from a2a_endpoint.lifecycle import TaskState
from a2a_endpoint.store import StoredEvent
from a2a_endpoint.testing import user_message
from tests.test_admin import (
    CHANGELIST,
    change_url,
    create_task,
    finish_task,
    listed_ids,
    messages_of,
    state_of,
    wait_for,
)
from tests.test_admin_push import CREDENTIALS, TOKEN, webhook

COMPLETED, WORKING = TaskState.COMPLETED.value, TaskState.WORKING.value
ON_POSTGRES = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="PostgreSQL keeps the counts"
)


def cancel_url(task_id: str) -> str:
    return reverse("admin:a2a_endpoint_task_cancel", args=[task_id])


def task_for(owner: str, tenant: str = "", text: str = "hello") -> str:
    record = runtime.get_store().create_task(
        owner=owner,
        tenant=tenant,
        context_id=str(uuid.uuid4()),
        message=msgspec.convert(user_message(text), types.Message),
    )
    return record.id


def state_choices(response) -> dict[str, str]:
    """The state filter's choices: state value → its label with the count."""
    spec = next(
        s for s in response.context["cl"].filter_specs if s.parameter_name.startswith("state")
    )
    return dict(spec.lookup_choices)


def agent_says(text: str) -> types.Message:
    return types.Message(
        message_id=str(uuid.uuid4()), role=types.Role.AGENT, parts=[types.Part(text=text)]
    )


@pytest.fixture
def counts_not_kept():
    """The database as SQLite or a database built without migrations has it: no kept counts."""
    found = dict(store.counts._counts_found)
    name = str(connection.settings_dict["NAME"])
    store.counts._counts_found[(connection.alias, name)] = False
    store.counts._counts_found[(connection.alias, name, store.TASK_STATE_COUNT_TABLE)] = False
    yield
    store.counts._counts_found.clear()
    store.counts._counts_found.update(found)


# --- the list: filters and counts ---------------------------------------------------------


@pytest.mark.django_db
class TestListFilters:
    def test_owner_tenant_and_state_filters(self, admin_client):
        alice, alice_acme, bob = task_for("alice"), task_for("alice", "acme"), task_for("bob")
        finish_task(bob)

        def listed(**query: str) -> set[str]:
            response = admin_client.get(CHANGELIST, query)
            assert response.status_code == 200
            return listed_ids(response)

        assert listed() == {alice, alice_acme, bob}
        assert listed(owner__exact="alice") == {alice, alice_acme}
        assert listed(owner__exact=" alice ") == {alice, alice_acme}  # as typed, trimmed
        assert listed(owner__exact="alice", tenant__exact="acme") == {alice_acme}
        assert listed(tenant__exact="acme") == {alice_acme}
        assert listed(state__exact=COMPLETED) == {bob}
        assert listed(owner__exact="bob", state__exact=COMPLETED) == {bob}
        assert listed(owner__exact="alice", state__exact=COMPLETED) == set()
        assert listed(owner__exact="", tenant__exact="") == {alice, alice_acme, bob}  # blank

    def test_the_owner_input_suggests_owners_and_each_row_links_its_owner(self, admin_client):
        task_for("alice")
        task_for("bob & co")
        page = admin_client.get(CHANGELIST).content.decode()
        assert '<datalist id="owner__exact-suggestions">' in page
        assert '<option value="alice">' in page
        assert '<option value="bob &amp; co">' in page
        assert 'href="?owner__exact=bob+%26+co"' in page  # the row's owner filters the list

    def test_counts_without_kept_counts(self, admin_client, counts_not_kept):
        # SQLite's way (and a database built without migrations): GROUP BY and COUNT.
        task_for("alice")
        finish_task(task_for("bob"))
        response = admin_client.get(CHANGELIST)
        assert state_choices(response)[COMPLETED] == "Completed (1)"
        assert response.context["cl"].paginator.label == "2 tasks"
        assert '<option value="bob">' in response.content.decode()


@pytest.mark.django_db
class TestStateCounts:
    def test_counts_are_right_after_creates_finishes_and_cancels(self, admin_client):
        tasks = [task_for("alice") for _ in range(4)]
        finish_task(tasks[0])
        admin_client.post(cancel_url(tasks[1]))

        response = admin_client.get(CHANGELIST)
        choices = state_choices(response)
        assert choices[TaskState.SUBMITTED.value] == "Submitted (2)"
        assert choices[COMPLETED] == "Completed (1)"
        assert choices[TaskState.CANCELED.value] == "Canceled (1)"
        assert choices[WORKING] == "Working (0)"
        assert response.context["cl"].paginator.label == "4 tasks"
        assert "By state (counts: all tasks)" in response.content.decode()
        assert models.Task.objects.count_by_state() == {
            TaskState.SUBMITTED.value: 2,
            COMPLETED: 1,
            TaskState.CANCELED.value: 1,
        }

    def test_an_owner_filter_counts_that_owners_states(self, admin_client):
        finish_task(task_for("alice"))
        task_for("bob")
        response = admin_client.get(CHANGELIST, {"owner__exact": "alice"})
        assert "By state (counts: owner alice)" in response.content.decode()
        assert state_choices(response)[COMPLETED] == "Completed (1)"
        assert state_choices(response)[TaskState.SUBMITTED.value] == "Submitted (0)"
        assert response.context["cl"].paginator.label == "1 task"

    @ON_POSTGRES
    def test_an_owner_of_many_tasks_gets_all_tasks_counts(self, admin_client, monkeypatch):
        monkeypatch.setattr(counting, "OWNER_STATE_COUNT_LIMIT", 1)
        task_for("alice")
        task_for("alice")
        finish_task(task_for("bob"))
        response = admin_client.get(CHANGELIST, {"owner__exact": "alice"})
        assert "By state (counts: all tasks)" in response.content.decode()
        assert state_choices(response)[COMPLETED] == "Completed (1)"  # bob's
        assert response.context["cl"].paginator.label == "2 tasks"  # the kept caller count

    @ON_POSTGRES
    def test_the_kept_counts_follow_every_kind_of_write(self):
        def right() -> bool:
            return store.kept_state_counts() == models.Task.objects.count_by_state()

        ids = [task_for(f"user:{n % 3}") for n in range(6)]
        finish_task(ids[0])
        assert right()
        models.Task.objects.filter(pk__in=ids[1:3]).update(state=TaskState.FAILED.value)
        assert right()
        models.Task.objects.filter(pk=ids[3]).delete()
        assert right()
        now = timezone.now()
        models.Task.objects.bulk_create(
            models.Task(
                owner="bulk",
                context_id="c",
                origin_message_id=f"m{n}",
                state=TaskState.REJECTED.value,
                status_timestamp=now,
            )
            for n in range(25)
        )
        assert right()
        assert store.kept_state_counts()[TaskState.REJECTED.value] == 25

    @ON_POSTGRES
    def test_the_recount_rebuilds_the_state_counts(self):
        finish_task(task_for("alice"))
        task_for("bob")
        with connection.cursor() as cursor:  # what triggers bypassed would leave
            cursor.execute(f"UPDATE {store.TASK_STATE_COUNT_TABLE} SET tasks = tasks + 7")
        assert store.kept_state_counts() != models.Task.objects.count_by_state()
        store.recount_tasks()
        assert store.kept_state_counts() == models.Task.objects.count_by_state()


@ON_POSTGRES
@pytest.mark.django_db(transaction=True)
def test_the_migration_counts_the_states_already_stored():
    """Applied to a table with tasks, 0006 counts their states; unapplied, it leaves no trace."""
    migration = ("a2a_endpoint", "0006_admin_console")
    executor = MigrationExecutor(connection)
    before = sorted(executor.loader.graph.node_map[migration].parents)[0].key
    table, trigger = store.TASK_STATE_COUNT_TABLE, f"{store.TASK_STATE_COUNT_TABLE}_moved"
    try:
        executor.migrate([before])
        with connection.cursor() as cursor:
            cursor.execute("SELECT to_regclass(%s), to_regproc(%s)", [table, trigger])
            assert cursor.fetchone() == (None, None)
        then = executor.loader.project_state([before]).apps.get_model("a2a_endpoint", "Task")
        now = timezone.now()
        then.objects.bulk_create(
            then(
                owner="u",
                context_id="c",
                origin_message_id=f"m{n}",
                status_timestamp=now,
                state=COMPLETED if n % 3 else WORKING,
            )
            for n in range(30)
        )
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes("a2a_endpoint"))
    store.forget_task_counts()
    assert store.kept_state_counts() == {COMPLETED: 20, WORKING: 10}
    task_for("alice")
    assert store.kept_state_counts() == models.Task.objects.count_by_state()


# --- the list's queries --------------------------------------------------------------------


def bulk_tasks(count: int) -> None:
    """``count`` tasks of three owners and two states, inserted in one statement."""
    now = timezone.now()
    models.Task.objects.bulk_create(
        models.Task(
            owner=f"user:{n % 3}",
            tenant="acme" if n % 2 else "",
            context_id=str(uuid.uuid4()),
            origin_message_id=str(uuid.uuid4()),
            state=COMPLETED if n % 4 else WORKING,
            status_timestamp=now - timedelta(seconds=n),
        )
        for n in range(count)
    )


LIST_VIEWS = [
    pytest.param({}, id="unfiltered"),
    pytest.param({"state__exact": COMPLETED}, id="state"),
    pytest.param({"owner__exact": "user:1"}, id="owner"),
    pytest.param({"owner__exact": "user:1", "tenant__exact": "acme"}, id="caller"),
    pytest.param({"owner__exact": "user:1", "state__exact": WORKING}, id="owner-state"),
    pytest.param({"q": "no-such-context"}, id="search"),
]


def list_queries(client, query: dict[str, str]) -> list[str]:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(CHANGELIST, query)
    assert response.status_code == 200
    return [entry["sql"] for entry in queries.captured_queries]


@pytest.mark.django_db
@pytest.mark.parametrize("query", LIST_VIEWS)
def test_list_queries_do_not_grow_with_the_tasks(admin_client, query):
    bulk_tasks(30)
    few = list_queries(admin_client, query)
    bulk_tasks(270)
    assert len(list_queries(admin_client, query)) == len(few)


# COUNT over the task table itself (the kept counts' tables are a2a_endpoint_task_*).
_TASK_COUNT = re.compile(r'COUNT\(.*FROM "a2a_endpoint_task"(?!_)', re.IGNORECASE | re.DOTALL)


@ON_POSTGRES
@pytest.mark.django_db
@pytest.mark.parametrize("query", LIST_VIEWS)
def test_the_list_never_counts_the_whole_task_table(admin_client, query):
    bulk_tasks(50)
    sqls = list_queries(admin_client, query)
    counts = [sql for sql in sqls if _TASK_COUNT.search(sql)]
    if query.keys() <= {"state__exact"}:
        assert counts == []  # read from the kept counts
    for sql in counts:
        # A count that stops at PAGED_ROWS, or one owner's state counts (its index entries;
        # OWNER_STATE_COUNT_LIMIT at most).
        owners = re.search(r'WHERE \(?"a2a_endpoint_task"\."owner" = .* GROUP BY', sql)
        assert owners or f"LIMIT {counting.PAGED_ROWS + 1}" in sql, sql
    assert not [sql for sql in sqls if "DISTINCT" in sql.upper()]


@pytest.mark.django_db
def test_the_list_pages_through_paged_rows_at_most(admin_client, monkeypatch):
    monkeypatch.setattr(counting, "PAGED_ROWS", 6)
    monkeypatch.setattr(task_admin.TaskAdmin, "list_per_page", 2)
    bulk_tasks(10)
    response = admin_client.get(CHANGELIST)
    paginator = response.context["cl"].paginator
    assert (paginator.count, paginator.num_pages) == (10, 3)
    assert (
        paginator.label == "10 tasks; the first 6 are paged: filter or search to reach the others"
    )
    assert admin_client.get(CHANGELIST, {"p": 3}).status_code == 200
    assert admin_client.get(CHANGELIST, {"p": 4}).url.endswith("?e=1")  # past them
    searched = admin_client.get(CHANGELIST, {"q": "-"}).context["cl"].paginator  # every id
    assert (searched.exact, searched.label) == (False, "more than 6 tasks")


@pytest.mark.django_db
def test_search_by_a_whole_task_or_context_id(admin_client):
    wanted = task_for("alice")
    context = str(models.Task.objects.get(pk=wanted).context_id)
    task_for("alice")
    for term in (wanted, wanted.upper(), context, context.upper()):
        assert listed_ids(admin_client.get(CHANGELIST, {"q": term})) == {wanted}


# --- a task's page: the timeline -------------------------------------------------------


def played_task(steps: int) -> tuple[str, list[tuple[str, int]]]:
    """A task played through the store, and its timeline as (source, number), oldest first."""
    store_ = runtime.get_store()
    task_id = task_for("alice", text="start")
    order = [("message", 0), ("event", 1)]
    for step in range(steps):
        store_.update_status(task_id, TaskState.WORKING, agent_says(f"step {step}"))
        order += [("message", step + 1), ("event", step + 2)]
    chunk = types.Artifact(artifact_id="a", name="report", parts=[types.Part(text="last")])
    store_.add_artifact(task_id, chunk, append=False, last_chunk=True)
    order.append(("event", steps + 2))
    return task_id, order


def shown(response) -> list[tuple[str, int]]:
    return [(entry.source, entry.number) for entry in response.context["timeline"].entries]


@pytest.mark.django_db
class TestTimeline:
    def test_history_and_events_in_one_order_a_page_at_a_time(self, admin_client):
        task_id, order = played_task(60)  # 123 entries: three pages of 50
        newest = admin_client.get(change_url(task_id))
        assert shown(newest) == order[-50:]
        page = newest.context["timeline"]
        assert (page.first, page.last, page.total) == (74, 123, 123)
        assert not page.newer

        pages, response = [shown(newest)], newest
        while response.context["timeline"].older:
            older = response.context["timeline"].older
            response = admin_client.get(change_url(task_id), {"timeline": older})
            pages.insert(0, shown(response))
        assert [len(p) for p in pages] == [23, 50, 50]
        assert [entry for p in pages for entry in p] == order  # each once, in order

        # From the oldest page forwards, the same pages.
        oldest = admin_client.get(change_url(task_id), {"timeline": page.oldest})
        assert shown(oldest) == order[:50]
        newer = oldest.context["timeline"].newer
        assert shown(admin_client.get(change_url(task_id), {"timeline": newer})) == order[50:100]

    def test_entries_say_what_happened(self, admin_client):
        task_id, _ = played_task(1)
        entries = admin_client.get(change_url(task_id)).context["timeline"].entries
        summaries = [(e.source, e.kind, e.state, e.summary) for e in entries]
        assert summaries == [
            ("message", "user", "", "start"),
            ("event", "task", "Submitted", "created, Submitted: start"),
            ("message", "agent", "", "step 0"),
            ("event", "statusUpdate", "Working", "→ Working: step 0"),
            ("event", "artifactUpdate", "Working", "report (last chunk): last"),
        ]

    @pytest.mark.parametrize("boundary", ["nonsense", "before.x.1", "after.-1.0", "before.1"])
    def test_a_bad_page_parameter_shows_the_newest_page(self, admin_client, boundary):
        task_id, order = played_task(2)
        response = admin_client.get(change_url(task_id), {"timeline": boundary})
        assert response.status_code == 200
        assert shown(response) == order

    def test_payloads_are_collapsed_and_long_ones_cut(self, admin_client):
        task_id = task_for("alice")
        long_text = "x" * (timeline.PAYLOAD_CHARS + 500)
        chunk = types.Artifact(artifact_id="big", parts=[types.Part(text=long_text)])
        runtime.get_store().add_artifact(task_id, chunk, append=False, last_chunk=True)
        response = admin_client.get(change_url(task_id))
        page = response.content.decode()
        details = re.findall(r"<details[^>]*data-testid=\"timeline-payload\"[^>]*>", page)
        assert len(details) == 3  # one per entry, none open
        assert not [tag for tag in details if " open" in tag]
        assert long_text not in page  # cut, in the payload and in the artifacts section
        chunk_entry = response.context["timeline"].entries[-1]
        assert len(chunk_entry.payload) == timeline.PAYLOAD_CHARS + 1
        assert chunk_entry.payload.endswith("…")
        assert chunk_entry.payload_chars > len(long_text)

    def test_artifacts_assembled_once_each(self, admin_client):
        task_id = task_for("alice")
        for text, append, last in (("Hello, ", False, False), ("world", True, True)):
            chunk = types.Artifact(artifact_id="greeting", parts=[types.Part(text=text)])
            runtime.get_store().add_artifact(task_id, chunk, append=append, last_chunk=last)
        artifacts = admin_client.get(change_url(task_id)).context["artifacts"]
        assert [(a.artifact_id, a.text, a.complete) for a in artifacts] == [
            ("greeting", "Hello, \nworld", True)
        ]


def bulk_history(task_id: str, events: int) -> None:
    """``events`` more events and as many history messages, inserted in two statements."""
    task = models.Task.objects.get(pk=task_id)
    update = {"statusUpdate": {"status": {"state": WORKING}}}
    models.TaskEvent.objects.bulk_create(
        models.TaskEvent(
            task=task, seq=task.seq + n + 1, kind="statusUpdate", state=WORKING, payload=update
        )
        for n in range(events)
    )
    models.Message.objects.bulk_create(
        models.Message(
            task=task,
            position=task.history_size + n,
            message_id=f"m{n}",
            role="ROLE_AGENT",
            payload=user_message(f"m{n}"),
        )
        for n in range(events)
    )
    models.Task.objects.filter(pk=task_id).update(
        seq=task.seq + events, history_size=task.history_size + events
    )


@pytest.mark.django_db
def test_page_queries_do_not_grow_with_the_events(admin_client):
    def page_queries(task_id: str, **query: str) -> int:
        with CaptureQueriesContext(connection) as queries:
            response = admin_client.get(change_url(task_id), query)
        assert response.status_code == 200
        assert len(response.context["timeline"].entries) <= timeline.PAGE_SIZE
        return len(queries)

    short, long = task_for("alice"), task_for("alice")
    bulk_history(short, 30)
    bulk_history(long, 3000)
    assert page_queries(long) == page_queries(short)
    older = admin_client.get(change_url(long)).context["timeline"].older
    assert page_queries(long, timeline=older) == page_queries(short)


# --- a task's page: Cancel task ------------------------------------------------------------


def listen_for_cancel(task_id: str) -> tuple[threading.Thread, threading.Event, list]:
    """A subscriber of the task's events on the in-memory bus, in a thread of its own."""
    ready, seen = threading.Event(), []

    async def listen() -> None:
        loop = asyncio.get_running_loop()
        async with runtime.get_event_bus().subscribe(task_id) as events:
            ready.set()
            deadline = loop.time() + 10
            while (event := await events.get_until(deadline)) is not None:
                seen.append(event)
                if event.state is TaskState.CANCELED:
                    return

    thread = threading.Thread(target=asyncio.run, args=(listen(),), daemon=True)
    thread.start()
    return thread, ready, seen


@pytest.mark.django_db(transaction=True)
def test_cancel_button_cancels_a_working_task_through_the_service(admin_client, settings):
    # No forced stop within the test: the job must end by itself when it is canceled.
    settings.A2A_ENDPOINT = {**settings.A2A_ENDPOINT, "CANCEL_GRACE_PERIOD": 60}
    task_id = create_task("wait 30")
    backend = runtime.get_backend()
    backend.submit(task_id)
    wait_for(lambda: state_of(task_id) == WORKING)
    page = admin_client.get(change_url(task_id)).content.decode()
    assert f'action="{cancel_url(task_id)}"' in page
    listener, ready, seen = listen_for_cancel(task_id)
    assert ready.wait(5)

    response = admin_client.post(cancel_url(task_id), follow=True)

    assert response.redirect_chain == [(change_url(task_id), 302)]
    assert messages_of(response) == [(message_levels.SUCCESS, f"Canceled task {task_id}.")]
    assert state_of(task_id) == TaskState.CANCELED.value
    listener.join(10)
    assert [event.state for event in seen][-1:] == [TaskState.CANCELED]  # streams see it
    canceled: StoredEvent = seen[-1]
    assert canceled.payload["statusUpdate"]["status"]["state"] == TaskState.CANCELED.value
    wait_for(lambda: not backend.running(task_id), timeout=3.0)  # the agent was told
    assert 'data-testid="cancel-task" disabled' in response.content.decode()
    entry = LogEntry.objects.get(object_id=task_id)
    assert entry.get_change_message() == task_admin.tasks.CANCELED_LOG


@pytest.mark.django_db
def test_cancel_button_refuses_a_finished_task(admin_client):
    task_id = create_task()
    finish_task(task_id)
    seq = models.Task.objects.get(pk=task_id).seq
    page = admin_client.get(change_url(task_id)).content.decode()
    assert 'data-testid="cancel-task" disabled' in page
    assert "The task is Completed: a finished task cannot be canceled." in page

    response = admin_client.post(cancel_url(task_id), follow=True)

    assert messages_of(response) == [
        (
            message_levels.WARNING,
            f"Task {task_id} was not canceled: it is completed, and a finished task cannot "
            "be canceled.",
        )
    ]
    finished = models.Task.objects.get(pk=task_id)
    assert (finished.state, finished.seq) == (COMPLETED, seq)


@pytest.mark.django_db
def test_cancel_needs_the_change_permission_and_a_post(client, admin_client, django_user_model):
    viewer = django_user_model.objects.create_user("viewer", password="pw", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_task"))
    client.force_login(viewer)
    task_id = create_task()

    page = client.get(change_url(task_id))
    assert page.status_code == 200
    assert b"cancel-task" not in page.content
    assert client.post(cancel_url(task_id)).status_code == 403
    assert admin_client.get(cancel_url(task_id)).status_code == 405
    assert state_of(task_id) == TaskState.SUBMITTED.value
    missing = admin_client.post(cancel_url(str(uuid.uuid4())), follow=True)
    assert missing.status_code == 200  # the admin's "doesn't exist" redirect, not an error
    assert "doesn\u2019t exist" in str(messages_of(missing))


# --- a task's page: job and secrets --------------------------------------------------------


@pytest.mark.django_db
def test_the_page_shows_the_job_its_worker_and_lease(admin_client):
    task_id = create_task()
    page = admin_client.get(change_url(task_id)).content.decode()
    assert "owed: a worker must claim it by" in page  # handed to the backend, unclaimed
    assert runtime.get_store().claim_job(task_id, "job-7f3a", 30)

    task = models.Task.objects.get(pk=task_id)
    assert task.job_worker == f"{socket.gethostname()}:{os.getpid()}"
    page = admin_client.get(change_url(task_id)).content.decode()
    for text in ("job-7f3a", task.job_worker, "held: expires in", "no job owed"):
        assert text in page
    models.Task.objects.filter(pk=task_id).update(
        lease_expires_at=timezone.now() - timedelta(minutes=2)
    )
    assert "lapsed 120 s ago" in admin_client.get(change_url(task_id)).content.decode()


@pytest.mark.django_db
def test_no_secret_on_the_task_page(admin_client):
    task_id = create_task()
    webhook(task_id)
    finish_task(task_id)
    response = admin_client.get(change_url(task_id))
    page = response.content.decode()
    assert TOKEN not in page
    assert CREDENTIALS not in page
    assert "•••• (14 characters)" in page
