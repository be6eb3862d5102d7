"""The scenarios: what each sends, how each answer is validated, and what each reports.

Each ``run_*`` takes a started server and the run's options and returns a plain dict
(JSON-serialisable) of figures, with raw latencies under ``latencies`` for the plots.
Server CPU is the utime+stime delta (/proc/<pid>/stat) of the server's processes over the
measured window, divided by the requests measured in it.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import time
import uuid
from dataclasses import dataclass
from typing import Any

import psycopg

from bench.loadgen import Connection, ResponseError, Sample, closed_loop, rpc_body
from bench.servers import Target, rss_bytes

TERMINAL = {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED"}
PENDING = ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
STATES = {
    "TASK_STATE_SUBMITTED",
    "TASK_STATE_WORKING",
    "TASK_STATE_INPUT_REQUIRED",
    *TERMINAL,
}
PAGE_SIZE = 20
HISTORY_LENGTH = 1
DRAIN_TIMEOUT = 300.0
FANOUT_OPEN_CONCURRENCY = 64
FANOUT_DEADLINE = 60.0


@dataclass
class Options:
    duration: float = 10.0
    warmup: float = 1.0
    connections: int = 16
    prepared_tasks: int = 100
    fanout_sizes: tuple[int, ...] = (100, 1000)
    scale_levels: tuple[int, ...] = (10_000, 100_000, 1_000_000)
    scale_duration: float = 5.0


def target_connection(target: Target) -> Connection:
    """A connection to ``target`` sending its headers (a token server's ``Authorization``)."""
    return Connection("127.0.0.1", target.port, target.headers)


def message(text: str, **fields: Any) -> dict[str, Any]:
    return {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"text": text}],
        **fields,
    }


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def summary(sample: Sample, server_cpu: float, helper_cpu: float | None = None) -> dict[str, Any]:
    """Throughput, latency percentiles (ms), errors and CPU per request of a load run."""
    count = len(sample.latencies)
    result = {
        "requests": count,
        "errors": sample.errors,
        "error_examples": sample.error_examples,
        "rps": count / sample.elapsed,
        "p50_ms": _ms(percentile(sample.latencies, 50)),
        "p90_ms": _ms(percentile(sample.latencies, 90)),
        "p99_ms": _ms(percentile(sample.latencies, 99)),
        "mean_ms": _ms(statistics.fmean(sample.latencies)) if count else None,
        "server_cpu_ms_per_req": 1000 * server_cpu / count if count else None,
        "server_cpu_util": server_cpu / sample.elapsed,
        "client_cpu_util": sample.client_cpu / sample.elapsed,
        "latencies": sample.latencies,
        **sample.extra,
    }
    if helper_cpu is not None:
        result["worker_cpu_ms_per_req"] = 1000 * helper_cpu / count if count else None
    return result


def _ms(value: float | None) -> float | None:
    return None if value is None else value * 1000


async def _measured(target: Target, operation: Any, connections: int, options: Options) -> dict:
    """closed_loop with the server's CPU read at the start and end of the measured window."""
    marks: dict[str, tuple[float, float]] = {}

    def read() -> tuple[float, float]:
        web = target.cpu(helpers=False)
        return web, target.cpu() - web

    async def mark_start() -> None:
        await asyncio.sleep(options.warmup)
        marks["start"] = read()

    marker = asyncio.ensure_future(mark_start())
    sample = await closed_loop(
        "127.0.0.1",
        target.port,
        operation,
        connections=connections,
        duration=options.duration,
        warmup=options.warmup,
        headers=target.headers,
    )
    await marker
    end = read()
    web_cpu = end[0] - marks["start"][0]
    # A pool process that exits in the window takes its ticks along: never below zero.
    helper_cpu = max(0.0, end[1] - marks["start"][1]) if target.helpers else None
    return summary(sample, web_cpu, helper_cpu)


# --- preparation ----------------------------------------------------------------------------


