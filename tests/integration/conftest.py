"""Fixtures for integration tests: a real daphne server and official a2a-sdk clients."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any, NoReturn
from urllib.parse import urlsplit, urlunsplit

import httpx
import psycopg
import pytest
import redis
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.types import AgentCard
from psycopg import sql

from tests.integration.servers import DaphneServer, django_env, live_processes, run_django

SERVER_SETTINGS = "tests.integration.settings"
SERVER_APPLICATION = "tests.integration.asgi:application"
REDIS_URL = os.environ.get("A2A_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
POSTGRES_URL = os.environ.get("A2A_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test")
# Above the server's BLOCKING_TIMEOUT (10 s in tests.settings): a blocking send that waits
# it out must come back as a Task, not as a client-side timeout.
HTTP_TIMEOUT = 20.0


@dataclass
class Exchange:
    """One HTTP round trip the SDK made: what it sent and what the server answered."""

    method: str
    url: str
    headers: dict[str, str]
    body: Any
    status: int
    answer: Any

    def __str__(self) -> str:
        sent = json.dumps(self.body, indent=1) if self.body is not None else ""
        answered = json.dumps(self.answer, indent=1)
        return f"> {self.method} {self.url} {self.headers}\n{sent}\n< {self.status}\n{answered}"


@dataclass
class WireLog:
    """Records the SDK's HTTP exchanges (an httpx response hook), to assert on and to print."""

    exchanges: list[Exchange] = field(default_factory=list)

    async def record(self, response: httpx.Response) -> None:
        request = response.request
        answer: Any = None
        # Only whole JSON bodies: reading an SSE body here would consume the stream.
        if response.headers.get("content-type", "").startswith("application/json"):
            await response.aread()
            answer = response.json()
        body = json.loads(request.content) if request.content else None
        headers = {k: v for k, v in request.headers.items() if k.lower().startswith("a2a-")}
        self.exchanges.append(
            Exchange(request.method, str(request.url), headers, body, response.status_code, answer)
        )

    def calls(self) -> list[Exchange]:
        """The JSON-RPC calls (POSTs), in order."""
        return [exchange for exchange in self.exchanges if exchange.method == "POST"]

    @property
    def last_call(self) -> Exchange:
        return self.calls()[-1]

    def __str__(self) -> str:
        return "\n\n".join(str(exchange) for exchange in self.exchanges)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """On failure, show the server logs and the SDK's HTTP exchanges under the report."""
    report = yield
    if report.failed:
        for process in live_processes():
            title = f"{process.name} output ({process.log_path})"
            report.sections.append((title, process.log_text()))
        wire = getattr(item, "funcargs", {}).get("wire")
        if isinstance(wire, WireLog) and wire.exchanges:
            report.sections.append(("a2a-sdk HTTP exchanges", str(wire)))
    return report


@pytest.fixture(scope="module")
def a2a_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaphneServer]:
    """One daphne serving the embedded default (SQLite, inline backend, in-memory bus).

    The server owns its database: a SQLite file in a temp dir, migrated in a subprocess with
    the same settings before daphne starts. The test process never opens it.
    """
    workdir = tmp_path_factory.mktemp("a2a-server")
    env = django_env(SERVER_SETTINGS, A2A_IT_DB=str(workdir / "db.sqlite3"))
    run_django(["migrate", "--noinput"], env)
    with DaphneServer(SERVER_APPLICATION, env=env, log_dir=workdir) as server:
        yield server


@pytest.fixture
def wire() -> WireLog:
    return WireLog()


@pytest.fixture
async def http(wire: WireLog) -> AsyncIterator[httpx.AsyncClient]:
    """The httpx client the SDK uses (handed to it through ClientConfig.httpx_client)."""
    async with httpx.AsyncClient(
        timeout=HTTP_TIMEOUT, event_hooks={"response": [wire.record]}
    ) as client:
        yield client


@pytest.fixture
async def agent_card(a2a_server: DaphneServer, http: httpx.AsyncClient) -> AgentCard:
    """The server's card, resolved by the SDK from the base URL (/.well-known/agent-card.json)."""
    return await A2ACardResolver(http, a2a_server.base_url).get_agent_card()


@pytest.fixture
async def client(agent_card: AgentCard, http: httpx.AsyncClient) -> AsyncIterator[Client]:
    """An SDK client that sends SendMessage (no streaming), built from the resolved card."""
    config = ClientConfig(streaming=False, polling=False, httpx_client=http)
    sdk_client = ClientFactory(config).create(agent_card)
    yield sdk_client
    await sdk_client.close()


# --- external services ----------------------------------------------------------------------


def service_missing(message: str) -> NoReturn:
    """Skip a test whose service is not there, or fail it where services are required (CI)."""
    if os.environ.get("A2A_REQUIRE_SERVICES") == "1":
        pytest.fail(f"{message} (A2A_REQUIRE_SERVICES=1: the service is required)", pytrace=False)
    pytest.skip(f"{message} (start it, or set A2A_TEST_REDIS_URL / A2A_TEST_POSTGRES_URL)")


@pytest.fixture(scope="session")
def redis_url() -> str:
    """The URL of a reachable Redis (``A2A_TEST_REDIS_URL``, default 127.0.0.1:6379/0)."""
    problem = ""
    with redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2, socket_timeout=2) as client:
        try:
            client.ping()
        except redis.RedisError as exc:
            problem = f"Redis is not reachable at {REDIS_URL}: {exc}"
    if problem:  # reported outside the except block: no chained traceback, just the reason
        service_missing(problem)
    return REDIS_URL


def with_database(url: str, name: str) -> str:
    """``url`` naming database ``name`` instead of its own."""
    return urlunsplit(urlsplit(url)._replace(path=f"/{name}"))


@pytest.fixture(scope="module")
def postgres_database_url() -> Iterator[str]:
    """A fresh PostgreSQL database for server processes, dropped again after the module.

    Created on the server of ``A2A_TEST_POSTGRES_URL`` through its maintenance database, as
    Django's test runner does; dropped WITH (FORCE) so a connection a killed server left
    behind cannot keep it alive.
    """
    name = f"a2a_it_{uuid.uuid4().hex[:12]}"
    admin_url = with_database(POSTGRES_URL, "postgres")
    try:
        admin = psycopg.connect(admin_url, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        admin = None
        problem = f"PostgreSQL is not reachable at {admin_url}: {exc}"
    if admin is None:
        service_missing(problem)
    with admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield with_database(POSTGRES_URL, name)
    finally:
        drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
        with psycopg.connect(admin_url, autocommit=True, connect_timeout=5) as admin:
            admin.execute(drop.format(sql.Identifier(name)))
