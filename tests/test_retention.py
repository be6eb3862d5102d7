"""The retention purge (store/retention.py) on PostgreSQL: what goes (expired tasks with every
row of theirs), what stays exactly as it was, the kept task counts, bounded batches, a
database failing midway, and writers running beside it."""

from __future__ import annotations

import grp
import os
import pwd
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterable
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from django.db import connection, connections, transaction
from django.db.models import Count
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from a2a_endpoint import models, store, types
from a2a_endpoint.lifecycle import TaskState
from a2a_endpoint.store import TaskStore, retention
from a2a_endpoint.testing import jsonrpc_request, user_message
from tests.service.builders import DEADLINE, a2a_settings, stored_task

REPO_ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="the purge is measured on PostgreSQL"
)

DAY = timedelta(days=1)
#: Completed and failed tasks go after 30 days; nothing else is named.
POLICY = {TaskState.COMPLETED: 30 * DAY, TaskState.FAILED: 30 * DAY}
CHILD_MODELS = (
    models.Message,
    models.Artifact,
    models.TaskEvent,
    models.PushNotificationConfig,
    models.PushDelivery,
)


def aged(days: float, **fields: Any) -> str:
    """A task (two history messages, an artifact) last changed ``days`` ago."""
    fields.setdefault("history", 2)
    fields.setdefault("artifacts", ["report"])
    return stored_task(status_timestamp=timezone.now() - days * DAY, **fields)


def webhook(task_id: str, *delivery_states: str) -> None:
    """A push config of the task, with a delivery of event 1, 2 ... in each state given."""
    models.Task.objects.filter(pk=task_id).update(push_configured=True)
    config = models.PushNotificationConfig.objects.create(
        task_id=task_id, config_id="hook", url="https://hooks.example.com/a"
    )
    now = timezone.now()
    for seq, state in enumerate(delivery_states, start=1):
        models.PushDelivery.objects.create(
            config=config,
            task_id=task_id,
            seq=seq,
            state=state,
            next_attempt_at=now,
            give_up_at=now + DAY,
            created_at=now,
        )


def snapshot(task_ids: Iterable[str]) -> dict[str, list[tuple[Any, ...]]]:
    """Every column of every row of these tasks, in every table."""
    ids = list(task_ids)
    rows = {"task": list(models.Task.objects.filter(pk__in=ids).order_by("pk").values_list())}
    for model in CHILD_MODELS:
        found = model.objects.filter(task_id__in=ids).order_by("pk").values_list()
        rows[model._meta.model_name] = list(found)
    return rows


def left_of(task_ids: Iterable[str]) -> dict[str, int]:
    """How many rows of these tasks are left in each table (tables with none left out)."""
    counts = {name: len(rows) for name, rows in snapshot(task_ids).items()}
    return {name: count for name, count in counts.items() if count}


def total_size(owner: str, tenant: str = "") -> int:
    return TaskStore().list_tasks(owner, tenant, types.ListTasksRequest(page_size=5)).total_size


def assert_counts_right() -> None:
    """The counts kept by triggers per caller (ListTasks' totalSize) and per state (the
    admin's list) match the rows."""
    assert store.wrong_task_counts() == []
    by_state = models.Task.objects.values_list("state").annotate(n=Count("pk"))
    assert store.kept_state_counts() == dict(by_state.order_by())
    counted = models.Task.objects.values_list("owner", "tenant").distinct()
    for owner, tenant in counted:
        expected = models.Task.objects.filter(owner=owner, tenant=tenant).count()
        assert total_size(owner, tenant) == expected, (owner, tenant)


@pytest.fixture
def population(db) -> dict[str, list[str]]:
    """Two callers' tasks: some past their state's age in POLICY, the rest not."""
    expired = [
        aged(40, owner="alice"),
        aged(31, owner="alice", state=TaskState.FAILED, history=4, artifacts=["a", "b"]),
        aged(365, owner="bob", tenant="acme"),
        aged(45, owner="bob"),
    ]
    webhook(expired[0], "delivered", "delivered", "dead")  # nothing owed any more
    kept = [
        aged(29, owner="alice"),  # young
        aged(1, owner="bob", tenant="acme"),
        aged(90, owner="alice", state=TaskState.WORKING),  # active: never
        aged(90, owner="bob", state=TaskState.SUBMITTED),
        aged(90, owner="alice", state=TaskState.CANCELED),  # not named in POLICY
        aged(90, owner="bob", state=TaskState.INPUT_REQUIRED),
    ]
    webhook(kept[0], "delivered", "pending")
    return {"expired": expired, "kept": kept}


