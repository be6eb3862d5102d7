"""The task admin at a million tasks: statements and milliseconds per page.

``python -m bench.admin_queries [--tasks N] [--long-events E] [--repeats R] [--write-tasks W]
[--write-rounds K] [--postgres-url URL] [--database NAME] [--keep] [--reuse]``

Recreates the PostgreSQL database ``bench_admin`` (``--database``), migrates it, and fills it
with ``INSERT … SELECT generate_series``: ``N`` tasks over the last 400 days (40 % of them
one owner's, ``anonymous``, the rest of 997 users; 10 % in tenant ``acme``; 70 % completed,
10 % failed, 8 % canceled, 9.8 % waiting for input, 1.5 % working, 0.5 % submitted, 0.2 %
rejected), each with its first message and event, and one task with ``E`` events and ``E/2``
history messages. Then ``VACUUM ANALYZE``.

Each page is rendered through Django's test client as a superuser (the sample project's
settings, DEBUG off): once counting its statements (and the slowest one), then ``R`` times
timed; the median is reported. Then the write path with and without what the console added
to it (migration 0006's state-count triggers and its two indexes), in interleaved rounds of
``W`` tasks, each created, set WORKING and COMPLETED through the store, and the same three
statements bare through psycopg. ``--reuse`` measures a database a ``--keep`` run left.

Writes ``bench/results/<date>-admin.md``.
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

from bench.push import commit, machine

RESULTS_DIR = Path(__file__).resolve().parent / "results"
LIST = "/admin/a2a_endpoint/task/"
STATES = {
    "completed": "TASK_STATE_COMPLETED",
    "working": "TASK_STATE_WORKING",
    "rejected": "TASK_STATE_REJECTED",
    "input": "TASK_STATE_INPUT_REQUIRED",
}

#: One statement each; %(n)s tasks, %(e)s events of the long task. Row order = time order.
FILL = [
    """INSERT INTO a2a_endpoint_task (id, context_id, owner, tenant, origin_message_id, state,
        status_timestamp, seq, history_size, created_at, updated_at, job_attempts, job_id,
        job_position, handoffs, push_configured, job_worker)
    SELECT gen_random_uuid(), gen_random_uuid()::text,
        CASE WHEN g %% 10 < 4 THEN 'anonymous' ELSE 'user:' || (g %% 997) END,
        CASE WHEN g %% 10 = 9 THEN 'acme' ELSE '' END, 'bench-' || g,
        CASE WHEN g %% 1000 < 700 THEN 'TASK_STATE_COMPLETED'
             WHEN g %% 1000 < 800 THEN 'TASK_STATE_FAILED'
             WHEN g %% 1000 < 880 THEN 'TASK_STATE_CANCELED'
             WHEN g %% 1000 < 978 THEN 'TASK_STATE_INPUT_REQUIRED'
             WHEN g %% 1000 < 993 THEN 'TASK_STATE_WORKING'
             WHEN g %% 1000 < 998 THEN 'TASK_STATE_SUBMITTED'
             ELSE 'TASK_STATE_REJECTED' END,
        ts, 1, 1, ts, ts, 0, '', 0, 0, false, ''
    FROM (SELECT g, now() - (%(n)s - g) * interval '400 days' / %(n)s AS ts
          FROM generate_series(1, %(n)s) g) s""",
    """INSERT INTO a2a_endpoint_message (task_id, position, message_id, role, payload, created_at)
    SELECT id, 0, origin_message_id, 'ROLE_USER', jsonb_build_object('messageId',
        origin_message_id, 'role', 'ROLE_USER', 'parts', jsonb_build_array(jsonb_build_object(
            'text', 'A request of a bench task, a sentence long.'))), created_at
    FROM a2a_endpoint_task""",
    """INSERT INTO a2a_endpoint_taskevent (task_id, seq, kind, state, payload, created_at)
    SELECT id, 1, 'task', 'TASK_STATE_SUBMITTED', jsonb_build_object('task', jsonb_build_object(
        'id', id, 'contextId', context_id, 'status', jsonb_build_object(
            'state', 'TASK_STATE_SUBMITTED'))), created_at
    FROM a2a_endpoint_task""",
    # The long task: events and history interleaved in time, as a long job leaves them.
    """UPDATE a2a_endpoint_task SET seq = %(e)s, history_size = %(e)s / 2 + 1,
        state = 'TASK_STATE_WORKING', status_timestamp = now(), owner = 'user:7'
    WHERE origin_message_id = 'bench-1'""",
    """INSERT INTO a2a_endpoint_taskevent (task_id, seq, kind, state, payload, created_at)
    SELECT t.id, s, 'statusUpdate', 'TASK_STATE_WORKING', jsonb_build_object('statusUpdate',
        jsonb_build_object('taskId', t.id, 'status', jsonb_build_object('state',
            'TASK_STATE_WORKING', 'message', jsonb_build_object('parts', jsonb_build_array(
                jsonb_build_object('text', 'Step ' || s || ': done.')))))),
        t.created_at + s * interval '10 ms'
    FROM a2a_endpoint_task t CROSS JOIN generate_series(2, %(e)s) s
    WHERE t.origin_message_id = 'bench-1'""",
    """INSERT INTO a2a_endpoint_message (task_id, position, message_id, role, payload, created_at)
    SELECT t.id, p, 'long-' || p, 'ROLE_AGENT', jsonb_build_object('messageId', 'long-' || p,
        'role', 'ROLE_AGENT', 'parts', jsonb_build_array(jsonb_build_object(
            'text', 'Progress ' || p))), t.created_at + (2 * p) * interval '10 ms' - interval '1 ms'
    FROM a2a_endpoint_task t CROSS JOIN generate_series(1, %(e)s / 2) p
    WHERE t.origin_message_id = 'bench-1'""",
]


def with_database(url: str, name: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path=f"/{name}"))


def drop(url: str, name: str, *, create: bool) -> str:
    """Drop the database ``name`` (and create it afresh when ``create``); its URL."""
    with psycopg.connect(with_database(url, "postgres"), autocommit=True) as admin:
        database = sql.Identifier(name)
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(database))
        if create:
            admin.execute(sql.SQL("CREATE DATABASE {}").format(database))
    return with_database(url, name)


def setup_django(database_url: str) -> None:
    os.environ.pop("REDIS_URL", None)
    os.environ.update(
        DJANGO_SETTINGS_MODULE="bench.settings",
        DATABASE_URL=database_url,
        DJANGO_DEBUG="0",
        DJANGO_SECRET_KEY="bench-admin-only",
        DJANGO_ALLOWED_HOSTS="testserver",
        A2A_EXECUTION_BACKEND="inline",
    )
    import django

    django.setup()


def fill(url: str, tasks: int, long_events: int) -> dict[str, Any]:
    started = time.perf_counter()
    with psycopg.connect(url) as conn:
        for statement in FILL:
            conn.execute(statement, {"n": tasks, "e": long_events})
            conn.commit()
        conn.autocommit = True
        conn.execute("VACUUM ANALYZE")
        size = conn.execute("SELECT pg_size_pretty(pg_database_size(current_database()))")
        return {"size": size.fetchone()[0], "seconds": time.perf_counter() - started}


def pages(
    tasks: int, long_task: str, some_task: str, context: str
) -> list[tuple[str, str, dict[str, Any]]]:
    """(name, path, query) of each page measured."""
    task_page = f"{LIST}{long_task}/change/"
    deepest = min(100, -(-tasks // 100))  # the list pages through 10,000 tasks at most
    light, heavy = {"owner__exact": "user:7"}, {"owner__exact": "anonymous"}
    week = {
        "created_at__gte": _days_from_today(-7),
        "created_at__lt": _days_from_today(1),
    }
    lists: list[tuple[str, dict[str, Any]]] = [
        ("list, unfiltered", {}),
        ("list, page 2", {"p": 2}),
        (f"list, page {deepest} (the deepest)", {"p": deepest}),
        *((f"list, state {name}", {"state__exact": value}) for name, value in STATES.items()),
        ("list, owner anonymous (40 %)", heavy),
        ("list, owner user:7 (0.06 %)", light),
        ("list, owner user:7 + tenant ''", {**light, "tenant__exact": ""}),
        ("list, owner user:7 + completed", {**light, "state__exact": STATES["completed"]}),
        ("list, owner anonymous + failed", {**heavy, "state__exact": "TASK_STATE_FAILED"}),
        ("list, tenant acme (10 %)", {"tenant__exact": "acme"}),
        ("list, created in the past 7 days", week),
        ("list, search a whole task id", {"q": some_task}),
        ("list, search a whole context id", {"q": context}),
        ("list, search 8 characters of an id", {"q": some_task[:8]}),
    ]
    return [
        *((name, LIST, query) for name, query in lists),
        ("task page, one event", f"{LIST}{some_task}/change/", {}),
        ("task page, long task: newest 50", task_page, {}),
        ("task page, long task: oldest 50", task_page, {"timeline": "after.0.0"}),
        ("task page, long task: middle", task_page, {"timeline": "before.5000.2500"}),
    ]


def _days_from_today(days: int) -> str:
    """Midnight UTC ``days`` from today, as the admin's date filter links write it."""
    day = datetime.date.today() + datetime.timedelta(days=days)
    return datetime.datetime.combine(day, datetime.time(), datetime.UTC).isoformat(sep=" ")


