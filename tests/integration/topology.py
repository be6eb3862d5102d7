"""The production topology for integration tests: nginx, two daphnes and Celery workers.

Every process runs the sample project's settings (``tests.integration.topology_settings``) on
a PostgreSQL database of its own (created and dropped per module by the ``postgres_database_url``
fixture) and on Redis under a key prefix of its own run. The test agent writes each run and
what it observed to a run log file named in the task's metadata (``tests.agents.RUN_LOG_KEY``),
with its pid: that is how a test sees, from outside, which process ran a job and how often.
Everything started here is stopped at the end, whatever happened; killed and restarted
processes stay listed until then, so a failing test shows their logs too.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import redis
from psycopg.rows import dict_row

from a2a_endpoint.streaming.bus import group_name
from a2a_endpoint.testing import jsonrpc_request, user_message
from tests.agents import RUN_LOG_KEY
from tests.integration.servers import (
    DaphneServer,
    ManagedProcess,
    ProcessStartupError,
    django_env,
    free_port,
    http_ready,
)
from tests.test_deploy_config import nginx_command, render_nginx_conf, require_nginx

SETTINGS = "tests.integration.topology_settings"
APPLICATION = "project.asgi:application"
JOB_QUEUE = "a2a-agent-jobs"
RUN_TASK = "a2a_endpoint.run_agent_task"
HOSTNAME = socket.gethostname()

# Short on purpose (production uses 30 s and 5 s): a lost job is noticed within about
# JOB_LEASE + JOB_LEASE / 2 (lapse, then the next sweep), a stubborn one killed after GRACE.
JOB_LEASE = 3.0
CANCEL_GRACE = 1.0
# The lease of the workers of every other test: its heartbeat (every third of it) is far
# slower than the bus, so a job that hears CancelTask at once heard it on the bus.
STEADY_JOB_LEASE = 30.0
BLOCKING_TIMEOUT = 20.0
# Generous deadlines for polls: the machine may be busy with other suites.
DEADLINE = 30.0
POLL = 0.02
TERMINAL = frozenset({"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED"})
A2A_HEADERS = {"A2A-Version": "1.0"}


def channel_layer_prefix(prefix: str) -> str:
    """The channels_redis key prefix of a run (as tests.integration.topology_settings sets)."""
    return f"{prefix}.ch"


def celery_key_prefix(prefix: str) -> str:
    """kombu's global_keyprefix of a run (as tests.integration.topology_settings sets)."""
    return f"{prefix}.celery:"


@contextlib.contextmanager
def celery_client(redis_url: str, prefix: str) -> Iterator[Any]:
    """A Celery app of the test process that enqueues jobs for this run's workers."""
    from celery import Celery

    app = Celery("a2a-topology-tests", broker=redis_url, set_as_current=False)
    app.conf.broker_transport_options = {"global_keyprefix": celery_key_prefix(prefix)}
    app.conf.broker_connection_retry_on_startup = True
    try:
        yield app
    finally:
        app.close()


def topology_env(database_url: str, redis_url: str, prefix: str, **extra: str) -> dict[str, str]:
    """The environment of every process: deploy/env.example's variables, test-sized."""
    return django_env(
        SETTINGS,
        DATABASE_URL=database_url,
        REDIS_URL=redis_url,
        A2A_IT_REDIS_PREFIX=prefix,
        A2A_IT_CELERY_QUEUE=JOB_QUEUE,
        DJANGO_DEBUG="0",
        # Open to anonymous callers: this suite is about jobs, streams and processes;
        # tests/auth and test_sdk_auth.py cover callers (the project's default with DEBUG
        # off is closed).
        A2A_OPEN_ENDPOINT="1",
        DJANGO_SECRET_KEY=f"topology-tests-only-{uuid.uuid4().hex}",
        DJANGO_ALLOWED_HOSTS="127.0.0.1,localhost",
        # Close connections after each request and job: a dozen processes share the server.
        DB_CONN_MAX_AGE="0",
        A2A_EXECUTION_BACKEND="celery",
        A2A_JOB_LEASE=str(STEADY_JOB_LEASE),
        A2A_CANCEL_GRACE_PERIOD=str(CANCEL_GRACE),
        A2A_BLOCKING_TIMEOUT=str(BLOCKING_TIMEOUT),
        A2A_LOST_JOB_POLICY="retry",
        A2A_LOST_JOB_MAX_RETRIES="1",
        # Longer than any test: streams must get their events through Redis, not from the
        # log reads of idle keep-alive intervals.
        A2A_SSE_KEEPALIVE="300",
        **extra,
    )