def test_expired_tasks_go_with_every_row_of_theirs(population):
    expired, kept = population["expired"], population["kept"]
    assert set(left_of(expired)) == {"task", *(m._meta.model_name for m in CHILD_MODELS)}
    before = snapshot(kept)
    result = store.purge_expired(POLICY)
    assert left_of(expired) == {}
    assert snapshot(kept) == before  # every other row exactly as it was, of both callers
    assert result.deleted == {TaskState.COMPLETED: 3, TaskState.FAILED: 1}
    assert result.total == 4
    assert result.batches == 2  # one per state (default batch size)


def test_kept_task_counts_and_total_size_are_right_afterwards(population):
    assert (total_size("alice"), total_size("bob"), total_size("bob", "acme")) == (5, 3, 2)
    store.purge_expired(POLICY)
    assert_counts_right()
    assert (total_size("alice"), total_size("bob"), total_size("bob", "acme")) == (3, 2, 1)


def test_a_second_purge_finds_nothing(population):
    store.purge_expired(POLICY)
    again = store.purge_expired(POLICY)
    assert (again.total, again.batches) == (0, 0)


def test_dry_run_counts_and_deletes_nothing(population):
    everything = population["expired"] + population["kept"]
    before = snapshot(everything)
    counts = store.count_expired({**POLICY, TaskState.CANCELED: 60 * DAY})
    assert counts == {
        TaskState.COMPLETED: (3, 0),
        TaskState.FAILED: (1, 0),
        TaskState.CANCELED: (1, 0),
    }
    assert snapshot(everything) == before


def test_owed_push_deliveries_keep_the_task_until_delivered_or_dead(db):
    owed = aged(60)
    webhook(owed, "delivered", "pending")
    assert store.count_expired(POLICY)[TaskState.COMPLETED] == (0, 1)
    assert store.purge_expired(POLICY).total == 0
    assert "task" in left_of([owed])
    models.PushDelivery.objects.filter(task_id=owed, state="pending").update(state="dead")
    assert store.purge_expired(POLICY).total == 1
    assert left_of([owed]) == {}  # the dead letter went with it


def test_a_task_whose_job_still_holds_its_lease_is_kept(db):
    leased = aged(60, state=TaskState.CANCELED)
    lapsed = aged(60, state=TaskState.CANCELED)
    now = timezone.now()
    models.Task.objects.filter(pk=leased).update(lease_expires_at=now + timedelta(minutes=1))
    models.Task.objects.filter(pk=lapsed).update(lease_expires_at=now - timedelta(minutes=1))
    result = store.purge_expired({TaskState.CANCELED: DAY})
    assert result.total == 1
    assert [str(pk) for pk in models.Task.objects.values_list("pk", flat=True)] == [leased]


def test_interrupted_tasks_go_only_when_named(db):
    waiting = aged(10, state=TaskState.INPUT_REQUIRED)
    assert store.purge_expired(store.retention_policy({"*": 1})).total == 0
    assert store.purge_expired(store.retention_policy({"input_required": "7d"})).total == 1
    assert left_of([waiting]) == {}


def test_a_task_that_changed_between_select_and_delete_is_kept(db, monkeypatch):
    """The DELETE repeats the expiry test: a task moved on after the batch was selected
    (through this transaction here; where rows are not locked, by anyone) stays whole."""
    tasks = [aged(40 + n) for n in range(3)]
    select = retention._select
    changed = tasks[1]

    def select_then_change(cursor, *args):
        rows = select(cursor, *args)
        models.Task.objects.filter(pk=changed).update(status_timestamp=timezone.now())
        return rows

    monkeypatch.setattr(retention, "_select", select_then_change)
    result = store.purge_expired(POLICY)
    assert result.total == 2
    assert set(left_of([changed])) == {"task", "message", "artifact", "taskevent"}
    assert left_of([tasks[0], tasks[2]]) == {}


# --- batches: short transactions, each committed on its own -------------------------------


