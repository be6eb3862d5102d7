"""Faults injected into real processes: a Redis that goes down, a daphne that cannot reach
Redis, a daphne killed between the commit of a message and the hand-off of its job.

Each daphne and Celery worker runs the sample project (``tests.integration.topology_settings``)
on a PostgreSQL database of this module's own. The Redis that is stopped and started is a
``redis-server`` of this module's own on a free loopback port; "unreachable" is a port that
nothing listens on. Everything started here is stopped at the end.
"""

from __future__ import annotations

import contextlib
import json
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from a2a_endpoint.testing import jsonrpc_request
from tests.agents import RUN_LOG_KEY
from tests.integration.servers import (
    DaphneServer,
    ManagedProcess,
    delete_redis_keys,
    free_port,
    run_django,
    tcp_ready,
)
from tests.integration.topology import (
    A2A_HEADERS,
    APPLICATION,
    TERMINAL,
    CeleryWorker,
    send_params,
    topology_env,
    wait_until,
)

pytestmark = pytest.mark.integration

COMPLETED = "TASK_STATE_COMPLETED"
SUBMITTED = "TASK_STATE_SUBMITTED"
CANCELED = "TASK_STATE_CANCELED"
#: Short, so an owed job is handed over again within seconds (production: 30 s).
HANDOFF_TIMEOUT = 2.0
JOB_LEASE = 3.0  # the sweeper runs every JOB_LEASE / 2
#: An owed job is handed over within the timeout plus a sweep; the rest is slack.
HANDOFF_BOUND = HANDOFF_TIMEOUT + JOB_LEASE / 2 + 10.0
#: /healthz's checks each take at most 3 s (a2a_endpoint.health.CHECK_TIMEOUT).
HEALTH_TIMEOUT = 15.0


# --- processes ------------------------------------------------------------------------------


class RedisServer(ManagedProcess):
    """``redis-server`` on a loopback port of its own, keeping nothing on disk."""

    def __init__(self, port: int, log_dir: Path) -> None:
        self.port = port
        command = [
            "redis-server",
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(log_dir),
        ]
        super().__init__(
            f"redis-{port}", command, log_dir=log_dir, ready=tcp_ready("127.0.0.1", port)
        )

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"


def web(name: str, env: dict[str, str], log_dir: Path, **extra: str) -> DaphneServer:
    """A daphne of the sample project, ready once it serves the agent card (``/healthz`` may
    rightly answer 503 in these tests)."""
    return DaphneServer(
        APPLICATION,
        env={**env, **extra},
        name=name,
        log_dir=log_dir,
        ready_path="/.well-known/agent-card.json",
    )