# --- processes ------------------------------------------------------------------------------


def wait_until(
    condition: Callable[[], Any], what: str, timeout: float = DEADLINE, poll: float = POLL
) -> Any:
    """Poll ``condition`` until it returns something truthy (returned), or fail after timeout."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(poll)  # a poll interval, bounded by the deadline
    return value


async def eventually(
    condition: Callable[[], Any], what: str, timeout: float = DEADLINE, poll: float = POLL
) -> Any:
    """``wait_until`` for coroutines: the event loop (and open streams) keep running."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(poll)  # a poll interval, bounded by the deadline
    return value


def children_of(pid: int) -> set[int]:
    """The live (not zombie) child processes of ``pid`` (from /proc)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # exited while we looked
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]
        if int(ppid) == pid and state != "Z":
            found.add(int(entry.name))
    return found


def process_gone(pid: int) -> bool:
    """True once ``pid`` has exited (a zombie waiting to be reaped counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def start_together(processes: Iterable[ManagedProcess], timeout: float = 60.0) -> None:
    """Start ``processes`` at once (from this thread) and wait until all are ready."""
    processes = list(processes)
    checks = []
    for process in processes:
        checks.append(process.ready)
        process.ready = None  # start() only spawns it: the waits below overlap
        process.start()
    deadline = time.monotonic() + timeout
    for process, check in zip(processes, checks, strict=True):
        process.ready = check
        while check is not None and not check():
            if process.returncode is not None or time.monotonic() >= deadline:
                process.stop()
                raise ProcessStartupError(
                    f"{process.name} did not become ready ({process.log_path}):\n"
                    + process.log_text()
                )
            time.sleep(0.05)  # a poll interval, bounded by the deadline


def terminate(process: ManagedProcess, timeout: float = 15.0) -> int:
    """SIGTERM the process group and wait; it stays listed (its log is shown on failure)."""
    assert process.process is not None
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.process.pid, signal.SIGTERM)
    try:
        return process.process.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.process.pid, signal.SIGKILL)
        return process.process.wait(timeout)


class WebServer(DaphneServer):
    """A daphne of the sample project as its Procfile runs it, with an access log."""

    def __init__(self, name: str, *, env: Mapping[str, str], log_dir: Path, port: int | None):
        super().__init__(
            APPLICATION, env=env, port=port, ready_path="/healthz", name=name, log_dir=log_dir
        )
        self.access_log = log_dir / f"{name}.access.log"
        application = self.command[-1]
        self.command = [
            *self.command[:-1],
            "--proxy-headers",
            "--access-log",
            str(self.access_log),
            application,
        ]

    def served(self, path: str = "/a2a/") -> int:
        """How many requests for ``path`` this daphne logged as finished."""
        try:
            text = self.access_log.read_text()
        except FileNotFoundError:
            return 0
        return sum(1 for line in text.splitlines() if f'"POST {path}"' in line)

    def log_text(self, limit: int = 20_000) -> str:
        access = self.access_log.read_text() if self.access_log.exists() else ""
        return super().log_text(limit) + f"\n--- access log ---\n{access[-4000:]}"


class CeleryWorker(ManagedProcess):
    """``celery -A project worker`` (prefork), ready once it logs ``<nodename> ready.``"""

    def __init__(
        self, name: str, *, env: Mapping[str, str], log_dir: Path, concurrency: int = 2
    ) -> None:
        self.nodename = f"{name}@{HOSTNAME}"
        self.concurrency = concurrency
        command = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "project",
            "worker",
            "-P",
            "prefork",
            "-c",
            str(concurrency),
            "-l",
            "info",
            "-n",
            self.nodename,
            "-Q",
            JOB_QUEUE,
            "--without-mingle",
            "--without-gossip",
        ]
        super().__init__(
            name, command, env=env, log_dir=log_dir, ready=self._logged_ready, stop_timeout=15
        )
        self.policy = env["A2A_LOST_JOB_POLICY"]
        self.lease = float(env["A2A_JOB_LEASE"])

    def _logged_ready(self) -> bool:
        return f"{self.nodename} ready." in self.log_text(limit=10_000_000)

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def pool(self) -> set[int]:
        """The pid of each pool process (the prefork children that run jobs)."""
        return children_of(self.pid)

    def kill(self) -> None:
        """SIGKILL the whole process group at once: the machine running it is gone."""
        os.killpg(self.pid, signal.SIGKILL)
        assert self.process is not None
        self.process.wait(10)

    def logged(self, text: str) -> bool:
        return text in self.log_text(limit=10_000_000)