class Statements:
    """Every statement run on this thread's connection, with its parameters."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, tuple[Any, ...]]] = []

    def __call__(self, execute, sql, params, many, context):
        self.seen.append((sql, tuple(params or ())))
        return execute(sql, params, many, context)

    def starting(self, prefix: str) -> list[tuple[str, tuple[Any, ...]]]:
        return [(sql, params) for sql, params in self.seen if sql.startswith(prefix)]


def remaining_elsewhere() -> int:
    """The number of task rows, read on another connection (only committed rows)."""
    found: list[int] = []

    def count() -> None:
        try:
            found.append(models.Task.objects.count())
        finally:
            connections.close_all()

    reader = threading.Thread(target=count)
    reader.start()
    reader.join(DEADLINE)
    return found[0]


@pytest.mark.django_db(transaction=True)
def test_ten_expired_tasks_in_batches_of_three_are_four_short_transactions(monkeypatch):
    for n in range(10):
        aged(40 + n)
    commits = []
    wrapper = connections["default"]
    commit = wrapper.commit
    monkeypatch.setattr(wrapper, "commit", lambda: (commits.append(1), commit())[1])
    seen_elsewhere = []
    statements = Statements()
    with connection.execute_wrapper(statements):
        result = store.purge_expired(
            {TaskState.COMPLETED: 30 * DAY},  # one state: each state is one scan of its own
            batch_size=3,
            progress=lambda batch: seen_elsewhere.append(remaining_elsewhere()),
        )
    assert (result.total, result.batches, len(commits)) == (10, 4, 4)
    # Each batch was committed before the next began: another connection saw it go.
    assert seen_elsewhere == [7, 4, 1, 0]
    selects = statements.starting("SELECT id, status_timestamp")
    assert all(sql.endswith("LIMIT %s FOR UPDATE SKIP LOCKED") for sql, _ in selects)
    assert [params[-1] for _, params in selects] == [3, 3, 3, 3]
    deletes = statements.starting('DELETE FROM "a2a_endpoint_task"')
    assert [sql.count("%s") - 4 for sql, _ in deletes] == [3, 3, 3, 1]  # ids per DELETE
    # Per batch: the tasks, then their deliveries, configs, events, artifacts, messages.
    assert len(statements.starting("DELETE")) == 4 * 6
    assert [model.objects.count() for model in (models.Task, *CHILD_MODELS)] == [0] * 6
    assert_counts_right()


@pytest.mark.django_db(transaction=True)
def test_a_database_failure_rolls_back_the_batch_whole_and_a_rerun_continues():
    tasks = [aged(100 - n, owner=f"user:{n % 2}") for n in range(10)]  # tasks[0] oldest
    for task_id in tasks:
        webhook(task_id, "delivered")
    batch_two = tasks[3:6]
    before = snapshot(batch_two + tasks[6:])
    # The database refuses the middle task's artifacts: events of batch two, and the
    # artifacts of tasks[3], were deleted in that transaction before it failed.
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE FUNCTION a2a_test_refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            f"IF OLD.task_id = '{tasks[4]}' THEN RAISE EXCEPTION 'disk failure (test)'; "
            "END IF; RETURN OLD; END $$"
        )
        cursor.execute(
            "CREATE TRIGGER a2a_test_refuse BEFORE DELETE ON a2a_endpoint_artifact "
            "FOR EACH ROW EXECUTE FUNCTION a2a_test_refuse()"
        )
    try:
        with pytest.raises(store.PurgeError, match="disk failure") as failed:
            store.purge_expired(POLICY, batch_size=3)
        assert (failed.value.result.total, failed.value.result.batches) == (3, 1)
        assert left_of(tasks[:3]) == {}
        assert snapshot(batch_two + tasks[6:]) == before  # nothing half-deleted
        assert_counts_right()
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TRIGGER a2a_test_refuse ON a2a_endpoint_artifact")
            cursor.execute("DROP FUNCTION a2a_test_refuse()")
    rerun = store.purge_expired(POLICY, batch_size=3)
    assert rerun.total == 7
    assert left_of(tasks) == {}
    assert_counts_right()


def test_a_policy_naming_an_active_state_is_refused(db):
    working = aged(400, state=TaskState.WORKING)
    with pytest.raises(store.RetentionError, match="working tasks are never deleted"):
        store.purge_expired({TaskState.COMPLETED: DAY, TaskState.WORKING: DAY})
    assert "task" in left_of([working])


def test_the_pause_comes_between_batches(db, monkeypatch):
    for n in range(7):
        aged(40 + n)
    pauses: list[float] = []
    clock = SimpleNamespace(perf_counter=time.perf_counter, sleep=pauses.append)
    monkeypatch.setattr(retention, "time", clock)
    with a2a_settings(RETENTION_BATCH_PAUSE=0.25):
        result = store.purge_expired({TaskState.COMPLETED: DAY}, batch_size=3)
    assert result.batches == 3
    assert pauses == [0.25, 0.25]


def test_a_model_of_the_project_referencing_tasks_is_named_before_anything_goes(db, monkeypatch):
    """Its rows would fail every batch at the commit (the purge deletes only its own)."""
    old = aged(40)
    own = list(models.Task._meta.related_objects)
    invoice = SimpleNamespace(
        related_model=type("Invoice", (), {"_meta": SimpleNamespace(label="billing.Invoice")}),
        field=SimpleNamespace(name="task", db_constraint=True),
    )
    monkeypatch.setattr(models.Task._meta, "related_objects", [*own, invoice])
    with pytest.raises(store.RetentionError, match=r"referenced by billing\.Invoice\.task"):
        store.purge_expired(POLICY)
    assert "task" in left_of([old])


def test_a_purge_inside_a_transaction_is_refused(db):
    aged(40)
    with pytest.raises(RuntimeError, match="durable"), transaction.atomic():
        store.purge_expired(POLICY)


# --- writers beside the purge ---------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_task_a_writer_holds_is_passed_over_not_waited_for():
    held, free = aged(40), aged(41)
    locked, release = threading.Event(), threading.Event()

    def writer() -> None:
        try:
            with transaction.atomic():
                models.Task.objects.select_for_update().filter(pk=held).exists()
                locked.set()
                release.wait(DEADLINE)  # held until the purge is done (or the deadline)
        finally:
            connections.close_all()

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        assert locked.wait(DEADLINE)
        started = time.monotonic()
        result = store.purge_expired(POLICY)
        waited = time.monotonic() - started
    finally:
        release.set()
        thread.join(DEADLINE)
    assert waited < DEADLINE / 2  # it did not wait for the writer's commit
    assert result.total == 1
    assert set(left_of([held])) >= {"task", "message", "taskevent"}
    assert left_of([free]) == {}
    assert store.purge_expired(POLICY).total == 1  # the next purge takes it


class Senders:
    """Threads sending blocking SendMessages (echo) through the endpoint once ``go`` is set;
    ``half_sent`` is set when half of them have answered."""

    def __init__(self, threads: int, sends_each: int) -> None:
        self.total = threads * sends_each
        self.sends_each = sends_each
        self.go, self.half_sent = threading.Event(), threading.Event()
        self.answers: list[tuple[int, dict[str, Any]]] = []
        self.failures: list[BaseException] = []
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.send, args=(n,)) for n in range(threads)]

    def send(self, n: int) -> None:
        client = Client(headers={"A2A-Version": "1.0"})
        try:
            assert self.go.wait(DEADLINE)
            for k in range(self.sends_each):
                body = jsonrpc_request("SendMessage", {"message": user_message(f"echo {n}.{k}")})
                response = client.post("/a2a/", body, content_type="application/json")
                with self.lock:
                    self.answers.append((response.status_code, response.json()))
                    if len(self.answers) * 2 >= self.total:
                        self.half_sent.set()
        except BaseException as exc:  # asserted empty by the test
            self.failures.append(exc)
        finally:
            connections.close_all()

    def sent(self) -> int:
        with self.lock:
            return len(self.answers)


@pytest.mark.django_db(transaction=True)
def test_sends_beside_a_purge_all_succeed_and_their_tasks_stay():
    """SendMessages through the endpoint, from threads, between the purge's batches of the
    same caller's expired tasks: every send answers its completed task, which stays."""
    expired = [aged(40 + n, history=1, artifacts=[]) for n in range(40)]
    senders = Senders(threads=6, sends_each=5)
    sent_at_batch: list[int] = []

    def progress(batch: store.PurgeBatch) -> None:
        # Between two batches (no transaction open): the sends run now, the purge goes on.
        if not senders.go.is_set():
            senders.go.set()
            assert senders.half_sent.wait(DEADLINE)
        sent_at_batch.append(senders.sent())

    for thread in senders.threads:
        thread.start()
    try:
        result = store.purge_expired(POLICY, batch_size=5, progress=progress)
    finally:
        senders.go.set()
        for thread in senders.threads:
            thread.join(DEADLINE)
    assert senders.failures == []
    assert result.total == 40
    assert len(sent_at_batch) == 8
    # The sends began once the first batch committed, and seven batches ran after half of
    # them had answered: they ran while it purged.
    assert sent_at_batch[0] >= senders.total // 2
    assert [status for status, _ in senders.answers] == [200] * senders.total
    tasks = [answer["result"]["task"] for _, answer in senders.answers]
    assert {task["status"]["state"] for task in tasks} == {"TASK_STATE_COMPLETED"}
    assert models.Task.objects.filter(pk__in=[task["id"] for task in tasks]).count() == 30
    assert left_of(expired) == {}
    assert_counts_right()


