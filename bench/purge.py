"""The retention purge on a million tasks: ``python -m bench.purge``.

``python -m bench.purge [--tasks N] [--batch-size B] [--pause S] [--writers W] [--rate R]
[--baseline S] [--postgres-url URL] [--database NAME] [--keep]``

Recreates the PostgreSQL database ``bench_purge`` (``--database``), migrates it, and fills it
with ``INSERT … SELECT generate_series``: ``N`` tasks of 1,000 callers, written in the order
they happened (over the last 400 days, the oldest first, as a live table grows), 88 % of them
terminal (completed, failed, canceled, rejected), 4 % submitted or working, 8 % waiting for
input; each with 2 history messages and 3 events, every other one with an artifact, and 1 %
with a push config and 3 delivered deliveries. Then ``VACUUM ANALYZE``.

Writer processes (``W``, their total pace ``R`` SendMessage-like writes a second) each do what
a SendMessage and its agent's end do to the database, through the store: ``create_task`` (the
task, its first message and event #1 in one transaction: "insert") and ``update_status`` to
COMPLETED ("complete"), for random callers among the same 1,000. First for ``--baseline``
seconds alone, then while this process purges every terminal task older than 30 days
(``store.purge_expired``, batches of ``B``, ``S`` seconds apart). Reports tasks deleted,
total time, tasks/s, batches and their durations (a batch's duration is how long its row locks
are held: the longest is the longest lock), the writers' p50 / p99 / max latency with and
without the purge, and whether the kept task counts are right afterwards. The report is
appended to ``bench/results/<date>-purge.md``.
"""

from __future__ import annotations

import argparse
import datetime
import multiprocessing
import os
import random
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

from bench.push import commit, machine, percentile

RESULTS_DIR = Path(__file__).resolve().parent / "results"
OWNERS = 1000
#: Terminal tasks older than this go.
AGE_DAYS = 30
HISTORY_DAYS = 400

#: One statement each; %(n)s is the number of tasks. Row order = time order (g = 1 oldest).
FILL = [
    """INSERT INTO a2a_endpoint_task (id, context_id, owner, tenant, origin_message_id, state,
        status_timestamp, seq, history_size, created_at, updated_at, job_attempts, job_id,
        job_position, handoffs, push_configured)
    SELECT gen_random_uuid(), 'ctx-' || (g %% 50000), 'user:' || (g %% 1000), '',
        'bench-' || g,
        CASE WHEN g %% 100 < 60 THEN 'TASK_STATE_COMPLETED'
             WHEN g %% 100 < 72 THEN 'TASK_STATE_FAILED'
             WHEN g %% 100 < 80 THEN 'TASK_STATE_CANCELED'
             WHEN g %% 100 < 88 THEN 'TASK_STATE_REJECTED'
             WHEN g %% 100 < 90 THEN 'TASK_STATE_WORKING'
             WHEN g %% 100 < 92 THEN 'TASK_STATE_SUBMITTED'
             ELSE 'TASK_STATE_INPUT_REQUIRED' END,
        ts, 3, 2, ts, ts, 1, 'job-' || g, 2, 0, g %% 100 = 7
    FROM (SELECT g, now() - (%(n)s - g) * interval '400 days' / %(n)s AS ts
          FROM generate_series(1, %(n)s) g) s""",
    """INSERT INTO a2a_endpoint_message (task_id, position, message_id, role, payload, created_at)
    SELECT t.id, p, t.origin_message_id || '-' || p,
        CASE p WHEN 0 THEN 'ROLE_USER' ELSE 'ROLE_AGENT' END,
        jsonb_build_object('messageId', t.origin_message_id || '-' || p,
            'role', CASE p WHEN 0 THEN 'ROLE_USER' ELSE 'ROLE_AGENT' END,
            'parts', jsonb_build_array(jsonb_build_object(
                'text', 'Message ' || p || ' of a bench task: a sentence or two of text.'))),
        t.created_at
    FROM a2a_endpoint_task t CROSS JOIN generate_series(0, 1) p""",
    """INSERT INTO a2a_endpoint_taskevent (task_id, seq, kind, state, payload, created_at)
    SELECT t.id, e, CASE e WHEN 1 THEN 'task' ELSE 'statusUpdate' END,
        CASE e WHEN 3 THEN t.state ELSE 'TASK_STATE_WORKING' END,
        jsonb_build_object('statusUpdate', jsonb_build_object('taskId', t.id,
            'contextId', t.context_id, 'status', jsonb_build_object(
                'state', t.state, 'timestamp', t.status_timestamp))),
        t.created_at
    FROM a2a_endpoint_task t CROSS JOIN generate_series(1, 3) e""",
    """INSERT INTO a2a_endpoint_artifact (task_id, position, artifact_id, name, description,
        parts, extensions, complete, attempt, created_at, updated_at)
    SELECT t.id, 0, 'a0', 'report', '',
        jsonb_build_array(jsonb_build_object('text', repeat('artifact text ', 20))),
        '[]', true, 1, t.created_at, t.created_at
    FROM a2a_endpoint_task t WHERE right(t.origin_message_id, 1) IN ('0', '2', '4', '6', '8')""",
    """INSERT INTO a2a_endpoint_pushnotificationconfig (task_id, config_id, url, token,
        auth_scheme, auth_credentials, created_at, updated_at)
    SELECT t.id, 'hook', 'https://hooks.example.com/a2a', 'tok', 'Bearer', 'secret',
        t.created_at, t.created_at
    FROM a2a_endpoint_task t WHERE t.push_configured""",
    """INSERT INTO a2a_endpoint_pushdelivery (config_id, task_id, seq, state, attempts,
        next_attempt_at, give_up_at, last_status, last_error, created_at, delivered_at)
    SELECT c.id, c.task_id, e, 'delivered', 1, c.created_at, c.created_at + interval '1 day',
        200, '', c.created_at, c.created_at
    FROM a2a_endpoint_pushnotificationconfig c CROSS JOIN generate_series(1, 3) e""",
]
TABLES = ["task", "message", "taskevent", "artifact", "pushnotificationconfig", "pushdelivery"]


