"""The production topology end to end: nginx, two daphnes, Celery workers, PostgreSQL, Redis.

Agent jobs run on Celery workers (prefork, two processes each), events cross processes on
channels_redis, and the web processes sit behind nginx configured from deploy/nginx.conf
(tests/integration/topology.py builds it all). Covered: a job sent through one daphne runs on a
worker and streams through the other; CancelTask reaches a job in a worker at once, and a sync
job that ignores it is killed after the grace period; a job lost with its worker is retried
or failed within the lease; a stream survives a restart of its daphne (Last-Event-ID through
nginx); a blocking send is woken by the worker's events; racing answers continue a task once;
a redelivered job never runs the agent twice. Leases and grace periods are seconds long, and
measured latencies are printed (``pytest -s`` shows them). Needs PostgreSQL, Redis and nginx:
missing, the tests skip (or fail, with ``A2A_REQUIRE_SERVICES=1``).
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from a2a_endpoint.streaming.bus import cancel_group_name, settled_group_name
from a2a_endpoint.testing import user_message
from tests.integration.servers import delete_redis_keys, run_django
from tests.integration.sse import Frame, sse_frames
from tests.integration.topology import (
    A2A_HEADERS,
    BLOCKING_TIMEOUT,
    CANCEL_GRACE,
    JOB_LEASE,
    JOB_QUEUE,
    RUN_TASK,
    STEADY_JOB_LEASE,
    TERMINAL,
    CeleryWorker,
    Run,
    Topology,
    celery_client,
    eventually,
    process_gone,
    result,
    rpc,
    send_params,
    subscribe_request,
    topology_env,
)
from tests.test_deploy_config import require_nginx

pytestmark = pytest.mark.integration

WORKING = "TASK_STATE_WORKING"
COMPLETED = "TASK_STATE_COMPLETED"
CANCELED = "TASK_STATE_CANCELED"
FAILED = "TASK_STATE_FAILED"
INPUT_REQUIRED = "TASK_STATE_INPUT_REQUIRED"
LOST_WORKER_MESSAGE = "The worker running this task was lost."
# A lost job: its lease lapses within JOB_LEASE of the kill, the next sweep (every
# JOB_LEASE / 2) finds it; the rest is slack for a busy machine.
LOST_JOB_BOUND = JOB_LEASE * 1.5 + 3.0
# A stubborn job: the stop job runs CANCEL_GRACE + 1 s after CancelTask, then Celery kills it.
STUBBORN_KILL_BOUND = CANCEL_GRACE + 1.0 + 5.0


# --- fixtures -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def redis_prefix(redis_url: str) -> Iterator[str]:
    """This run's Redis key prefix (channel layer and Celery); its keys go afterwards."""
    prefix = f"a2a-topology-{uuid.uuid4().hex[:12]}"
    yield prefix
    delete_redis_keys(redis_url, prefix)


@pytest.fixture(scope="module")
def topology(
    redis_url: str,
    redis_prefix: str,
    postgres_database_url: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Topology]:
    """nginx → daphne A (+ B as backup), workers w1 and w2: started once, always stopped."""
    require_nginx()
    pytest.importorskip("celery")
    workdir = tmp_path_factory.mktemp("topology")
    env = topology_env(postgres_database_url, redis_url, redis_prefix)
    run_django(["migrate", "--noinput"], env)
    cluster = Topology(workdir, env, postgres_database_url)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def workers(topology: Topology) -> list[CeleryWorker]:
    """Both workers running with LOST_JOB_POLICY "retry" and a long lease (restarted after
    a test killed one or changed them)."""
    return topology.ensure_workers("retry", STEADY_JOB_LEASE)


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    timeout = httpx.Timeout(BLOCKING_TIMEOUT + 10, connect=10)
    async with httpx.AsyncClient(timeout=timeout) as client:
        yield client


# --- helpers --------------------------------------------------------------------------------


def report(what: str, seconds: float) -> None:
    print(f"[topology] {what}: {seconds * 1000:.0f} ms")


def state_of(frame: Frame) -> str | None:
    """The task state a stream event carries (None for an artifact update)."""
    result = frame.data["result"]
    if "task" in result:
        return result["task"]["status"]["state"]
    if "statusUpdate" in result:
        return result["statusUpdate"]["status"]["state"]
    return None


