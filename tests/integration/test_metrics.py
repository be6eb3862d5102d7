"""Metrics across processes: two daphnes and a Celery worker (prefork) of the sample project share
one PROMETHEUS_MULTIPROC_DIR, and one scrape of /metrics from one daphne sums what every
process counted: requests served by either daphne, jobs run by the worker's pool, streams open
in the other daphne. Processes that exit leave the live gauges and keep their counts.

The processes run ``tests.integration.topology_settings`` (PostgreSQL, channels_redis bus,
Celery backend, DEBUG off, /metrics behind ``A2A_METRICS_TOKEN``). Needs PostgreSQL and Redis:
missing, the tests skip (or fail, with ``A2A_REQUIRE_SERVICES=1``).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.servers import DaphneServer, delete_redis_keys, run_django
from tests.integration.sse import sse_frames
from tests.integration.topology import (
    A2A_HEADERS,
    APPLICATION,
    DEADLINE,
    CeleryWorker,
    result,
    send_params,
    start_together,
    subscribe_request,
    terminate,
    topology_env,
)

pytestmark = pytest.mark.integration

TOKEN = f"metrics-it-{uuid.uuid4().hex}"
SCRAPE = {"Authorization": f"Bearer {TOKEN}"}
COMPLETED = "TASK_STATE_COMPLETED"
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@dataclass
class Cluster:
    web_a: DaphneServer
    web_b: DaphneServer
    worker: CeleryWorker
    directory: Path


@pytest.fixture(scope="module")
def redis_prefix(redis_url: str) -> Iterator[str]:
    prefix = f"a2a-metrics-{uuid.uuid4().hex[:12]}"
    yield prefix
    delete_redis_keys(redis_url, prefix)


@pytest.fixture(scope="module")
def cluster(
    redis_url: str,
    redis_prefix: str,
    postgres_database_url: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Cluster]:
    """Daphne A and B and worker w1, one metrics directory: started once, always stopped."""
    pytest.importorskip("celery")
    workdir = tmp_path_factory.mktemp("metrics")
    directory = workdir / "prometheus"
    directory.mkdir()
    env = topology_env(
        postgres_database_url,
        redis_url,
        redis_prefix,
        PROMETHEUS_MULTIPROC_DIR=str(directory),
        A2A_METRICS_TOKEN=TOKEN,
    )
    run_django(["migrate", "--noinput"], env)
    processes = [
        DaphneServer(APPLICATION, env=env, log_dir=workdir, name="daphne-a"),
        DaphneServer(APPLICATION, env=env, log_dir=workdir, name="daphne-b"),
        CeleryWorker("w1", env=env, log_dir=workdir, concurrency=2),
    ]
    try:
        start_together(processes)
        web_a, web_b, worker = processes
        yield Cluster(web_a, web_b, worker, directory)  # type: ignore[arg-type]
    finally:
        for process in reversed(processes):
            process.stop()


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=httpx.Timeout(40, connect=10)) as client:
        yield client


async def scrape(http: httpx.AsyncClient, server: DaphneServer) -> Samples:
    response = await http.get(server.url("/metrics"), headers=SCRAPE)
    assert response.status_code == 200, response.text
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }


def get(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def delta(before: Samples, after: Samples, name: str, **labels: str) -> float:
    return get(after, name, **labels) - get(before, name, **labels)


async def eventually_async(condition: Callable[[], Awaitable[bool]], what: str) -> None:
    """Await ``condition`` (a scrape) until it holds, or fail after DEADLINE."""
    deadline = time.monotonic() + DEADLINE
    while not await condition():
        assert time.monotonic() < deadline, f"timed out after {DEADLINE} s waiting for {what}"
        await asyncio.sleep(0.1)  # a poll interval, bounded by the deadline


def pid(process: DaphneServer | CeleryWorker) -> int:
    assert process.process is not None
    return process.process.pid  # the launcher exec()s the server: the same pid


async def send(http: httpx.AsyncClient, server: DaphneServer, text: str) -> dict:
    answer = await result(
        http, server.base_url, "SendMessage", send_params(text, {}, blocking=True)
    )
    return answer["task"]


# --- one scrape, every process --------------------------------------------------------------


async def test_the_scrape_is_refused_without_the_token(cluster: Cluster, http: httpx.AsyncClient):
    response = await http.get(cluster.web_a.url("/metrics"))
    assert response.status_code == 401


async def test_one_scrape_sums_the_requests_of_both_daphnes_and_the_jobs_of_the_worker(
    cluster: Cluster, http: httpx.AsyncClient
):
    before = await scrape(http, cluster.web_a)
    tasks = [await send(http, cluster.web_a, f"echo a{n}") for n in range(3)]
    tasks += [await send(http, cluster.web_b, f"echo b{n}") for n in range(2)]
    assert {task["status"]["state"] for task in tasks} == {COMPLETED}
    await result(http, cluster.web_b.base_url, "GetTask", {"id": tasks[0]["id"]})

    after = await scrape(http, cluster.web_a)
    ok = {"binding": "jsonrpc", "outcome": "ok"}
    # Served by A (3) and B (2): A's own files alone would say 3.
    assert delta(before, after, "a2a_requests_total", method="SendMessage", **ok) == 5
    assert delta(before, after, "a2a_requests_total", method="GetTask", **ok) == 1
    assert delta(before, after, "a2a_tasks_created_total") == 5
    assert delta(before, after, "a2a_jobs_queued_total", backend="celery") == 5
    # Recorded by the worker's pool processes only (the daphnes run no job).
    assert delta(before, after, "a2a_job_duration_seconds_count") == 5
    assert delta(before, after, "a2a_tasks_finished_total", state="completed") == 5
    assert get(after, "a2a_jobs_running") == 0
    assert delta(before, after, "a2a_bus_published_total", bus="channels") >= 5
    # Each blocking send heard its task settle through Redis, in its daphne.
    assert delta(before, after, "a2a_bus_delivery_lag_seconds_count", bus="channels") >= 5
    # B's scrape is the same sum: both read the one directory.
    from_b = await scrape(http, cluster.web_b)
    name, labels = "a2a_requests_total", {"method": "SendMessage", **ok}
    assert get(from_b, name, **labels) == get(after, name, **labels)
    # Each process wrote files of its own there.
    pool = cluster.worker.pool()
    written = {int(path.stem.rsplit("_", 1)[1]) for path in cluster.directory.glob("*.db")}
    assert {pid(cluster.web_a), pid(cluster.web_b)} <= written
    assert pool & written


async def test_live_gauges_sum_the_streams_and_jobs_open_in_other_processes(
    cluster: Cluster, http: httpx.AsyncClient, tmp_path: Path
):
    gate = tmp_path / "gate"
    params = send_params(f"ticks 2 10 {gate}", {}, blocking=False)
    task = (await result(http, cluster.web_a.base_url, "SendMessage", params))["task"]

    async def running() -> bool:
        return get(await scrape(http, cluster.web_a), "a2a_jobs_running") == 1

    await eventually_async(running, "the worker's job to count as running")
    streams = {"binding": "jsonrpc", "method": "SubscribeToTask"}
    async with http.stream(
        "POST", cluster.web_b.url("/a2a/"), json=subscribe_request(task["id"]), headers=A2A_HEADERS
    ) as response:
        frames = sse_frames(response)
        await anext(frames)  # the snapshot: B's stream is open
        assert get(await scrape(http, cluster.web_a), "a2a_streams_open", **streams) == 1
        gate.touch()  # the job goes on, completes, and the stream ends
        async for _ in frames:
            pass

    async def idle() -> bool:
        samples = await scrape(http, cluster.web_a)
        return get(samples, "a2a_streams_open", **streams) == get(samples, "a2a_jobs_running") == 0

    await eventually_async(idle, "the stream and the job to be counted as ended")


async def test_processes_that_exit_leave_the_live_gauges_and_keep_their_counts(
    cluster: Cluster, http: httpx.AsyncClient, tmp_path: Path
):
    """Last: it stops daphne B and the worker (warm shutdown, as systemd stops them)."""
    # B serves a request and a stream, the worker a job: each has live gauges on file.
    gate = tmp_path / "gate"
    params = send_params(f"ticks 1 10 {gate}", {}, blocking=False)
    task = (await result(http, cluster.web_b.base_url, "SendMessage", params))["task"]
    async with http.stream(
        "POST", cluster.web_b.url("/a2a/"), json=subscribe_request(task["id"]), headers=A2A_HEADERS
    ) as response:
        frames = sse_frames(response)
        await anext(frames)
        gate.touch()
        async for _ in frames:
            pass
    b, pool = pid(cluster.web_b), cluster.worker.pool()
    b_gauges = cluster.directory / f"gauge_livesum_{b}.db"
    pool_gauges = [cluster.directory / f"gauge_livesum_{p}.db" for p in pool]
    assert b_gauges.exists()
    assert any(path.exists() for path in pool_gauges)
    before = await scrape(http, cluster.web_a)

    terminate(cluster.web_b)
    terminate(cluster.worker)
    # Marked dead as they exited: B at exit (atexit), the pool processes as they ended
    # (worker_process_shutdown). Their counters and histograms stay.
    assert not b_gauges.exists()
    assert [path.name for path in pool_gauges if path.exists()] == []
    assert (cluster.directory / f"counter_{b}.db").exists()
    after = await scrape(http, cluster.web_a)
    for name, labels in [
        ("a2a_requests_total", {"binding": "jsonrpc", "method": "SendMessage", "outcome": "ok"}),
        ("a2a_job_duration_seconds_count", {}),
        ("a2a_tasks_finished_total", {"state": "completed"}),
    ]:
        assert get(after, name, **labels) == get(before, name, **labels) > 0, name
