"""Streams through real daphne processes over channels_redis on the real Redis (A2A §3.1.6).

Each server runs the inline backend with the ``channels`` event bus on a PostgreSQL database
created for this module and on Redis under a key prefix of its own. The agent ("ticks N MS
GATE") waits for a gate file before it emits anything, so every stream is attached (it has
its snapshot) before the first event flows; the test then opens the gate.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import resource
import socket
import statistics
import struct
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import redis

from a2a_endpoint.streaming.bus import group_name
from a2a_endpoint.testing import jsonrpc_request, user_message
from tests.integration.servers import DaphneServer, delete_redis_keys, django_env, run_django
from tests.integration.sse import Frame, sse_frames

pytestmark = pytest.mark.integration

REDIS_SETTINGS = "tests.integration.redis_settings"
SERVER_APPLICATION = "tests.integration.asgi:application"
SUBSCRIBERS = 200
CAPACITY_STREAMS = 1_000
TICKS = 20
# Hundreds of clients connect at once: more than Twisted's default listen backlog of 50.
BACKLOG = 2048
# Generous: hundreds of streams start at once on one process (and CI machines are slow).
DEADLINE = 60.0
TERMINAL_STATES = {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED"}


# --- fixtures -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fd_limit() -> Iterator[int]:
    """Raise this process's open-file limit to the hard limit while the servers (which
    inherit it) run: a thousand streams are a thousand sockets on each side."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else max(soft, 65_536)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        with contextlib.suppress(ValueError, OSError):  # e.g. macOS caps it below "hard"
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    yield resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.fixture(scope="module")
def redis_prefix(redis_url: str) -> Iterator[str]:
    """A channels_redis key prefix of this module's own; its keys are deleted afterwards."""
    prefix = f"a2a-it-{uuid.uuid4().hex[:12]}"
    yield prefix
    delete_redis_keys(redis_url, prefix)


@pytest.fixture(scope="module")
def redis_client(redis_url: str) -> Iterator[redis.Redis]:
    with redis.Redis.from_url(redis_url, socket_timeout=5) as client:
        yield client


@pytest.fixture(scope="module")
def server_env(
    redis_url: str, redis_prefix: str, postgres_database_url: str, fd_limit: int
) -> dict[str, str]:
    """The servers' environment; the database is migrated once, before any server starts."""
    env = django_env(
        REDIS_SETTINGS,
        A2A_IT_POSTGRES_URL=postgres_database_url,
        A2A_TEST_REDIS_URL=redis_url,
        A2A_IT_REDIS_PREFIX=redis_prefix,
    )
    run_django(["migrate", "--noinput"], env)
    return env


@pytest.fixture(scope="module")
def server_a(
    server_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DaphneServer]:
    log_dir = tmp_path_factory.mktemp("daphne-a")
    with DaphneServer(
        SERVER_APPLICATION, env=server_env, log_dir=log_dir, name="daphne-a", backlog=BACKLOG
    ) as a:
        yield a


@pytest.fixture(scope="module")
def server_b(
    server_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DaphneServer]:
    log_dir = tmp_path_factory.mktemp("daphne-b")
    with DaphneServer(
        SERVER_APPLICATION, env=server_env, log_dir=log_dir, name="daphne-b", backlog=BACKLOG
    ) as b:
        yield b


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    """One HTTP/1.1 client for every stream of a test: a connection per stream."""
    limits = httpx.Limits(max_connections=CAPACITY_STREAMS + 50, max_keepalive_connections=20)
    timeout = httpx.Timeout(DEADLINE, connect=DEADLINE, pool=DEADLINE)
    async with httpx.AsyncClient(limits=limits, timeout=timeout) as client:
        yield client


@pytest.fixture
def gate(tmp_path: Path) -> Path:
    """The gate file a "ticks" job waits for (created to open the gate)."""
    return tmp_path / "gate"


# --- the wire -------------------------------------------------------------------------------