def with_database(url: str, name: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path=f"/{name}"))


def admin_connection(url: str) -> psycopg.Connection:
    return psycopg.connect(with_database(url, "postgres"), autocommit=True)


def drop(admin: psycopg.Connection, name: str) -> None:
    admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def copy(admin: psycopg.Connection, source: str, target: str) -> None:
    drop(admin, target)
    query = sql.SQL("CREATE DATABASE {} TEMPLATE {}")
    admin.execute(query.format(sql.Identifier(target), sql.Identifier(source)))


def template_of(url: str, name: str, tasks: int) -> tuple[str, float | None]:
    """The template database holding a fill of ``tasks`` tasks, and how long that fill took
    (None: there is none yet)."""
    template = f"{name}_template_{tasks}"
    with admin_connection(url) as admin:
        row = admin.execute(
            "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s",
            [template],
        ).fetchone()
    seconds = None
    if row and row[0] and row[0].startswith("filled in "):
        seconds = float(row[0].removeprefix("filled in ").removesuffix(" s"))
    return template, seconds


def prepare(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """The bench database, filled: copied from the template of an earlier fill of as many
    tasks (unless ``--refill``), else filled now and kept as that template."""
    url = with_database(args.postgres_url, args.database)
    template, seconds = template_of(args.postgres_url, args.database, args.tasks)
    if seconds is not None and not args.refill:
        with admin_connection(args.postgres_url) as admin:
            copy(admin, template, args.database)
        setup_django(url)
        migrate()
        return url, {**stats(url), "seconds": seconds, "copied": template}
    with admin_connection(args.postgres_url) as admin:
        drop(admin, args.database)
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(args.database)))
    setup_django(url)
    migrate()
    print(f"filling {args.database} with {args.tasks:,} tasks ...", flush=True)
    started = time.perf_counter()
    fill(url, args.tasks)
    seconds = time.perf_counter() - started
    from django.db import connections

    connections.close_all()  # a template must have no connection
    with admin_connection(args.postgres_url) as admin:
        copy(admin, args.database, template)
        comment = sql.SQL("COMMENT ON DATABASE {} IS {}")
        admin.execute(comment.format(sql.Identifier(template), f"filled in {seconds:.1f} s"))
    return url, {**stats(url), "seconds": seconds, "copied": None}


def migrate() -> None:
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def setup_django(database_url: str) -> None:
    os.environ.pop("REDIS_URL", None)
    os.environ.update(
        DJANGO_SETTINGS_MODULE="bench.settings",
        DATABASE_URL=database_url,
        DJANGO_DEBUG="0",  # no query log: it would be part of what is measured
        DJANGO_SECRET_KEY="bench-purge-only",
        A2A_EXECUTION_BACKEND="inline",
    )
    import django

    django.setup()


def fill(url: str, tasks: int) -> None:
    with psycopg.connect(url) as conn:
        for statement in FILL:
            conn.execute(statement, {"n": tasks})
            conn.commit()
        conn.autocommit = True
        conn.execute("VACUUM ANALYZE")


def stats(url: str) -> dict[str, Any]:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = {
            table: conn.execute(f"SELECT count(*) FROM a2a_endpoint_{table}").fetchone()[0]
            for table in TABLES
        }
        size = conn.execute("SELECT pg_size_pretty(pg_database_size(current_database()))")
        return {"rows": rows, "size": size.fetchone()[0]}


# --- the writers ----------------------------------------------------------------------------