async def send_blocking_echo(conn: Connection, text: str = "echo bench") -> dict[str, Any]:
    """A blocking SendMessage of an echo job; the completed Task, validated."""
    result = (await conn.post(rpc_body("SendMessage", {"message": message(text)}))).rpc_result()
    task = result.get("task")
    if not task or task.get("status", {}).get("state") != "TASK_STATE_COMPLETED":
        raise ResponseError(f"blocking echo did not complete: {str(result)[:300]}")
    parts = task.get("artifacts", [{}])[0].get("parts", [{}])
    if parts[0].get("text") != text:
        raise ResponseError(f"echo artifact is not the text sent: {str(task)[:300]}")
    return task


async def prepare_tasks(target: Target, count: int) -> list[str]:
    """``count`` completed echo tasks to read back (fake ids for the ceiling)."""
    if target.kind == "ceiling":
        return [str(uuid.uuid4()) for _ in range(count)]
    conn = target_connection(target)
    try:
        return [(await send_blocking_echo(conn))["id"] for _ in range(count)]
    finally:
        conn.close()


# --- request/response scenarios -------------------------------------------------------------


async def run_get_task(target: Target, options: Options, task_ids: list[str]) -> dict:
    ceiling = target.kind == "ceiling"

    async def get_task(conn: Connection, state: dict[str, Any]) -> None:
        task_id = random.choice(task_ids)
        body = rpc_body("GetTask", {"id": task_id, "historyLength": HISTORY_LENGTH})
        task = (await conn.post(body)).rpc_result()
        if ceiling:
            return
        if task.get("id") != task_id or task.get("status", {}).get("state") not in STATES:
            raise ResponseError(f"GetTask answered another task: {str(task)[:300]}")
        if len(task.get("history", [])) > HISTORY_LENGTH:
            raise ResponseError("historyLength not applied")

    return await _measured(target, get_task, options.connections, options)


async def run_list_tasks(target: Target, options: Options) -> dict:
    """Page 1, then the page its nextPageToken names, then page 1 again, ..."""

    async def list_tasks(conn: Connection, state: dict[str, Any]) -> None:
        params: dict[str, Any] = {"pageSize": PAGE_SIZE}
        if state.get("token"):
            params["pageToken"] = state["token"]
        page = (await conn.post(rpc_body("ListTasks", params))).rpc_result()
        tasks = page.get("tasks")
        if not isinstance(tasks, list) or not 0 < len(tasks) <= PAGE_SIZE:
            raise ResponseError(f"ListTasks page has no tasks: {str(page)[:300]}")
        if any(task.get("status", {}).get("state") not in STATES for task in tasks):
            raise ResponseError("ListTasks returned a task without a valid state")
        state["token"] = None if state.get("token") else page.get("nextPageToken")

    return await _measured(target, list_tasks, options.connections, options)


async def pending_count(target: Target) -> int:
    """Tasks still submitted or working (ListTasks status filter, totalSize).

    A new connection per poll: a kept-alive one may have been closed by the server while the
    load ran (uvicorn drops idle connections after 5 s).
    """
    total = 0
    conn = target_connection(target)
    try:
        for status in PENDING:
            body = rpc_body("ListTasks", {"status": status, "pageSize": 1})
            total += int((await conn.post(body)).rpc_result().get("totalSize", 0))
    finally:
        conn.close()
    return total


async def run_send_nonblocking(target: Target, options: Options) -> dict:
    """SendMessage returnImmediately at full speed, then how long the job backlog takes."""
    created = 0

    async def send(conn: Connection, state: dict[str, Any]) -> None:
        nonlocal created
        params = {"message": message("echo bench"), "configuration": {"returnImmediately": True}}
        result = (await conn.post(rpc_body("SendMessage", params))).rpc_result()
        task = result.get("task")
        if not task or not task.get("id") or task.get("status", {}).get("state") not in STATES:
            raise ResponseError(f"SendMessage did not return a task: {str(result)[:300]}")
        created += 1

    before = await pending_count(target)
    result = await _measured(target, send, options.connections, options)
    load_end = time.perf_counter()
    backlog = await pending_count(target)
    deadline = load_end + DRAIN_TIMEOUT
    drained: float | None = None
    while time.perf_counter() < deadline:
        if await pending_count(target) <= before:
            drained = time.perf_counter() - load_end
            break
        await asyncio.sleep(0.05)  # a poll interval, bounded by DRAIN_TIMEOUT
    result |= {"created": created, "backlog_at_end": backlog - before, "drain_s": drained}
    return result