def measure(client: Any, path: str, query: dict[str, Any], repeats: int) -> dict[str, Any]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        response = client.get(path, query)
    assert response.status_code == 200, (path, query, response.status_code)
    statements = captured.captured_queries
    slowest = max(statements, key=lambda entry: float(entry["time"]))
    timings = []
    for _ in range(repeats):
        began = time.perf_counter()
        client.get(path, query)
        timings.append((time.perf_counter() - began) * 1000)
    paginator = getattr(response.context and response.context.get("cl"), "paginator", None)
    return {
        "queries": len(statements),
        "db_ms": sum(float(entry["time"]) for entry in statements) * 1000,
        "ms": statistics.median(timings),
        "slowest_ms": float(slowest["time"]) * 1000,
        "slowest": " ".join(slowest["sql"].split())[:110],
        "count": paginator.label if paginator is not None else "",
    }


_TRIGGERS = ["insert", "delete", "update", "truncate"]
_INDEXES = {
    "a2a_task_created": "(created_at DESC, id DESC)",
    "a2a_task_state_created": "(state, created_at DESC, id DESC)",
}


def _console_parts(cursor: Any, *, triggers: bool, indexes: bool, now: list[bool]) -> None:
    """Migration 0006's triggers and indexes on (as migrated) or off; ``now``: as they are."""
    if triggers != now[0]:
        verb = "ENABLE" if triggers else "DISABLE"
        for event in _TRIGGERS:
            name = f"a2a_endpoint_task_state_count_{event}"
            cursor.execute(f"ALTER TABLE a2a_endpoint_task {verb} TRIGGER {name}")
    if indexes != now[1]:
        for name, columns in _INDEXES.items():
            if indexes:
                cursor.execute(f"CREATE INDEX {name} ON a2a_endpoint_task {columns}")
            else:
                cursor.execute(f"DROP INDEX {name}")
    now[:] = [triggers, indexes]