# --- the Celery beat task -------------------------------------------------------------------


def test_the_beat_task_purges_with_retention(db):
    from a2a_endpoint.execution.celery_backend import purge_expired_tasks

    old, young = aged(40), aged(1)
    with a2a_settings(RETENTION={"completed": "30d"}):
        assert purge_expired_tasks() == {"TASK_STATE_COMPLETED": 1}
    assert left_of([old]) == {}
    assert "task" in left_of([young])


def test_without_retention_the_beat_task_touches_nothing(db):
    from a2a_endpoint.execution.celery_backend import purge_expired_tasks

    old = aged(4000)
    with CaptureQueriesContext(connection) as queries:
        assert purge_expired_tasks() == {}
    assert len(queries) == 0
    assert "task" in left_of([old])


def test_the_sample_project_schedules_it_hourly():
    import project

    project.celery_app.loader.import_default_modules()
    entries = project.celery_app.conf.beat_schedule.values()
    purges = [entry for entry in entries if entry["task"] == "a2a_endpoint.purge_expired_tasks"]
    assert len(purges) == 1
    assert purges[0]["schedule"] == 3600.0
    assert "a2a_endpoint.purge_expired_tasks" in project.celery_app.tasks
    assert purges[0]["options"]["expires"] < purges[0]["schedule"]