async def run_send_blocking(target: Target, options: Options) -> dict:
    """One client: blocking SendMessage of an echo job, answered with the completed task."""

    async def send(conn: Connection, state: dict[str, Any]) -> None:
        await send_blocking_echo(conn, f"echo {uuid.uuid4().hex[:8]}")

    return await _measured(target, send, 1, options)


async def run_stream(target: Target, options: Options) -> dict:
    """One client: SendStreamingMessage of an echo job; time to first and to final event."""
    firsts: list[float] = []

    async def stream(conn: Connection, state: dict[str, Any]) -> None:
        began = time.time()
        body = rpc_body("SendStreamingMessage", {"message": message("echo stream")})
        first = None
        final = None
        async for arrived, event in conn.stream(body):
            first = first if first is not None else arrived - began
            status = (event.get("statusUpdate") or event.get("task") or {}).get("status", {})
            if status.get("state") == "TASK_STATE_COMPLETED":
                final = arrived - began
        if first is None or final is None:
            raise ResponseError("the stream did not end with TASK_STATE_COMPLETED")
        firsts.append(first)

    result = await _measured(target, stream, 1, options)
    result["first_event_p50_ms"] = _ms(percentile(firsts, 50))
    result["first_event_p99_ms"] = _ms(percentile(firsts, 99))
    result["first_event_latencies"] = firsts
    return result


# --- fan-out --------------------------------------------------------------------------------


def _tick_time(event: dict[str, Any]) -> float | None:
    """The agent's write time carried by a ``tick <unix time>`` status update, if it is one."""
    status = (event.get("statusUpdate") or {}).get("status") or {}
    parts = (status.get("message") or {}).get("parts") or [{}]
    text = parts[0].get("text", "")
    return float(text.split()[1]) if text.startswith("tick ") else None


async def _held_task(target: Target) -> str:
    conn = target_connection(target)
    try:
        result = (
            await conn.post(rpc_body("SendMessage", {"message": message("hold")}))
        ).rpc_result()
    finally:
        conn.close()
    task = result.get("task") or {}
    if task.get("status", {}).get("state") != "TASK_STATE_INPUT_REQUIRED":
        raise ResponseError(f"hold did not park the task: {str(result)[:300]}")
    return task["id"]


async def run_fanout(target: Target, streams: int) -> dict:
    """``streams`` SubscribeToTask streams on one task; one update; when each one got it."""
    task_id = await _held_task(target)
    opened = 0
    all_open = asyncio.Event()
    done = asyncio.Event()
    delivered: list[float] = []  # agent write → arrival (wall clock, same machine)
    after_send: list[float] = []  # continuation SendMessage sent → arrival
    errors: list[str] = []
    sent_at: dict[str, float] = {}
    gate = asyncio.Semaphore(FANOUT_OPEN_CONCURRENCY)
    body = rpc_body("SubscribeToTask", {"id": task_id})

    async def subscriber() -> None:
        nonlocal opened
        conn = target_connection(target)
        events = conn.stream(body)
        try:
            async with gate:
                arrived, first = await anext(events)
            if (first.get("task") or {}).get("id") != task_id:
                raise ResponseError(f"first event is not the task snapshot: {str(first)[:200]}")
            opened += 1
            if opened == streams:
                all_open.set()
            async for arrived, event in events:
                written = _tick_time(event)
                if written is not None:
                    delivered.append(arrived - written)
                    after_send.append(arrived - sent_at["t"])
                    if len(delivered) == streams:
                        done.set()
                    break
            await done.wait()  # stay connected until every stream has its update
        except (ResponseError, OSError, asyncio.IncompleteReadError, StopAsyncIteration) as exc:
            errors.append(f"{type(exc).__name__}: {exc}"[:200])
            if opened + len(errors) >= streams:
                all_open.set()
        finally:
            await events.aclose()

    await asyncio.sleep(0.5)  # let the server settle before the memory baseline
    rss_before = rss_bytes(target.pid)
    began = time.perf_counter()
    tasks = [asyncio.ensure_future(subscriber()) for _ in range(streams)]
    try:
        await asyncio.wait_for(all_open.wait(), FANOUT_DEADLINE)
        open_s = time.perf_counter() - began
        await asyncio.sleep(0.5)  # every snapshot was read: the server is idle again
        rss_open = rss_bytes(target.pid)
        conn = target_connection(target)
        try:
            sent_at["t"] = time.time()
            params = {
                "message": message("hold", taskId=task_id),
                "configuration": {"returnImmediately": True},
            }
            (await conn.post(rpc_body("SendMessage", params))).rpc_result()
        finally:
            conn.close()
        try:
            await asyncio.wait_for(done.wait(), FANOUT_DEADLINE)
        except TimeoutError:
            errors.append(f"only {len(delivered)} of {streams} streams got the update")
    finally:
        done.set()
        await asyncio.gather(*tasks, return_exceptions=True)
    return {
        "streams": streams,
        "opened": opened,
        "open_s": open_s,
        "errors": len(errors),
        "error_examples": errors[:3],
        "delivered": len(delivered),
        "delivery_p50_ms": _ms(percentile(delivered, 50)),
        "delivery_p99_ms": _ms(percentile(delivered, 99)),
        "delivery_max_ms": _ms(max(delivered)) if delivered else None,
        "send_to_all_ms": _ms(max(after_send)) if after_send else None,
        "rss_before": rss_before,
        "rss_open": rss_open,
        "rss_per_stream_kib": (rss_open - rss_before) / max(opened, 1) / 1024,
        "latencies": delivered,
    }