def tick_texts(frames: list[Frame]) -> list[str]:
    texts = []
    for frame in frames:
        update = frame.data["result"].get("statusUpdate")
        message = update and update["status"].get("message")
        if message and message["parts"][0].get("text", "").startswith("tick "):
            texts.append(message["parts"][0]["text"])
    return texts


def assert_events_match_the_log(topology: Topology, task_id: str, frames: list[Frame]) -> None:
    """A snapshot, then every later event of the TaskEvent log exactly once, in order."""
    snapshot, *events = frames
    assert "task" in snapshot.data["result"], snapshot
    assert snapshot.seq is not None
    log = topology.events(task_id)
    expected = [(seq, payload) for seq, payload in log if seq > snapshot.seq]
    assert [frame.seq for frame in events] == list(range(snapshot.seq + 1, log[-1][0] + 1))
    assert [(frame.seq, frame.data["result"]) for frame in events] == expected


async def first_run(topology: Topology, task_id: str) -> Run:
    runs = await eventually(lambda: topology.runs(task_id), f"the agent to start on {task_id}")
    return runs[0]


async def ticks_logged(topology: Topology, task_id: str, count: int) -> None:
    """Wait until the task's log holds ``count`` tick updates (the job is mid-way)."""
    await eventually(
        lambda: topology.task_row(task_id)["seq"] >= 1 + count, f"{count} ticks of {task_id}"
    )


async def send(
    http: httpx.AsyncClient, base_url: str, text: str, topology: Topology, *, blocking: bool
) -> dict[str, Any]:
    """SendMessage ``text``; the Task it answers with."""
    answer = await result(
        http, base_url, "SendMessage", send_params(text, topology.metadata(), blocking=blocking)
    )
    assert "task" in answer, answer
    return answer["task"]


# --- 1. send through A, run on a worker, stream through B --------------------------------