def health(server: DaphneServer) -> tuple[int, dict[str, str]]:
    try:
        with urllib.request.urlopen(server.url("/healthz"), timeout=HEALTH_TIMEOUT) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def call(server: DaphneServer, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """A JSON-RPC call answered with JSON: the whole response object."""
    response = httpx.post(
        server.url("/a2a/"),
        json=jsonrpc_request(method, params),
        headers=A2A_HEADERS,
        timeout=40,
    )
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/json"), response.text
    return response.json()


def assert_unavailable(answer: dict[str, Any]) -> None:
    assert "result" not in answer, answer
    assert answer["error"]["code"] == -32603, answer
    assert answer["error"]["data"][0]["reason"] == "SERVICE_UNAVAILABLE", answer
    assert "nothing was changed" in answer["error"]["message"]


class Database:
    """The module's database, read directly (the test process has no Django of its own)."""

    def __init__(self, url: str) -> None:
        self.url = url

    def tasks_of(self, message_id: str) -> list[dict[str, Any]]:
        import psycopg
        from psycopg.rows import dict_row

        with psycopg.connect(self.url, autocommit=True, row_factory=dict_row) as db:
            return db.execute(
                "SELECT id, state, handoff_deadline, handoffs, job_attempts"
                " FROM a2a_endpoint_task WHERE origin_message_id = %s",
                [message_id],
            ).fetchall()

    def task(self, message_id: str) -> dict[str, Any]:
        [row] = self.tasks_of(message_id)
        return row


# --- fixtures -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("faults")


@pytest.fixture(scope="module")
def env(postgres_database_url: str, redis_url: str) -> Iterator[dict[str, str]]:
    """The processes' environment on the module's database and the run's Redis (prefixed)."""
    if sys.platform != "linux":
        pytest.skip("the fault tests signal process groups (Linux)")
    pytest.importorskip("celery")
    prefix = f"a2a-faults-{uuid.uuid4().hex[:12]}"
    values = {
        **topology_env(postgres_database_url, redis_url, prefix),
        "A2A_JOB_HANDOFF_TIMEOUT": str(HANDOFF_TIMEOUT),
        "A2A_JOB_LEASE": str(JOB_LEASE),
    }
    run_django(["migrate", "--noinput"], values)
    yield values
    delete_redis_keys(redis_url, prefix)


@pytest.fixture(scope="module")
def db(postgres_database_url: str) -> Database:
    return Database(postgres_database_url)


@contextlib.contextmanager
def worker(env: dict[str, str], workdir: Path, name: str = "w1") -> Iterator[CeleryWorker]:
    """A Celery worker (with its sweeper) on the run's Redis, stopped afterwards."""
    (workdir / name).mkdir(exist_ok=True)
    process = CeleryWorker(name, env=env, log_dir=workdir / name, concurrency=1)
    with process:
        yield process


def log_dir(workdir: Path, name: str) -> Path:
    path = workdir / f"{name}-{uuid.uuid4().hex[:6]}"
    path.mkdir()
    return path


# --- 1. /healthz after traffic, and with its Redis down and back -----------------------------


def test_health_stays_200_after_a_blocking_send_and_follows_its_redis(
    env: dict[str, str], workdir: Path
):
    """A daphne that served a blocking SendMessage (its bus reader then waits in Redis for
    good) answered every later probe with 503. It stays 200, is 503 while its Redis is down,
    and 200 again once Redis is back."""
    port = free_port()
    private = RedisServer(port, log_dir(workdir, "redis"))
    with contextlib.ExitStack() as stack:
        stack.enter_context(private)
        server = stack.enter_context(
            web(
                "daphne-health",
                env,
                log_dir(workdir, "daphne-health"),
                REDIS_URL=private.url,
                A2A_EXECUTION_BACKEND="inline",
            )
        )
        ok = {"status": "ok", "database": "ok", "channel_layer": "ok", "broker": "not configured"}
        assert health(server) == (200, ok)
        answer = call(server, "SendMessage", send_params("echo hi", {}, blocking=True))
        assert answer["result"]["task"]["status"]["state"] == COMPLETED, answer
        for _ in range(3):
            assert health(server) == (200, ok)

        private.stop()
        assert health(server) == (
            503,
            {
                "status": "error",
                "database": "ok",
                "channel_layer": "error",
                "broker": "not configured",
            },
        )

        again = stack.enter_context(RedisServer(port, log_dir(workdir, "redis-again")))
        assert again.port == port
        wait_until(lambda: health(server)[0] == 200, "the probe to recover with Redis")
        answer = call(server, "SendMessage", send_params("echo again", {}, blocking=True))
        assert answer["result"]["task"]["status"]["state"] == COMPLETED, answer
        assert health(server) == (200, ok)


# --- 2. a daphne whose Redis (channel layer and broker) is unreachable ----------------------


def test_writes_through_a_daphne_whose_redis_is_unreachable(
    env: dict[str, str], workdir: Path, db: Database
):
    """What waits on the bus is refused with nothing stored; what does not is stored,
    answered, and finishes once a worker's sweeper hands its job over."""
    dead = f"redis://127.0.0.1:{free_port()}/0"
    with web("daphne-no-redis", env, log_dir(workdir, "daphne-no-redis"), REDIS_URL=dead) as cut:
        blocking = send_params("echo blocked", {}, blocking=True)
        assert_unavailable(call(cut, "SendMessage", blocking))
        assert db.tasks_of(blocking["message"]["messageId"]) == []

        streaming = send_params("echo streamed", {}, blocking=True)
        assert_unavailable(call(cut, "SendStreamingMessage", streaming))
        assert db.tasks_of(streaming["message"]["messageId"]) == []

        owed = send_params("echo owed", {}, blocking=False)
        task = call(cut, "SendMessage", owed)["result"]["task"]
        assert task["status"]["state"] == SUBMITTED
        row = db.task(owed["message"]["messageId"])
        assert (row["state"], row["handoffs"]) == (SUBMITTED, 0)
        assert row["handoff_deadline"] is not None  # the job is owed

        doomed = send_params("echo doomed", {}, blocking=False)
        doomed_task = call(cut, "SendMessage", doomed)["result"]["task"]
        canceled = call(cut, "CancelTask", {"id": doomed_task["id"]})
        assert canceled["result"]["status"]["state"] == CANCELED, canceled
        assert db.task(doomed["message"]["messageId"])["state"] == CANCELED

    # Redis is reachable again (here: the processes that reach it): the sweeper hands the
    # owed job over, and the retried send of the same message is answered with its task.
    with worker(env, workdir), web("daphne-healthy", env, log_dir(workdir, "daphne-ok")) as ok:
        wait_until(
            lambda: db.task(owed["message"]["messageId"])["state"] in TERMINAL,
            "the owed job to be handed over and run",
            timeout=HANDOFF_BOUND + 20,
        )
        row = db.task(owed["message"]["messageId"])
        assert (row["state"], row["handoff_deadline"]) == (COMPLETED, None)
        retried = call(ok, "SendMessage", {**owed, "configuration": {}})["result"]["task"]
        assert retried["id"] == task["id"]
        assert retried["status"]["state"] == COMPLETED
        assert retried["artifacts"][0]["parts"][0]["text"] == "owed"
        # The canceled task's job, owed no more, never ran.
        assert db.task(doomed["message"]["messageId"])["state"] == CANCELED


# --- 2. a daphne killed between the commit and the hand-off -----------------------------------


def test_a_message_committed_by_a_daphne_killed_before_the_hand_off_runs(
    env: dict[str, str], workdir: Path, db: Database
):
    run_log = workdir / f"runs-{uuid.uuid4().hex[:6]}.jsonl"
    run_log.touch()
    params = send_params("echo survived", {RUN_LOG_KEY: str(run_log)}, blocking=False)
    message_id = params["message"]["messageId"]
    with worker(env, workdir, "w-kill"):
        dying = web(
            "daphne-dying",
            env,
            log_dir(workdir, "daphne-dying"),
            A2A_EXECUTION_BACKEND="tests.integration.dying_backend.DiesBeforeTheHandOff",
        )
        with dying:
            with pytest.raises(httpx.TransportError):  # the process died mid-request
                call(dying, "SendMessage", params)
            wait_until(lambda: dying.returncode is not None, "the daphne to die")
        assert db.task(message_id)["state"] in {SUBMITTED, COMPLETED}  # committed

        wait_until(
            lambda: db.task(message_id)["state"] in TERMINAL,
            "the job the dead daphne owed to be handed over and run",
            timeout=HANDOFF_BOUND + 20,
        )
        assert db.task(message_id)["state"] == COMPLETED
        with web("daphne-retry", env, log_dir(workdir, "daphne-retry")) as healthy:
            retried = call(healthy, "SendMessage", {**params, "configuration": {}})
        task = retried["result"]["task"]
        assert task["status"]["state"] == COMPLETED
        runs = [json.loads(line) for line in run_log.read_text().splitlines()]
        assert [run["task"] for run in runs if run["event"] == "run"] == [task["id"]]


# --- the database unreachable: every method is a JSON-RPC error, never an HTML page ---------


def test_every_method_through_a_daphne_whose_database_is_unreachable_is_a_jsonrpc_error(
    env: dict[str, str], workdir: Path
):
    dead = f"postgres://postgres@127.0.0.1:{free_port()}/nowhere"
    task_id = str(uuid.uuid4())
    calls = [
        ("SendMessage", send_params("echo lost", {}, blocking=True)),
        ("SendMessage", send_params("echo lost", {}, blocking=False)),
        ("SendStreamingMessage", send_params("echo lost", {}, blocking=True)),
        ("GetTask", {"id": task_id}),
        ("ListTasks", {}),
        ("CancelTask", {"id": task_id}),
        ("SubscribeToTask", {"id": task_id}),
        ("CreateTaskPushNotificationConfig", {"taskId": task_id, "url": "https://93.184.215.14/"}),
        ("GetTaskPushNotificationConfig", {"taskId": task_id, "id": "c"}),
        ("ListTaskPushNotificationConfigs", {"taskId": task_id}),
        ("DeleteTaskPushNotificationConfig", {"taskId": task_id, "id": "c"}),
    ]
    # No connection pool: with one, each request waits for its 10 s timeout first.
    daphne = web(
        "daphne-no-db", env, log_dir(workdir, "daphne-no-db"), DATABASE_URL=dead, DB_POOL_SIZE="0"
    )
    with daphne as cut:
        for method, params in calls:
            answer = call(cut, method, params)  # JSON with HTTP 200, not a 500 page
            assert answer["error"]["code"] == -32603, (method, answer)
            assert answer["error"]["message"] == "Internal error", (method, answer)
            assert "requestId" in answer["error"]["data"][0], (method, answer)