def writer(
    database_url: str, rate: float, slot_wanted: int | None, ready: Any, stop: Any, results: Any
) -> None:
    """A process writing like SendMessage and its agent's end, ``rate`` times a second, until
    ``stop``; puts (end time, insert seconds, complete seconds) of each write on ``results``.
    With ``slot_wanted``, it reconnects until its backend writes that kept-count slot."""
    setup_django(database_url)
    import msgspec
    from django.db import connection

    from a2a_endpoint import types
    from a2a_endpoint.lifecycle import TaskState
    from a2a_endpoint.store import TaskStore

    store = TaskStore()
    for _ in range(1000):
        with connection.cursor() as cursor:  # the slot of the kept counts it writes
            cursor.execute("SELECT pg_backend_pid() % 16")
            slot = cursor.fetchone()[0]
        if slot_wanted is None or slot == slot_wanted:
            break
        connection.close()
    rng = random.Random(os.getpid())
    samples: list[tuple[float, float, float]] = []
    ready.set()
    start, n = time.monotonic(), 0
    while not stop.is_set():
        text = {"messageId": f"w-{os.getpid()}-{n}", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
        message = msgspec.convert(text, types.Message)
        owner = f"user:{rng.randrange(OWNERS)}"
        began = time.monotonic()
        record = store.create_task(owner=owner, tenant="", context_id="ctx-w", message=message)
        inserted = time.monotonic()
        store.update_status(record.id, TaskState.COMPLETED)
        ended = time.monotonic()
        samples.append((ended, inserted - began, ended - inserted))
        n += 1
        time.sleep(max(0.0, start + n / rate - time.monotonic()))  # keep the pace, not flat out
    results.put((slot, samples))


def run_writers(
    url: str, count: int, rate: float, during: Any, collide: int | None = None
) -> tuple[list[Any], Any]:
    """Start ``count`` writers (the first one on kept-count slot ``collide``, if given), call
    ``during()`` once they all wrote, stop them; their samples and what ``during`` returned."""
    context = multiprocessing.get_context("spawn")
    stop, results = context.Event(), context.Queue()
    readies = [context.Event() for _ in range(count)]
    processes = [
        context.Process(
            target=writer,
            args=(url, rate / count, collide if n == 0 else None, ready, stop, results),
        )
        for n, ready in enumerate(readies)
    ]
    for process in processes:
        process.start()
    for ready in readies:
        ready.wait(60)
    time.sleep(1.0)  # warm: connections open, first statements prepared
    outcome = during()
    stop.set()
    slots, samples = [], []
    for _ in processes:
        slot, found = results.get(timeout=60)
        slots.append(slot)
        samples += [(*sample, slot) for sample in found]
    for process in processes:
        process.join(30)
    if isinstance(outcome, dict):
        outcome["writer_slots"] = sorted(slots)
    return samples, outcome


def latencies(
    samples: list[Any], start: float, end: float, which: int, slot: int | None = None
) -> dict[str, Any]:
    """n, p50, p99 and max (ms) of the writes that ended between ``start`` and ``end`` (of
    the writers on kept-count ``slot`` only, if given)."""
    values = [
        sample[which] * 1000
        for sample in samples
        if start <= sample[0] <= end and slot in (None, sample[3])
    ]
    return {
        "n": len(values),
        "p50": percentile(values, 50),
        "p99": percentile(values, 99),
        "max": max(values) if values else None,
    }


# --- the purge ------------------------------------------------------------------------------


def purge(batch_size: int, pause: float) -> dict[str, Any]:
    from django.db import connection
    from django.utils import timezone

    from a2a_endpoint import store
    from a2a_endpoint.lifecycle import TERMINAL_STATES

    policy = dict.fromkeys(TERMINAL_STATES, datetime.timedelta(days=AGE_DAYS))
    # One "now" for the counts and the purge: tasks crossing the age during the run are the
    # next purge's.
    now = timezone.now()
    expected = sum(deletable for deletable, _ in store.count_expired(policy, now=now).values())
    batches: list[float] = []
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    start = time.monotonic()
    result = store.purge_expired(
        policy,
        batch_size=batch_size,
        pause=pause,
        now=now,
        progress=lambda b: batches.append(b.seconds),
    )
    end = time.monotonic()
    left = sum(deletable for deletable, _ in store.count_expired(policy, now=now).values())
    return {
        "expected": expected,
        "result": result,
        "batches": batches,
        "start": start,
        "end": end,
        "left": left,
        "slot": pid % 16,
        "wrong_counts": store.wrong_task_counts(),
    }


def purge_slot() -> int:
    """The kept-count slot this process's connection (the purge's) writes."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid() % 16")
        return cursor.fetchone()[0]


# --- the report -----------------------------------------------------------------------------


def ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} ms"


def latency_rows(base: dict[str, Any], during: dict[str, Any]) -> list[tuple[str, str]]:
    rows = []
    for label in during:
        for name, figures in (("alone", base), ("during the purge", during)):
            f = figures.get(label)
            if f is not None:
                figure = f"{f['n']:,}: {ms(f['p50'])} / {ms(f['p99'])} / {ms(f['max'])}"
                rows.append((f"{label} latency {name} (n, p50 / p99 / max)", figure))
    return rows


def report(
    args: argparse.Namespace, filled: dict[str, Any], base: Any, during: Any, run: Any
) -> str:
    result = run["result"]
    batch_ms = [seconds * 1000 for seconds in run["batches"]]
    rows = [
        ("tasks in the table", f"{filled['rows']['task']:,} ({filled['size']} database)"),
        (
            "fill (INSERT … SELECT, VACUUM ANALYZE)",
            f"{filled['seconds']:.1f} s"
            + (f" (this run: a copy of {filled['copied']})" if filled["copied"] else ""),
        ),
        ("tasks deleted", f"{result.total:,} (expected {run['expected']:,}; left {run['left']})"),
        ("total time", f"{result.seconds:.1f} s"),
        ("tasks/s", f"{result.total / result.seconds:,.0f}"),
        ("batches", f"{result.batches:,} of {args.batch_size}, pause {args.pause:g} s"),
        (
            "batch (lock) p50 / p99 / longest",
            " / ".join(
                ms(v) for v in (percentile(batch_ms, 50), percentile(batch_ms, 99), max(batch_ms))
            ),
        ),
        ("kept counts wrong afterwards", str(len(run["wrong_counts"]))),
    ]
    rows += latency_rows(base, during)
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"### {when}: {args.tasks:,} tasks, batches of {args.batch_size}",
        "",
        f"`python -m bench.purge {' '.join(sys.argv[1:])}` on {commit()}; {machine()}. "
        f"{args.writers} writer processes, {args.rate:g} writes/s in all. Kept counts: the "
        f"purge's backend writes slot {run['slot']}, the writers' slots "
        f"{', '.join(map(str, run['writer_slots']))} (a writer sharing the purge's slot waits "
        "for a batch's commit when it writes for a caller of that batch).",
        "",
        "| figure | value |",
        "|---|---|",
        *(f"| {name} | {value} |" for name, value in rows),
        "",
    ]
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.purge", description=__doc__)
    parser.add_argument("--tasks", type=int, default=1_000_000)
    parser.add_argument("--batch-size", type=int, default=200)
    parser.add_argument("--pause", type=float, default=0.0, help="seconds between batches")
    parser.add_argument("--writers", type=int, default=2, help="writer processes")
    parser.add_argument("--rate", type=float, default=40.0, help="writes/s of all writers")
    parser.add_argument("--baseline", type=float, default=20.0, help="seconds of writes alone")
    parser.add_argument("--postgres-url", default="postgres://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--database", default="bench_purge")
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards")
    parser.add_argument(
        "--collide",
        action="store_true",
        help="the first writer shares the purge's kept-count slot (the worst case)",
    )
    parser.add_argument(
        "--refill", action="store_true", help="fill again even if a template of the fill exists"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    url, filled = prepare(args)
    print(f"{args.database}: {filled}", flush=True)

    def alone() -> tuple[float, float]:
        start = time.monotonic()
        time.sleep(args.baseline)
        return start, time.monotonic()

    samples, (start, end) = run_writers(url, args.writers, args.rate, alone)
    base = {
        label: latencies(samples, start, end, i) for label, i in (("insert", 1), ("complete", 2))
    }
    print(f"writes alone: {base}", flush=True)
    collide = purge_slot() if args.collide else None
    samples, run = run_writers(
        url, args.writers, args.rate, lambda: purge(args.batch_size, args.pause), collide
    )
    during = {
        label: latencies(samples, run["start"], run["end"], i)
        for label, i in (("insert", 1), ("complete", 2))
    }
    if run["slot"] in run["writer_slots"]:  # a writer shares the purge's slot: its own figures
        during |= {
            f"{label} (the writer on the purge's slot)": latencies(
                samples, run["start"], run["end"], i, slot=run["slot"]
            )
            for label, i in (("insert", 1), ("complete", 2))
        }
    section = report(args, filled, base, during, run)
    print(section)
    path = RESULTS_DIR / f"{datetime.date.today().isoformat()}-purge.md"
    header = "" if path.exists() else "# The retention purge (`python -m bench.purge`)\n"
    with path.open("a") as out:
        out.write(header + "\n" + section)
    if not args.keep:
        from django.db import connections

        connections.close_all()
        with admin_connection(args.postgres_url) as admin:
            drop(admin, args.database)
    return 0 if not run["wrong_counts"] and run["left"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