@dataclass
class Stream:
    """What one subscriber received; ``opened`` is set at its first event (the snapshot)."""

    request_id: int
    frames: list[Frame] = field(default_factory=list)
    opened: asyncio.Event = field(default_factory=asyncio.Event)
    closed_by_server: bool = False

    @property
    def events(self) -> list[tuple[int | None, dict[str, Any]]]:
        """(seq, StreamResponse) of every frame after the snapshot."""
        return [(frame.seq, frame.data["result"]) for frame in self.frames[1:]]


def rpc_body(method: str, params: dict[str, Any], request_id: int = 1) -> dict[str, Any]:
    return jsonrpc_request(method, params, request_id)


async def call(
    client: httpx.AsyncClient, server: DaphneServer, method: str, params: dict[str, Any]
) -> dict[str, Any]:
    """A JSON-RPC call answered with JSON; its result."""
    response = await client.post(
        server.url("/a2a/"), json=rpc_body(method, params), headers={"A2A-Version": "1.0"}
    )
    assert response.status_code == 200, response.text
    answer = response.json()
    assert "result" in answer, answer
    return answer["result"]


async def follow(
    client: httpx.AsyncClient, server: DaphneServer, task_id: str, stream: Stream
) -> None:
    """SubscribeToTask until the server ends the stream."""
    body = rpc_body("SubscribeToTask", {"id": task_id}, stream.request_id)
    async with client.stream(
        "POST", server.url("/a2a/"), json=body, headers={"A2A-Version": "1.0"}
    ) as response:
        assert response.status_code == 200
        content_type = response.headers["content-type"]
        assert content_type.startswith("text/event-stream"), await response.aread()
        async for frame in sse_frames(response, clock=time.time):
            stream.frames.append(frame)
            stream.opened.set()
    stream.closed_by_server = True


@dataclass
class Subscribers:
    """Many concurrent SubscribeToTask streams of one task."""

    streams: list[Stream]
    readers: list[asyncio.Task[None]]

    @classmethod
    def start(
        cls, client: httpx.AsyncClient, server: DaphneServer, task_id: str, count: int
    ) -> Subscribers:
        streams = [Stream(request_id=index) for index in range(count)]
        readers = [asyncio.create_task(follow(client, server, task_id, s)) for s in streams]
        return cls(streams, readers)

    async def opened(self) -> float:
        """Wait until every stream has its snapshot; the seconds it took."""
        started = time.monotonic()
        await asyncio.wait_for(
            asyncio.gather(
                *(self._opened(s, r) for s, r in zip(self.streams, self.readers, strict=True))
            ),
            DEADLINE,
        )
        return time.monotonic() - started

    @staticmethod
    async def _opened(stream: Stream, reader: asyncio.Task[None]) -> None:
        waiter = asyncio.ensure_future(stream.opened.wait())
        await asyncio.wait({waiter, reader}, return_when=asyncio.FIRST_COMPLETED)
        if not waiter.done():
            waiter.cancel()
            reader.result()  # the reader failed: raise its error
            raise AssertionError(f"stream {stream.request_id} ended before its snapshot")

    async def finished(self) -> None:
        """Wait until every stream was ended by the server (or fail at the deadline)."""
        await asyncio.wait_for(asyncio.gather(*self.readers), DEADLINE)

    async def abandon(self) -> None:
        for reader in self.readers:
            reader.cancel()
        await asyncio.gather(*self.readers, return_exceptions=True)


async def start_ticks(
    client: httpx.AsyncClient, server: DaphneServer, count: int, gate: Path, interval_ms: int = 5
) -> str:
    """A gated "ticks" task, sent with returnImmediately; its id."""
    params = {
        "message": user_message(f"ticks {count} {interval_ms} {gate}"),
        "configuration": {"returnImmediately": True},
    }
    result = await call(client, server, "SendMessage", params)
    return result["task"]["id"]