#: What the write path runs with: (state-count triggers, the two indexes).
WRITE_VARIANTS = {
    "as migrated": (True, True),
    "without the state-count triggers": (False, True),
    "without the two indexes": (True, False),
    "without either": (False, False),
}


#: A task's life in bare statements, run in the database (no client, no driver): its row
#: inserted, its state changed twice, each in a transaction of its own; µs per task.
_LIFE_PROCEDURE = """CREATE OR REPLACE PROCEDURE bench_admin_life(n int) LANGUAGE plpgsql AS $$
DECLARE began timestamptz := clock_timestamp(); tid uuid;
BEGIN
    FOR i IN 1..n LOOP
        tid := gen_random_uuid();
        INSERT INTO a2a_endpoint_task (id, context_id, owner, tenant, origin_message_id, state,
            status_timestamp, seq, history_size, created_at, updated_at, job_attempts, job_id,
            job_position)
        VALUES (tid, 'w', 'user:' || (i % 997), '', tid::text, 'TASK_STATE_SUBMITTED', now(), 1,
            1, now(), now(), 0, '', 0);
        COMMIT;
        UPDATE a2a_endpoint_task SET state = 'TASK_STATE_WORKING', seq = 2,
            status_timestamp = clock_timestamp() WHERE id = tid;
        COMMIT;
        UPDATE a2a_endpoint_task SET state = 'TASK_STATE_COMPLETED', seq = 3,
            status_timestamp = clock_timestamp() WHERE id = tid;
        COMMIT;
    END LOOP;
    RAISE NOTICE '%', extract(epoch FROM clock_timestamp() - began) * 1e6 / n;
END $$"""