class Nginx(ManagedProcess):
    """nginx with deploy/nginx.conf rendered for loopback ports (tests/test_deploy_config.py)."""

    def __init__(self, workdir: Path, upstreams: list[str]) -> None:
        require_nginx()
        self.port = free_port()
        conf = render_nginx_conf(
            workdir,
            upstreams=upstreams,
            port=self.port,
            redirect_port=free_port(),
            static_root=workdir / "static",
        )
        self.error_log = workdir / "error.log"
        super().__init__(
            "nginx",
            nginx_command(conf),
            log_dir=workdir,
            ready=http_ready(f"http://127.0.0.1:{self.port}/healthz"),
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str = "/") -> str:
        return self.base_url + path

    def log_text(self, limit: int = 20_000) -> str:
        errors = self.error_log.read_text() if self.error_log.exists() else ""
        return super().log_text(limit) + f"\n--- error.log ---\n{errors[-limit:]}"


# --- the topology ---------------------------------------------------------------------------


@dataclass
class Run:
    """One line of the agent's run log: a run (``event == "run"``) or a note."""

    task: str
    event: str
    pid: int
    ppid: int
    time: float
    text: str = ""
    what: str = ""
    attempt: int = 0  # a run's attempt (RequestContext.attempt); 0 in notes


class Topology:
    """nginx → daphne A (primary) and B (backup); Celery workers w1, w2; one database.

    nginx lists B as a backup server: every request through nginx goes to A while A is up,
    and to B when A does not answer, so a test knows where its stream is (and fails over).
    """

    def __init__(self, workdir: Path, env: dict[str, str], database_url: str) -> None:
        self.workdir = workdir
        self.env = env
        self.database_url = database_url
        self.run_log = workdir / "runs.jsonl"
        self.run_log.touch()
        self._generation = 0
        self.port_a, self.port_b = free_port(), free_port()
        self.web_a = self._web("daphne-a", self.port_a)
        self.web_b = self._web("daphne-b", self.port_b)
        self.nginx: Nginx | None = None
        self.workers: list[CeleryWorker] = []
        self._all: list[ManagedProcess] = []

    # --- lifecycle ----------------------------------------------------------------------

    def _dir(self, name: str) -> Path:
        self._generation += 1
        path = self.workdir / f"{self._generation:02d}-{name}"
        path.mkdir()
        return path

    def _web(self, name: str, port: int) -> WebServer:
        return WebServer(name, env=self.env, log_dir=self._dir(name), port=port)

    def start(self) -> None:
        self._all += [self.web_a, self.web_b]
        start_together([self.web_a, self.web_b])
        self.nginx = Nginx(
            self._dir("nginx"), [f"127.0.0.1:{self.port_a}", f"127.0.0.1:{self.port_b} backup"]
        )
        self._all.append(self.nginx)
        self.nginx.start()
        self.start_workers("retry", STEADY_JOB_LEASE)

    def stop(self) -> None:
        """Stop every process ever started, newest first (already dead ones are reaped)."""
        for process in reversed(self._all):
            with contextlib.suppress(Exception):
                process.stop()

    def start_workers(
        self, policy: str, lease: float, count: int = 2, concurrency: int = 2
    ) -> list[CeleryWorker]:
        """Stop the running workers; start ``count`` (w1, w2 ...) with these settings."""
        for worker in self.workers:
            if worker.returncode is None:
                terminate(worker)
        env = {**self.env, "A2A_LOST_JOB_POLICY": policy, "A2A_JOB_LEASE": str(lease)}
        self.workers = [
            CeleryWorker(name, env=env, log_dir=self._dir(name), concurrency=concurrency)
            for name in (f"w{index}" for index in range(1, count + 1))
        ]
        self._all += self.workers
        start_together(self.workers)
        return self.workers

    def ensure_workers(
        self,
        policy: str = "retry",
        lease: float = STEADY_JOB_LEASE,
        count: int = 2,
        concurrency: int = 2,
    ) -> list[CeleryWorker]:
        """Workers up with these settings (restarted if a test killed one or changed them)."""
        wanted = (policy, lease, concurrency)
        if len(self.workers) == count and all(
            w.returncode is None and (w.policy, w.lease, w.concurrency) == wanted
            for w in self.workers
        ):
            return self.workers
        return self.start_workers(policy, lease, count, concurrency)

    def terminate_web_a(self) -> None:
        """Stop daphne A as its supervisor would (SIGTERM), e.g. to restart it."""
        terminate(self.web_a)

    def start_web_a(self) -> None:
        """Start daphne A again, on the same port (nginx's upstream does not change)."""
        self.web_a = self._web("daphne-a", self.port_a)
        self._all.append(self.web_a)
        self.web_a.start()

    def worker_of(self, pid: int) -> CeleryWorker:
        """The worker whose pool process ``pid`` is (or was)."""
        runs = [worker for worker in self.workers if pid in worker.pool()]
        assert len(runs) == 1, f"pid {pid} is not a pool process of one running worker"
        return runs[0]

    # --- what the agent did -------------------------------------------------------------

    def runs(self, task_id: str | None, event: str | None = "run") -> list[Run]:
        """The run log lines of ``task_id`` (None: of every task; ``event=None``: notes too)."""
        lines = []
        for line in self.run_log.read_text().splitlines():
            record = json.loads(line)
            if task_id not in (None, record["task"]):
                continue
            if event is None or record["event"] == event:
                lines.append(Run(**record))
        return lines

    def notes(self, task_id: str) -> list[str]:
        return [run.what for run in self.runs(task_id, "note")]

    def metadata(self) -> dict[str, str]:
        """Task metadata that makes the agent log its runs where this topology reads them."""
        return {RUN_LOG_KEY: str(self.run_log)}

    # --- the database, read directly (the test process has no Django of this project) ---

    def query(self, sql: str, *params: Any) -> list[dict[str, Any]]:
        with psycopg.connect(self.database_url, autocommit=True, row_factory=dict_row) as db:
            return db.execute(sql, params).fetchall()

    def events(self, task_id: str) -> list[tuple[int, dict[str, Any]]]:
        """The TaskEvent log of ``task_id``: (seq, StreamResponse payload), in seq order."""
        rows = self.query(
            "SELECT seq, payload FROM a2a_endpoint_taskevent WHERE task_id = %s ORDER BY seq",
            uuid.UUID(task_id),
        )
        return [(row["seq"], row["payload"]) for row in rows]

    def group_members(self, task_id: str, group: Callable[[str], str] = group_name) -> int:
        """How many channels are in the task's channel-layer group (one per process with
        streams), or in another of its groups: ``settled_group_name`` (one per process with
        blocking waits), ``cancel_group_name`` (one per running job)."""
        prefix = channel_layer_prefix(self.env["A2A_IT_REDIS_PREFIX"])
        with redis.Redis.from_url(self.env["REDIS_URL"]) as client:
            return client.zcard(f"{prefix}:group:{group(task_id)}")

    def task_row(self, task_id: str) -> dict[str, Any]:
        [row] = self.query(
            "SELECT state, seq, job_id, job_position, job_attempts, lease_expires_at"
            " FROM a2a_endpoint_task WHERE id = %s",
            uuid.UUID(task_id),
        )
        return row

    def wait_for_state(
        self, task_id: str, states: Iterable[str], timeout: float = DEADLINE
    ) -> dict[str, Any]:
        wanted = set(states)
        return wait_until(
            lambda: (row := self.task_row(task_id))["state"] in wanted and row,
            f"task {task_id} to reach {sorted(wanted)}",
            timeout,
        )


# --- the wire -------------------------------------------------------------------------------


async def rpc(
    client: httpx.AsyncClient,
    base_url: str,
    method: str,
    params: dict[str, Any],
    request_id: int = 1,
) -> dict[str, Any]:
    """A JSON-RPC call answered with JSON: the whole response object (result or error)."""
    response = await client.post(
        f"{base_url}/a2a/", json=jsonrpc_request(method, params, request_id), headers=A2A_HEADERS
    )
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/json"), response.text
    return response.json()


async def result(
    client: httpx.AsyncClient, base_url: str, method: str, params: dict[str, Any]
) -> dict[str, Any]:
    answer = await rpc(client, base_url, method, params)
    assert "result" in answer, answer
    return answer["result"]


def send_params(
    text: str, metadata: dict[str, Any], *, blocking: bool, **message: Any
) -> dict[str, Any]:
    """SendMessage params: a user message with ``text``; ``blocking`` False returns at once."""
    return {
        "message": user_message(text, **message),
        "configuration": {"returnImmediately": not blocking},
        "metadata": metadata,
    }


def subscribe_request(task_id: str, request_id: int = 1) -> dict[str, Any]:
    return jsonrpc_request("SubscribeToTask", {"id": task_id}, request_id)