async def test_a_job_sent_through_a_runs_on_a_worker_and_streams_through_b(
    topology: Topology, workers: list[CeleryWorker], http: httpx.AsyncClient, tmp_path: Path
):
    gate = tmp_path / "gate"
    task = await send(http, topology.web_a.base_url, f"ticks 8 50 {gate}", topology, blocking=False)
    task_id = task["id"]

    frames: list[Frame] = []
    async with http.stream(
        "POST",
        topology.web_b.url("/a2a/"),
        json=subscribe_request(task_id),
        headers=A2A_HEADERS,
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        async for frame in sse_frames(response):
            frames.append(frame)
            if len(frames) == 1:
                gate.touch()  # subscribed (snapshot read): now let the job emit its events

    # B's stream: the snapshot, then every event of the job exactly once, in order.
    assert frames[0].seq == 1, "the job emitted nothing before the gate opened"
    assert_events_match_the_log(topology, task_id, frames)
    assert tick_texts(frames) == [f"tick {i}" for i in range(8)]
    assert state_of(frames[-1]) == COMPLETED
    assert all(frame.data["id"] == 1 and frame.data["jsonrpc"] == "2.0" for frame in frames)

    # The job ran once, in a pool process of a worker: not in daphne A, which took the message.
    [run] = topology.runs(task_id)
    assert run.ppid in {worker.pid for worker in workers}
    assert run.pid in topology.worker_of(run.pid).pool()
    assert run.pid not in {topology.web_a.process.pid, topology.web_b.process.pid}
    # B's stream left the task's channel-layer group, the job's cancel watch its cancel group.
    await eventually(lambda: topology.group_members(task_id) == 0, "the group left by all")
    await eventually(
        lambda: topology.group_members(task_id, cancel_group_name) == 0, "the cancel group left"
    )


# --- 5. blocking SendMessage through nginx ---------------------------------------------------


async def test_a_workers_job_lines_carry_the_task_id_and_the_celery_job_id(
    topology: Topology, workers: list[CeleryWorker], http: httpx.AsyncClient
):
    """docs/logging.md: a worker's job lines (the project's text format) name the task and
    the Celery task id of the job, the one Celery's own lines name."""
    task = await send(http, topology.nginx.base_url, "echo hi", topology, blocking=True)
    task_id = task["id"]
    finished = re.compile(
        r"a2a_endpoint\.jobs: Job finished: TASK_STATE_COMPLETED in [0-9.]+ ms "
        rf"\[method=job task_id={task_id} caller=anonymous job_id=(?P<job>[0-9a-f-]{{36}}) "
        r"attempt=1\]"
    )
    found = await eventually(
        lambda: next(
            (m for w in topology.workers if (m := finished.search(w.log_text(10_000_000)))), None
        ),
        "the job's finish line",
    )
    job_id = found["job"]
    started = f"Job started (attempt 1) [method=job task_id={task_id} caller=anonymous "
    assert any(w.logged(started + f"job_id={job_id} attempt=1]") for w in topology.workers)
    await eventually(
        lambda: any(w.logged(f"{RUN_TASK}[{job_id}] succeeded") for w in topology.workers),
        "Celery's line for the same job",
    )


async def test_a_blocking_send_through_nginx_returns_the_task_the_worker_completed(
    topology: Topology, workers: list[CeleryWorker], http: httpx.AsyncClient, tmp_path: Path
):
    gate = tmp_path / "gate"
    text = f"ticks 3 20 {gate}"
    sending = asyncio.create_task(
        send(http, topology.nginx.base_url, text, topology, blocking=True)
    )
    # The job is waiting at its gate; the web process waits in the task's settled group and
    # the job's cancel watch in its cancel group: no one is in the task's group, so neither
    # hears the job's progress come back through Redis.
    runs = await eventually(
        lambda: [run for run in topology.runs(None) if run.text == text], "the job to start"
    )
    task_id = runs[0].task
    await eventually(
        lambda: topology.group_members(task_id, cancel_group_name) == 1, "the job's cancel watch"
    )
    assert topology.group_members(task_id, settled_group_name) == 1, "A waiting"
    assert topology.group_members(task_id) == 0
    assert not sending.done(), "a blocking send returned before the task settled"

    gate.touch()
    task = await asyncio.wait_for(sending, BLOCKING_TIMEOUT)
    answered = time.time()

    assert task["id"] == task_id
    assert task["status"]["state"] == COMPLETED
    assert task["status"]["message"]["parts"][0]["text"] == "ticked"
    [run] = topology.runs(task_id)
    assert run.ppid in {worker.pid for worker in workers}
    # It came through nginx from daphne A (B is nginx's backup), woken by the worker's
    # COMPLETED event on the channel layer.
    assert topology.web_a.served() >= 1
    completed_at = _timestamp(task["status"]["timestamp"])
    report("blocking SendMessage answered after the worker completed", answered - completed_at)
    assert answered - completed_at < 2.0


def _timestamp(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


# --- 2. cancellation of a job running in a worker ------------------------------------------


# Rounds of a canceled job and a busy one, all in one worker process: the cancel watch of
# every job a process runs must work, not only of its first (jobs share the channel layer).
ROUNDS = 3
OTHER_JOBS = [("echo quick", COMPLETED), ("ask", INPUT_REQUIRED), ("ticks 10 10", COMPLETED)]


async def cancel_a_lingering_job(
    topology: Topology, http: httpx.AsyncClient
) -> tuple[str, Run, float]:
    """A job started through A and canceled through B; (task id, its run, cancel latency)."""
    task = await send(http, topology.web_a.base_url, "linger", topology, blocking=False)
    task_id = task["id"]
    run = await first_run(topology, task_id)
    await eventually(lambda: topology.task_row(task_id)["state"] == WORKING, "WORKING")

    asked = time.time()
    canceled = await result(http, topology.web_b.base_url, "CancelTask", {"id": task_id})
    assert canceled["status"]["state"] == CANCELED
    # At once, for every web process: the task is CANCELED in the database.
    got = await result(http, topology.web_a.base_url, "GetTask", {"id": task_id})
    assert got["status"]["state"] == CANCELED

    # The agent, in its worker process, heard it and its late write was refused.
    await eventually(lambda: "write refused" in topology.notes(task_id), "the refused write")
    notes = topology.runs(task_id, "note")
    assert [note.what for note in notes] == ["cancelled=True", "write refused"]
    assert notes[0].pid == run.pid
    return task_id, run, notes[0].time - asked


async def test_cancel_through_b_stops_the_job_running_in_a_worker(
    topology: Topology, http: httpx.AsyncClient
):
    [worker] = topology.ensure_workers("retry", STEADY_JOB_LEASE, count=1, concurrency=1)
    latencies = []
    for _ in range(ROUNDS):
        task_id, run, latency = await cancel_a_lingering_job(topology, http)
        latencies.append(latency)
        assert run.pid in worker.pool()
        # The job ended: its lease was released; nothing was written after the cancellation.
        await eventually(
            lambda task_id=task_id: topology.task_row(task_id)["lease_expires_at"] is None,
            "the lease released",
        )
        assert topology.task_row(task_id)["state"] == CANCELED
        assert topology.events(task_id)[-1][1]["statusUpdate"]["status"]["state"] == CANCELED
        assert len(topology.runs(task_id)) == 1
        # Other jobs in between, short and long: each one's cancel watch joins and leaves.
        for text, state in OTHER_JOBS:
            other = await send(http, topology.web_a.base_url, text, topology, blocking=True)
            assert other["status"]["state"] == state

    report("cancel latency, first job (CancelTask sent → agent saw it)", latencies[0])
    report("cancel latency, max", max(latencies))
    # Heard through the channel layer: the heartbeat notices it a third of a lease later.
    assert max(latencies) < STEADY_JOB_LEASE / 3 / 4, latencies
    assert not worker.logged("Channel layer receive failed")


async def cancel_a_stubborn_job(
    topology: Topology, http: httpx.AsyncClient, bound: float
) -> CeleryWorker:
    """A sync job that ignores CancelTask is killed within ``bound``; the worker it ran on."""
    task = await send(http, topology.web_a.base_url, "stubborn 60", topology, blocking=False)
    task_id = task["id"]
    run = await first_run(topology, task_id)
    await eventually(lambda: topology.task_row(task_id)["state"] == WORKING, "WORKING")
    worker = topology.worker_of(run.pid)

    asked = time.time()
    canceled = await result(http, topology.web_b.base_url, "CancelTask", {"id": task_id})
    assert canceled["status"]["state"] == CANCELED
    await eventually(
        lambda: "ignoring cancellation" in topology.notes(task_id), "the agent to see the cancel"
    )

    # After the grace period the pool process running it is killed (the agent never gets to
    # write "finished"), its lease released, and the worker replaces the process.
    await eventually(
        lambda: process_gone(run.pid), "the stubborn job's process to be killed", bound + 5
    )
    killed = time.time()
    processes = f"{worker.concurrency} pool processes"
    report(f"stubborn sync job killed after CancelTask ({processes})", killed - asked)
    assert killed - asked >= CANCEL_GRACE
    assert killed - asked < bound
    await eventually(
        lambda: topology.task_row(task_id)["lease_expires_at"] is None, "the lease released"
    )
    await eventually(
        lambda: len(worker.pool()) == worker.concurrency, "the worker to replace the process"
    )
    assert worker.returncode is None
    assert "finished" not in topology.notes(task_id)
    assert topology.task_row(task_id)["state"] == CANCELED
    assert len(topology.runs(task_id)) == 1

    # The worker still serves jobs (the replaced process included).
    echo = await send(http, topology.web_a.base_url, "echo again", topology, blocking=True)
    assert echo["status"]["state"] == COMPLETED
    return worker


async def test_a_sync_job_that_ignores_cancel_is_killed_after_the_grace_period(
    topology: Topology, workers: list[CeleryWorker], http: httpx.AsyncClient
):
    # The stop job enqueued by CancelTask runs after the grace period, on a free process.
    await cancel_a_stubborn_job(topology, http, STUBBORN_KILL_BOUND)


# --- 6. two answers racing for one interrupted task ---------------------------------------


async def test_two_answers_racing_through_a_and_b_continue_the_task_once(
    topology: Topology, workers: list[CeleryWorker], http: httpx.AsyncClient
):
    asked = await send(http, topology.web_a.base_url, "ask", topology, blocking=True)
    task_id = asked["id"]
    assert asked["status"]["state"] == INPUT_REQUIRED

    texts = {"a": "ticks 3 100", "b": "ticks 3 101"}
    answers = await asyncio.gather(
        *(
            rpc(
                http,
                server.base_url,
                "SendMessage",
                {
                    "message": user_message(texts[name], taskId=task_id),
                    "configuration": {"returnImmediately": True},
                },
                request_id=index,
            )
            for index, (name, server) in enumerate(
                [("a", topology.web_a), ("b", topology.web_b)], start=1
            )
        )
    )
    won = [answer for answer in answers if "result" in answer]
    lost = [answer for answer in answers if "error" in answer]
    assert len(won) == 1, answers
    assert len(lost) == 1, answers
    assert lost[0]["error"]["code"] == -32004
    assert "not waiting for input" in lost[0]["error"]["message"]
    assert won[0]["result"]["task"]["status"]["state"] in {WORKING, COMPLETED}
    winner = texts["a" if won[0]["id"] == 1 else "b"]

    await eventually(lambda: topology.task_row(task_id)["state"] == COMPLETED, "COMPLETED")
    assert [run.text for run in topology.runs(task_id)] == ["ask", winner]
    history = (await result(http, topology.web_b.base_url, "GetTask", {"id": task_id}))["history"]
    user_texts = [m["parts"][0]["text"] for m in history if m["role"] == "ROLE_USER"]
    assert user_texts == ["ask", winner]


# --- 7. a redelivered job does not run the agent again ------------------------------------


async def enqueue_by_hand(topology: Topology, redis_url: str, prefix: str, task_id: str) -> str:
    """Enqueue run_agent_task for ``task_id`` as a redelivery would; its job id, once run."""
    with celery_client(redis_url, prefix) as app:
        job = app.send_task(RUN_TASK, args=[task_id], queue=JOB_QUEUE)
    await eventually(
        lambda: any(w.logged(f"{RUN_TASK}[{job.id}] succeeded") for w in topology.workers),
        f"a worker to run the job {job.id} enqueued by hand",
    )
    assert any(
        w.logged(f"Job {job.id} for task {task_id}: nothing to do") for w in topology.workers
    )
    return job.id


# A finished task, and one waiting for input (not terminal: only the claimed message says
# that its job already ran).
@pytest.mark.parametrize(("text", "state"), [("echo once", COMPLETED), ("ask", INPUT_REQUIRED)])
async def test_a_redelivered_job_of_a_finished_message_does_not_run_the_agent_again(
    topology: Topology,
    workers: list[CeleryWorker],
    http: httpx.AsyncClient,
    redis_url: str,
    redis_prefix: str,
    text: str,
    state: str,
):
    task = await send(http, topology.web_a.base_url, text, topology, blocking=True)
    task_id = task["id"]
    assert task["status"]["state"] == state
    await eventually(
        lambda: topology.task_row(task_id)["lease_expires_at"] is None, "the job to end"
    )
    events = topology.events(task_id)

    await enqueue_by_hand(topology, redis_url, redis_prefix, task_id)

    assert len(topology.runs(task_id)) == 1
    assert topology.events(task_id) == events


async def test_a_duplicate_of_a_running_job_does_not_run_the_agent_again(
    topology: Topology,
    workers: list[CeleryWorker],
    http: httpx.AsyncClient,
    redis_url: str,
    redis_prefix: str,
):
    task = await send(http, topology.web_a.base_url, "ticks 10 100", topology, blocking=False)
    task_id = task["id"]
    await first_run(topology, task_id)

    await enqueue_by_hand(topology, redis_url, redis_prefix, task_id)

    await eventually(lambda: topology.task_row(task_id)["state"] == COMPLETED, "COMPLETED")
    assert len(topology.runs(task_id)) == 1
    updates = [payload for _, payload in topology.events(task_id) if "statusUpdate" in payload]
    assert len(updates) == 10 + 1  # ten ticks and COMPLETED: one run's updates


# --- 4. a daphne restarted under a stream ---------------------------------------------------


class ResumingClient:
    """SubscribeToTask through nginx, reconnecting with Last-Event-ID until a terminal event."""

    def __init__(self, http: httpx.AsyncClient, url: str, task_id: str) -> None:
        self.http = http
        self.url = url
        self.task_id = task_id
        self.frames: list[Frame] = []
        self.connections: list[str] = []  # how each connection ended
        self.on_frame: Callable[[Frame], None] = lambda frame: None

    @property
    def last_seq(self) -> int | None:
        return self.frames[-1].seq if self.frames else None

    async def follow(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if await self._connect(len(self.connections) + 1):
                return
            await asyncio.sleep(0.05)  # reconnect delay, bounded by the deadline
        raise AssertionError(f"no terminal event within {timeout} s: {self.connections}")

    async def _connect(self, request_id: int) -> bool:
        headers = dict(A2A_HEADERS)
        if self.last_seq is not None:
            headers["Last-Event-ID"] = str(self.last_seq)
        try:
            async with self.http.stream(
                "POST", self.url, json=subscribe_request(self.task_id, request_id), headers=headers
            ) as response:
                if response.status_code != 200:
                    self.connections.append(f"HTTP {response.status_code}")
                    return False
                content_type = response.headers["content-type"]
                assert content_type.startswith("text/event-stream"), await response.aread()
                async for frame in sse_frames(response):
                    assert frame.data["id"] == request_id, frame
                    assert "result" in frame.data, frame
                    self.frames.append(frame)
                    self.on_frame(frame)
                    if state_of(frame) in TERMINAL:
                        self.connections.append("completed")
                        return True
                self.connections.append("closed before the end")
        except httpx.TransportError as exc:
            self.connections.append(type(exc).__name__)
        return False


async def test_a_stream_through_nginx_resumes_across_a_restart_of_its_daphne(
    topology: Topology, workers: list[CeleryWorker], http: httpx.AsyncClient, tmp_path: Path
):
    gate = tmp_path / "gate"
    nginx = topology.nginx
    task = await send(http, nginx.base_url, f"ticks 30 100 {gate}", topology, blocking=False)
    task_id = task["id"]
    served_by_b = topology.web_b.served()

    client = ResumingClient(http, nginx.url("/a2a/"), task_id)
    client.on_frame = lambda frame: gate.touch()
    following = asyncio.create_task(client.follow())
    await eventually(lambda: len(tick_texts(client.frames)) >= 5, "five ticks on the stream")

    # Daphne A (nginx's primary: it serves this stream) goes down mid-stream ...
    stopping = time.monotonic()
    topology.terminate_web_a()
    report("daphne A stopped (SIGTERM)", time.monotonic() - stopping)
    await eventually(lambda: len(client.connections) >= 1, "the stream through A to break")
    broken_at = len(client.frames)
    # ... the client resumes through nginx (which fails over to B) while A restarts.
    await eventually(lambda: len(client.frames) > broken_at, "events after the reconnect")
    restarting = time.monotonic()
    topology.start_web_a()
    report("daphne A restarted", time.monotonic() - restarting)

    await asyncio.wait_for(following, 60)
    assert client.connections[0] != "completed", "the stream outlived the daphne serving it"
    assert client.connections[-1] == "completed"
    assert_events_match_the_log(topology, task_id, client.frames)
    assert tick_texts(client.frames) == [f"tick {i}" for i in range(30)]
    assert state_of(client.frames[-1]) == COMPLETED
    # The resumed streams were served by B, nginx's backup, while A was down.
    assert topology.web_b.served() > served_by_b
    print(f"[topology] stream connections: {client.connections}")


# --- 2. (continued) a stubborn job on a worker with no free process ------------------------


async def test_a_stubborn_job_is_killed_even_when_no_pool_process_is_free(
    topology: Topology, http: httpx.AsyncClient
):
    # One process, busy with the stubborn job: the stop job cannot run before it ends, so the
    # worker's sweeper (in its main process, every JOB_LEASE / 2) stops it instead.
    topology.ensure_workers("retry", JOB_LEASE, count=1, concurrency=1)
    await cancel_a_stubborn_job(topology, http, CANCEL_GRACE + JOB_LEASE / 2 + 5.0)


# --- 3. a worker lost mid-job ---------------------------------------------------------------


async def kill_the_worker_running(topology: Topology, task_id: str) -> tuple[Run, float]:
    """SIGKILL the whole worker (main process and pool) running the task's job, mid-job."""
    run = await first_run(topology, task_id)
    await ticks_logged(topology, task_id, 3)
    doomed = topology.worker_of(run.pid)
    killed_at = time.time()
    doomed.kill()
    assert all(w.returncode is None for w in topology.workers if w is not doomed)
    return run, killed_at


async def test_a_job_lost_with_its_worker_is_retried_on_the_other(
    topology: Topology, http: httpx.AsyncClient
):
    workers = topology.ensure_workers("retry", JOB_LEASE)
    task = await send(http, topology.web_a.base_url, "ticks 30 100", topology, blocking=False)
    task_id = task["id"]
    _, killed_at = await kill_the_worker_running(topology, task_id)
    survivor = next(w for w in workers if w.returncode is None)

    runs = await eventually(
        lambda: (runs := topology.runs(task_id)) and len(runs) >= 2 and runs,
        "the job to be retried",
        timeout=LOST_JOB_BOUND + 10,
    )
    retried = runs[1]
    report("lost worker detected and job retried (kill → second run)", retried.time - killed_at)
    assert retried.time - killed_at < LOST_JOB_BOUND
    assert retried.ppid == survivor.pid

    row = await eventually(
        lambda: (row := topology.task_row(task_id))["state"] in TERMINAL and row, "the end"
    )
    assert row["state"] == COMPLETED
    assert row["job_attempts"] == 1
    await eventually(
        lambda: topology.task_row(task_id)["lease_expires_at"] is None, "the lease released"
    )
    assert len(topology.runs(task_id)) == 2


async def test_a_retried_job_supersedes_what_the_lost_run_wrote(
    topology: Topology, http: httpx.AsyncClient
):
    """The lost run's partial report is closed and marked superseded, a status update says
    the job runs again, and the retry (told it is attempt 2) writes its own report."""
    topology.ensure_workers("retry", JOB_LEASE)
    task = await send(http, topology.web_a.base_url, "report 30 100", topology, blocking=False)
    task_id = task["id"]
    await kill_the_worker_running(topology, task_id)
    row = await eventually(
        lambda: (row := topology.task_row(task_id))["state"] in TERMINAL and row,
        "the retried job to end",
        timeout=LOST_JOB_BOUND + 30,
    )
    assert row["state"] == COMPLETED
    assert [run.attempt for run in topology.runs(task_id)] == [1, 2]

    got = await result(http, topology.nginx.base_url, "GetTask", {"id": task_id})
    lost, retried = got["artifacts"]
    assert lost["name"] == retried["name"] == "report"
    assert lost["metadata"] == {"a2aEndpointRetry": {"attempt": 1, "superseded": True}}
    assert "metadata" not in retried
    assert all("of attempt 1" in part["text"] for part in lost["parts"][:-1])
    assert lost["parts"][-1] == {"text": ""}  # the closing chunk
    assert len(retried["parts"]) == 30
    assert all("of attempt 2" in part["text"] for part in retried["parts"])
    notices = [
        message
        for message in got["history"]
        if "a2aEndpointRetry" in (message.get("metadata") or {})
    ]
    assert [notice["metadata"]["a2aEndpointRetry"] for notice in notices] == [
        {"attempt": 2, "lostAttempt": 1}
    ]
    # In the event log (what streams send), the lost report ends before the retry starts.
    kinds = [
        (seq, "artifact" if "artifactUpdate" in payload else "other", payload)
        for seq, payload in topology.events(task_id)
    ]
    closing = next(
        seq
        for seq, kind, payload in kinds
        if kind == "artifact" and payload["artifactUpdate"]["artifact"].get("metadata")
    )
    first_retry_chunk = next(
        seq
        for seq, kind, payload in kinds
        if kind == "artifact"
        and payload["artifactUpdate"]["artifact"]["artifactId"] == retried["artifactId"]
    )
    assert closing < first_retry_chunk


async def test_a_job_lost_with_its_worker_fails_the_task_under_policy_fail(
    topology: Topology, http: httpx.AsyncClient
):
    topology.ensure_workers("fail", JOB_LEASE)
    task = await send(http, topology.web_a.base_url, "ticks 30 100", topology, blocking=False)
    task_id = task["id"]
    _, killed_at = await kill_the_worker_running(topology, task_id)

    row = await eventually(
        lambda: (row := topology.task_row(task_id))["state"] in TERMINAL and row,
        "the task to end",
        timeout=LOST_JOB_BOUND + 10,
    )
    report("lost worker detected and task failed", time.time() - killed_at)
    assert row["state"] == FAILED
    got = await result(http, topology.nginx.base_url, "GetTask", {"id": task_id})
    assert got["status"]["state"] == FAILED
    assert got["status"]["message"]["parts"][0]["text"] == LOST_WORKER_MESSAGE
    assert len(topology.runs(task_id)) == 1