def _store_task(writer: Any, name: str, owner: str) -> float:
    """Milliseconds of one task's life through the store (three transactions)."""
    import msgspec

    from a2a_endpoint import types
    from a2a_endpoint.lifecycle import TaskState

    text = {"messageId": name, "role": "ROLE_USER", "parts": [{"text": "hi"}]}
    message = msgspec.convert(text, types.Message)
    began = time.perf_counter()
    record = writer.create_task(owner=owner, tenant="", context_id="w", message=message)
    writer.update_status(record.id, TaskState.WORKING)
    writer.update_status(record.id, TaskState.COMPLETED)
    return (time.perf_counter() - began) * 1000


def _lives_in_database(conn: Any, notices: list[str], tasks: int) -> float:
    """Microseconds per task of ``tasks`` lives run by ``bench_admin_life`` (its notice)."""
    conn.execute("CALL bench_admin_life(%s)", [tasks])
    return float(notices[-1])


def write_cost(url: str, tasks: int, rounds: int) -> dict[str, dict[str, list[float]]]:
    """Per variant of ``WRITE_VARIANTS``: ms per task through the store, and µs per task of
    its bare statements in the database (one figure a round); ``rounds`` rounds each, visited
    in turn (reversed every other round). ``synchronous_commit`` off: what the statements
    cost, not the wait for the disk at each commit (which on this shared machine varies more
    than what is measured)."""
    from django.db import connection

    from a2a_endpoint import store

    writer = store.TaskStore()
    with connection.cursor() as cursor:
        cursor.execute("SET synchronous_commit TO off")
    run = uuid.uuid4().hex[:8]  # names of their own (a reused database has earlier ones)
    samples: dict[str, dict[str, list[float]]] = {
        name: {"store": [], "sql": []} for name in WRITE_VARIANTS
    }
    now = [True, True]
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET synchronous_commit TO off")
        conn.execute(_LIFE_PROCEDURE)
        notices: list[str] = []
        conn.add_notice_handler(lambda notice: notices.append(notice.message_primary))
        for round_ in range(rounds):
            order = list(WRITE_VARIANTS) if round_ % 2 == 0 else list(WRITE_VARIANTS)[::-1]
            for variant in order:
                with connection.cursor() as cursor:
                    triggers, indexes = WRITE_VARIANTS[variant]
                    _console_parts(cursor, triggers=triggers, indexes=indexes, now=now)
                    cursor.execute("CHECKPOINT")
                for n in range(tasks):
                    name, owner = f"w-{run}-{round_}-{variant}-{n}", f"user:{n % 997}"
                    samples[variant]["store"].append(_store_task(writer, name, owner))
                samples[variant]["sql"].append(_lives_in_database(conn, notices, tasks * 5))
        conn.execute("DROP PROCEDURE bench_admin_life(int)")
    with connection.cursor() as cursor:
        _console_parts(cursor, triggers=True, indexes=True, now=now)
    store.recount_tasks()  # rounds without the triggers left the state counts behind
    return samples