def redis_url_or_skip() -> str:
    import redis

    url = os.environ.get("A2A_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
    try:
        with redis.Redis.from_url(url, socket_connect_timeout=2) as client:
            client.ping()
    except redis.RedisError as exc:
        if os.environ.get("A2A_REQUIRE_SERVICES") == "1":
            pytest.fail(f"Redis is not reachable at {url}: {exc}")
        pytest.skip(f"Redis is not reachable at {url}: {exc}")
    return url


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_a_celery_worker_runs_the_scheduled_purge(tmp_path):
    """What beat sends (the task by name), run by a worker of the sample project configured
    from the environment (A2A_RETENTION_DAYS) on this test's database."""
    pytest.importorskip("celery")
    from tests.integration.servers import delete_redis_keys
    from tests.integration.topology import JOB_QUEUE, CeleryWorker, celery_client, topology_env

    redis_url = redis_url_or_skip()
    old, young = aged(3, owner="alice"), aged(0.5, owner="bob")
    database = connection.settings_dict
    url = f"postgres://{database['USER']}@{database['HOST']}:{database['PORT']}/{database['NAME']}"
    prefix = f"a2a-retention-{uuid.uuid4().hex[:12]}"
    env = topology_env(url, redis_url, prefix, A2A_RETENTION_DAYS="2")
    try:
        with CeleryWorker("w-purge", env=env, log_dir=tmp_path) as worker:
            with celery_client(redis_url, prefix) as app:
                app.send_task("a2a_endpoint.purge_expired_tasks", queue=JOB_QUEUE)
            deadline = time.monotonic() + 3 * DEADLINE
            while not worker.logged("Purged 1 expired task(s)"):
                assert time.monotonic() < deadline, worker.log_text()
                time.sleep(0.05)
    finally:
        delete_redis_keys(redis_url, prefix)
    assert left_of([old]) == {}
    assert "task" in left_of([young])
    assert_counts_right()


def test_the_beat_unit_and_procfile_run_one_project_beat(tmp_path):
    from tests.test_deploy_config import exec_start, procfile, read_unit

    unit = read_unit("a2a-celery-beat.service")
    command = exec_start(unit)
    assert command[:4] == ["celery", "-A", "project", "beat"]
    schedule = command[command.index("--schedule") + 1]
    assert schedule.startswith(f"/var/lib/{unit['Service']['StateDirectory']}/")
    assert procfile()["beat"][:4] == ["celery", "-A", "project", "beat"]
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed")
    text = (REPO_ROOT / "deploy/systemd/a2a-celery-beat.service").read_text()
    text = text.replace("/srv/a2a-endpoint/.venv/bin", str(Path(sys.executable).parent))
    text = text.replace("/srv/a2a-endpoint", str(REPO_ROOT))
    env_file = tmp_path / "env"
    env_file.write_text("A2A_RETENTION_DAYS=30\n")
    text = text.replace("/etc/a2a-endpoint/env", str(env_file))
    user, group = pwd.getpwuid(os.getuid()).pw_name, grp.getgrgid(os.getgid()).gr_name
    text = text.replace("User=a2a", f"User={user}").replace("Group=a2a", f"Group={group}")
    path = tmp_path / "a2a-celery-beat.service"
    path.write_text(text)
    verified = subprocess.run(
        [analyze, "verify", "--man=no", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert verified.returncode == 0, verified.stderr
    assert [line for line in verified.stderr.splitlines() if str(tmp_path) in line] == []