# --- scale ----------------------------------------------------------------------------------

BULK_TASKS = """
INSERT INTO a2a_endpoint_task
    (id, context_id, owner, tenant, origin_message_id, job_id, job_position, job_attempts,
     state, status_timestamp, seq, history_size, created_at, updated_at)
SELECT gen_random_uuid(), 'ctx-' || (n %% 100),
       CASE WHEN n %% 4 = 0 THEN 'user:' || (n %% 50) ELSE 'anonymous' END, '', 'bulk-' || n,
       '', 0, 0,
       CASE WHEN n %% 3 = 0 THEN 'TASK_STATE_WORKING' ELSE 'TASK_STATE_COMPLETED' END,
       now() - interval '1 day' - n * interval '1 second', 1, 0, now(), now()
FROM generate_series(%s::bigint, %s::bigint) AS n
"""


def grow_tasks(database_url: str, level: int) -> tuple[int, float]:
    """Bulk-insert rows until the task table holds ``level`` rows; (rows, seconds taken)."""
    began = time.perf_counter()
    with psycopg.connect(database_url, autocommit=True) as conn:
        count = conn.execute("SELECT count(*) FROM a2a_endpoint_task").fetchone()[0]
        first = conn.execute(
            "SELECT count(*) FROM a2a_endpoint_task WHERE origin_message_id LIKE 'bulk-%'"
        ).fetchone()[0]
        if level > count:
            conn.execute(BULK_TASKS, [first + 1, first + level - count])
            conn.execute("VACUUM ANALYZE a2a_endpoint_task")
        count = conn.execute("SELECT count(*) FROM a2a_endpoint_task").fetchone()[0]
    return count, time.perf_counter() - began


def sample_bulk_ids(database_url: str, count: int) -> list[str]:
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT id::text FROM a2a_endpoint_task TABLESAMPLE SYSTEM (1) "
            "WHERE owner = 'anonymous' LIMIT %s",
            [count],
        ).fetchall()
    return [row[0] for row in rows]


async def run_scale_level(target: Target, options: Options, task_ids: list[str]) -> dict:
    """One client: GetTask and ListTasks (page 1 and 2) latency at the table's current size."""
    latency = Options(
        duration=options.scale_duration, warmup=min(options.warmup, 0.5), connections=1
    )
    ids = task_ids + sample_bulk_ids(target.database_url, len(task_ids))
    get = await run_get_task(target, latency, ids)
    listing = await run_list_tasks(target, latency)
    return {"get_task": get, "list_tasks": listing}