def report(args: argparse.Namespace, filled: dict[str, Any], rows: list[Any], writes: Any) -> str:
    lines = [
        f"# The task admin at {args.tasks:,} tasks ({datetime.date.today().isoformat()})",
        "",
        f"`python -m bench.admin_queries --tasks {args.tasks} --long-events {args.long_events} "
        f"--repeats {args.repeats} --write-tasks {args.write_tasks} --write-rounds "
        f"{args.write_rounds}`; commit {commit()}; "
        f"{machine()}. PostgreSQL {filled['server']}, database {filled['size']} after the fill "
        f"({filled['seconds']:.0f} s). Each page rendered through Django's test client as a "
        f"superuser, DEBUG off: statements counted once, then the median of {args.repeats} "
        "timed renders (the whole request: middleware, queries, templates).",
        "",
        "| page | statements | their ms | page ms (median) | slowest statement (ms) "
        "| the list's count |",
        "|---|---:|---:|---:|---|---|",
    ]
    for name, result in rows:
        lines.append(
            f"| {name} | {result['queries']} | {result['db_ms']:.0f} | {result['ms']:.1f} | "
            f"{result['slowest_ms']:.1f}: `{result['slowest']}` | {result['count']} |"
        )
    lines += [
        "",
        f"Write path: {args.write_tasks} tasks a round, {args.write_rounds} rounds of each "
        "variant, interleaved; a task is create_task, WORKING, COMPLETED through the store on "
        "one connection (three transactions, `synchronous_commit` off: the statements' cost, "
        "not the disk's flush at each commit), against the filled table; and, in the database "
        "(a procedure: no client, no driver), 5 times as many lives in bare statements (INSERT "
        "the task, UPDATE its state twice, a commit after each).",
        "",
        "| variant | store: ms per task, median | p90 | in the database: µs per task, each round |",
        "|---|---:|---:|---|",
    ]
    for variant, kinds in writes.items():
        ordered = sorted(kinds["store"])
        store_cells = (
            f"{statistics.median(ordered):.2f} | {ordered[int(len(ordered) * 0.9) - 1]:.2f}"
        )
        rounds = ", ".join(f"{value:.0f}" for value in kinds["sql"])
        lines.append(f"| {variant} | {store_cells} | {rounds} |")
    lines.append("")
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.admin_queries", description=__doc__)
    parser.add_argument("--tasks", type=int, default=1_000_000)
    parser.add_argument("--long-events", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--write-tasks", type=int, default=300, help="tasks a write round")
    parser.add_argument("--write-rounds", type=int, default=3, help="rounds of each variant")
    parser.add_argument(
        "--reuse", action="store_true", help="measure the database a --keep run left, as it is"
    )
    parser.add_argument("--postgres-url", default="postgres://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--database", default="bench_admin")
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.reuse:
        url = with_database(args.postgres_url, args.database)
    else:
        url = drop(args.postgres_url, args.database, create=True)
    setup_django(url)
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.test.utils import setup_test_environment

    from a2a_endpoint import models

    call_command("migrate", verbosity=0)
    if args.reuse:
        filled = {"size": "(reused)", "seconds": 0.0}
    else:
        print(f"Filling {args.database} with {args.tasks:,} tasks…", flush=True)
        filled = fill(url, args.tasks, args.long_events)
    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        filled["server"] = cursor.fetchone()[0].split()[0]
    setup_test_environment()  # responses carry their template context (the list's count)
    client = Client()
    user, _ = get_user_model().objects.get_or_create(
        username="bench", defaults={"is_superuser": True, "is_staff": True}
    )
    client.force_login(user)
    long_task = models.Task.objects.get(origin_message_id="bench-1")
    some = models.Task.objects.get(origin_message_id=f"bench-{args.tasks // 2}")
    measured = pages(args.tasks, str(long_task.pk), str(some.pk), some.context_id)
    for _name, path, query in measured[:1] + measured[-1:]:
        client.get(path, query)  # warm: what a process looks up once (kept counts, types)
    rows = []
    for name, path, query in measured:
        rows.append((name, measure(client, path, query, args.repeats)))
        result = rows[-1][1]
        print(f"{name:48} {result['queries']:3} statements {result['ms']:8.1f} ms", flush=True)
    writes = write_cost(url, args.write_tasks, args.write_rounds)
    text = report(args, filled, rows, writes)
    print(text)
    RESULTS_DIR.mkdir(exist_ok=True)
    (RESULTS_DIR / f"{datetime.date.today().isoformat()}-admin.md").write_text(text)
    connection.close()
    if not args.keep:
        drop(args.postgres_url, args.database, create=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