async def open_raw_stream(server: DaphneServer, task_id: str) -> asyncio.StreamWriter:
    """A SubscribeToTask over a bare socket, read up to its snapshot and then left open."""
    reader, writer = await asyncio.open_connection(server.host, server.port)
    body = json.dumps(rpc_body("SubscribeToTask", {"id": task_id})).encode()
    head = (
        f"POST /a2a/ HTTP/1.1\r\nHost: {server.host}:{server.port}\r\n"
        "Content-Type: application/json\r\nA2A-Version: 1.0\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    writer.write(head.encode() + body)
    await writer.drain()
    received = b""
    while b"\ndata: " not in received:
        chunk = await reader.read(65_536)
        assert chunk, f"the server closed the stream before its snapshot: {received!r}"
        received += chunk
    assert received.startswith(b"HTTP/1.1 200"), received
    return writer


def abort(writer: asyncio.StreamWriter, *, reset: bool) -> None:
    """Drop a connection at once: with ``reset`` the kernel answers with RST (SO_LINGER 0)."""
    if reset:
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


# --- the database and Redis, as the servers left them ----------------------------------------


@dataclass(frozen=True)
class LoggedEvent:
    seq: int
    state: str
    payload: dict[str, Any]
    created: float


def event_log(database_url: str, task_id: str) -> list[LoggedEvent]:
    """The task's TaskEvent rows, in seq order, read straight from the servers' database."""
    query = (
        "SELECT seq, state, payload, created_at FROM a2a_endpoint_taskevent"
        " WHERE task_id = %s ORDER BY seq"
    )
    with psycopg.connect(database_url, connect_timeout=5) as connection:
        rows = connection.execute(query, (uuid.UUID(task_id),)).fetchall()
    return [
        LoggedEvent(seq, state, payload, created.timestamp())
        for seq, state, payload, created in rows
    ]


def group_key(prefix: str, task_id: str) -> str:
    """channels_redis's key of a group: ``<prefix>:group:<group>`` (core.py ``_group_key``)."""
    return f"{prefix}:group:{group_name(task_id)}"


def group_members(client: redis.Redis, prefix: str, task_id: str) -> list[str]:
    return [member.decode() for member in client.zrange(group_key(prefix, task_id), 0, -1)]


async def poll(check: Callable[[], Any], what: str, timeout: float = 15.0) -> None:
    """Wait until ``check()`` is true, polling (bounded by ``timeout``)."""
    deadline = time.monotonic() + timeout
    delay = 0.01
    while not check():
        if time.monotonic() >= deadline:
            raise AssertionError(f"not true after {timeout} s: {what}")
        await asyncio.sleep(delay)  # a poll interval, bounded by the deadline above
        delay = min(delay * 2, 0.2)


def thread_count(server: DaphneServer) -> str:
    """Threads of the server process (Linux: /proc), to report what open streams cost."""
    assert server.process is not None
    status = Path(f"/proc/{server.process.pid}/status")
    if not status.exists():
        return "unknown"
    lines = status.read_text().splitlines()
    return next(line.split()[1] for line in lines if line.startswith("Threads:"))


# --- checks ----------------------------------------------------------------------------------


def assert_delivered(subscribers: Subscribers, log: list[LoggedEvent], task_id: str) -> list[float]:
    """Every stream: its snapshot, then every logged event after it exactly once, in order,
    and closed by the server after the terminal event. The terminal event's arrival times."""
    assert log, "the task has no events"
    assert log[-1].state in TERMINAL_STATES, log[-1]
    arrivals = []
    for stream in subscribers.streams:
        snapshot = stream.frames[0]
        assert snapshot.data["id"] == stream.request_id
        assert snapshot.data["result"]["task"]["id"] == task_id
        assert snapshot.seq is not None
        expected = [(event.seq, event.payload) for event in log if event.seq > snapshot.seq]
        assert stream.events == expected, f"stream {stream.request_id}"
        assert all(frame.data["id"] == stream.request_id for frame in stream.frames)
        assert stream.closed_by_server
        arrivals.append(stream.frames[-1].received)
    return arrivals


def status_text(event: LoggedEvent) -> str:
    """The text of a status update event's message."""
    return event.payload["statusUpdate"]["status"]["message"]["parts"][0]["text"]


def report_latency(what: str, committed: float, arrivals: list[float]) -> None:
    """Print (no assertion) how long after the terminal event the streams had it.

    ``committed`` is the event's ``created_at``: set when its row is written, a moment
    before the transaction commits and the event is published.
    """
    delays = sorted((arrival - committed) * 1000 for arrival in arrivals)
    print(
        f"\n{what}: terminal event stored -> received by {len(delays)} streams: "
        f"first {delays[0]:.1f} ms, median {statistics.median(delays):.1f} ms, "
        f"last {delays[-1]:.1f} ms"
    )


# --- tests -----------------------------------------------------------------------------------


async def test_every_subscriber_gets_every_event_in_order(
    http: httpx.AsyncClient,
    server_a: DaphneServer,
    postgres_database_url: str,
    redis_client: redis.Redis,
    redis_prefix: str,
    gate: Path,
) -> None:
    task_id = await start_ticks(http, server_a, TICKS, gate)
    subscribers = Subscribers.start(http, server_a, task_id, SUBSCRIBERS)
    try:
        took = await subscribers.opened()
        print(f"\n{SUBSCRIBERS} streams opened in {took:.2f} s")
        threads = thread_count(server_a)
        print(f"daphne threads with {SUBSCRIBERS} open streams: {threads}")
        # No thread is held per open stream (the view gives back Django's request thread).
        assert threads == "unknown" or int(threads) < SUBSCRIBERS // 4, threads
        gate.touch()
        await subscribers.finished()
    finally:
        await subscribers.abandon()

    log = event_log(postgres_database_url, task_id)
    assert [status_text(event) for event in log[1:]] == [
        *(f"tick {index}" for index in range(TICKS)),
        "ticked",
    ]
    arrivals = assert_delivered(subscribers, log, task_id)
    report_latency(f"{SUBSCRIBERS} subscribers, one daphne", log[-1].created, arrivals)
    # Every stream has ended: the process has left the task's group.
    await poll(lambda: not redis_client.exists(group_key(redis_prefix, task_id)), "group left")


async def test_each_process_joins_the_group_once(
    http: httpx.AsyncClient,
    server_a: DaphneServer,
    server_b: DaphneServer,
    postgres_database_url: str,
    redis_client: redis.Redis,
    redis_prefix: str,
    gate: Path,
) -> None:
    task_id = await start_ticks(http, server_a, 3, gate)
    on_a = Subscribers.start(http, server_a, task_id, SUBSCRIBERS)
    on_b = Subscribers.start(http, server_b, task_id, 20)
    try:
        await on_a.opened()
        await on_b.opened()
        # One channel per process in the task's group, however many streams it serves.
        members = group_members(redis_client, redis_prefix, task_id)
        assert len(members) == 2, members
        # A process-local channel name is "<prefix><client id>!<id>" (channels_redis).
        assert len({member.partition("!")[0] for member in members}) == 2, members
        gate.touch()
        await on_a.finished()
        await on_b.finished()
    finally:
        await on_a.abandon()
        await on_b.abandon()
    log = event_log(postgres_database_url, task_id)
    assert_delivered(on_a, log, task_id)
    assert_delivered(on_b, log, task_id)
    await poll(lambda: not redis_client.exists(group_key(redis_prefix, task_id)), "group left")


async def test_a_stream_on_another_process_gets_every_event(
    http: httpx.AsyncClient,
    server_a: DaphneServer,
    server_b: DaphneServer,
    postgres_database_url: str,
    gate: Path,
) -> None:
    """The job runs where the message was sent (inline backend: A); B streams it."""
    task_id = await start_ticks(http, server_a, TICKS, gate)
    on_b = Subscribers.start(http, server_b, task_id, 10)
    try:
        await on_b.opened()
        gate.touch()
        await on_b.finished()
    finally:
        await on_b.abandon()
    log = event_log(postgres_database_url, task_id)
    assert len(log) == TICKS + 2
    arrivals = assert_delivered(on_b, log, task_id)
    report_latency("10 subscribers on the other daphne", log[-1].created, arrivals)


async def test_a_continuation_on_one_process_reaches_a_stream_on_another(
    http: httpx.AsyncClient,
    server_a: DaphneServer,
    server_b: DaphneServer,
    postgres_database_url: str,
) -> None:
    asked = await call(http, server_a, "SendMessage", {"message": user_message("ask")})
    task = asked["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    on_b = Subscribers.start(http, server_b, task["id"], 5)
    try:
        await on_b.opened()
        # Blocking: A waits for the job's events through the channel layer as well.
        answer = user_message("Ada", taskId=task["id"], contextId=task["contextId"])
        done = await call(http, server_a, "SendMessage", {"message": answer})
        assert done["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        await on_b.finished()
    finally:
        await on_b.abandon()
    log = event_log(postgres_database_url, task["id"])
    assert status_text(log[-1]) == "Hello Ada"
    for stream in on_b.streams:
        # Subscribed while the task waited for input: the snapshot says so (A2A §3.1.6).
        assert stream.frames[0].data["result"]["task"]["status"]["state"] == (
            "TASK_STATE_INPUT_REQUIRED"
        )
    assert_delivered(on_b, log, task["id"])


async def test_abandoned_streams_leave_the_group(
    http: httpx.AsyncClient,
    server_a: DaphneServer,
    postgres_database_url: str,
    redis_client: redis.Redis,
    redis_prefix: str,
    gate: Path,
) -> None:
    task_id = await start_ticks(http, server_a, 3, gate)
    key = group_key(redis_prefix, task_id)
    writers = await asyncio.wait_for(
        asyncio.gather(*(open_raw_stream(server_a, task_id) for _ in range(50))), DEADLINE
    )
    assert redis_client.zcard(key) == 1
    for index, writer in enumerate(writers):
        # Half reset (RST), half closed without a goodbye (FIN); none ends its request.
        abort(writer, reset=index % 2 == 0)
    await poll(lambda: not redis_client.exists(key), "the group left after the disconnects")

    # The server is fine: a new stream of the same task joins again and gets everything.
    assert server_a.returncode is None
    subscriber = Subscribers.start(http, server_a, task_id, 1)
    try:
        await subscriber.opened()
        assert redis_client.zcard(key) == 1
        gate.touch()
        await subscriber.finished()
    finally:
        await subscriber.abandon()
    assert_delivered(subscriber, event_log(postgres_database_url, task_id), task_id)


async def test_one_process_holds_a_thousand_streams(
    http: httpx.AsyncClient,
    server_a: DaphneServer,
    postgres_database_url: str,
    fd_limit: int,
    gate: Path,
) -> None:
    """Capacity smoke check (the benchmark measures it properly)."""
    if fd_limit < CAPACITY_STREAMS + 500:
        pytest.skip(f"open-file limit {fd_limit} is too low for {CAPACITY_STREAMS} streams")
    task_id = await start_ticks(http, server_a, 3, gate)
    subscribers = Subscribers.start(http, server_a, task_id, CAPACITY_STREAMS)
    try:
        took = await subscribers.opened()
        print(f"\n{CAPACITY_STREAMS} streams opened in {took:.2f} s")
        print(f"daphne threads with {CAPACITY_STREAMS} open streams: {thread_count(server_a)}")
        gate.touch()
        await subscribers.finished()
    finally:
        await subscribers.abandon()
    log = event_log(postgres_database_url, task_id)
    arrivals = assert_delivered(subscribers, log, task_id)
    report_latency(f"{CAPACITY_STREAMS} subscribers, one daphne", log[-1].created, arrivals)
