"""The servers under test: how each is started, pinned to core 0, measured from /proc, stopped.

Every process runs under ``taskset`` on the server core, in its own process group, with the
integration suite's ``ManagedProcess`` (readiness polling, SIGTERM then SIGKILL of the whole
group, and PR_SET_PDEATHSIG so a killed bench leaves no server behind). PostgreSQL databases
and Redis key prefixes are unique to the run and removed at the end.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from tests.integration.servers import (
    DaphneServer,
    ManagedProcess,
    django_env,
    free_port,
    http_ready,
    run_django,
)

SERVER_CORE = 0
CLIENT_CORE = 1
CARD_PATH = "/.well-known/agent-card.json"
CLK_TCK = os.sysconf("SC_CLK_TCK")

#: Which servers exist, in the order a round visits them (reversed every other round).
ALL_TARGETS = (
    "ours-prod",
    "ours-prod-token",
    "sdk-sql",
    "ours-embedded",
    "sdk-memory",
    "ceiling-django",
    "ceiling-django-stock",
    "ceiling-daphne",
    "ceiling-uvicorn",
)
#: Not in a run unless ``--servers`` names them: ``ours-prod-token`` only answers the question
#: "what does authentication cost", against ``ours-prod`` (README, "Cost of authentication").
OPT_IN_TARGETS = frozenset({"ours-prod-token"})
DEFAULT_TARGETS = tuple(name for name in ALL_TARGETS if name not in OPT_IN_TARGETS)
KINDS = {
    "ours-prod": "ours",
    "ours-prod-token": "ours",
    "ours-embedded": "ours",
    "sdk-sql": "sdk",
    "sdk-memory": "sdk",
    "ceiling-django": "ceiling",
    "ceiling-django-stock": "ceiling",
    "ceiling-daphne": "ceiling",
    "ceiling-uvicorn": "ceiling",
}
DESCRIPTIONS = {
    "ours-prod": "a2a_endpoint, production stack: daphne + PostgreSQL + Redis channel layer "
    "+ 1 Celery worker (prefork, 2 processes)",
    "ours-prod-token": "ours-prod closed (A2A_OPEN_ENDPOINT=0, IsAuthenticated): every call "
    "carries `Authorization: Bearer <DRF token>` of a user created for the run, looked up in "
    "PostgreSQL per request",
    "ours-embedded": "a2a_endpoint, embedded default: daphne + SQLite + inline backend + "
    "memory bus",
    "sdk-sql": "a2a-sdk 1.3.0 reference (Starlette JSON-RPC, DefaultRequestHandler, "
    "DatabaseTaskStore on the same PostgreSQL via asyncpg) under uvicorn",
    "sdk-memory": "a2a-sdk 1.3.0 reference with InMemoryTaskStore under uvicorn",
    "ceiling-django": "constant JSON-RPC response from an async Django view behind the "
    "sample project's settings and middleware (as ours-prod), under daphne",
    "ceiling-django-stock": "the same under Django's own ASGI handler (not a2a_endpoint.asgi's): "
    "Django's middleware classes, a new thread per request",
    "ceiling-daphne": "constant JSON-RPC response, raw ASGI app, under daphne",
    "ceiling-uvicorn": "constant JSON-RPC response, raw ASGI app, under uvicorn",
}


def pinned(command: list[str], core: int = SERVER_CORE) -> list[str]:
    """``command`` run on one core (its threads and children inherit the affinity)."""
    return ["taskset", "-c", str(core), *command]


def pin_client() -> None:
    """Pin this process (the load generator) to the client core."""
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > CLIENT_CORE:
        os.sched_setaffinity(0, {CLIENT_CORE})


def process_group(pgid: int) -> list[int]:
    """The live processes of a process group (a Celery worker and its pool)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                found.append(int(entry.name))
    return found


def cpu_seconds(pid: int) -> float:
    """utime + stime of ``pid`` (all its threads), in seconds; 0 once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for {pid}")


@dataclass
class Target:
    """One server under test: its web process, helpers (Celery) and where it listens."""

    name: str
    web: ManagedProcess
    port: int
    helpers: list[ManagedProcess] = field(default_factory=list)
    database_url: str = ""
    #: Sent with every request the bench makes to it (``Authorization`` of a closed server).
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        return KINDS[self.name]

    @property
    def pid(self) -> int:
        assert self.web.process is not None
        return self.web.process.pid

    def pids(self, helpers: bool = True) -> list[int]:
        pids = [self.pid]
        if helpers:
            for helper in self.helpers:
                assert helper.process is not None
                pids += process_group(helper.process.pid)
        return pids

    def cpu(self, helpers: bool = True) -> float:
        return sum(cpu_seconds(pid) for pid in self.pids(helpers))


@dataclass
class Services:
    """PostgreSQL and Redis of this run: their URLs and the names to remove afterwards."""

    postgres_url: str
    redis_url: str
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:10])
    databases: list[str] = field(default_factory=list)

    @property
    def redis_prefix(self) -> str:
        return f"a2a-bench-{self.run_id}"

    def _admin(self) -> psycopg.Connection:
        return psycopg.connect(with_database(self.postgres_url, "postgres"), autocommit=True)

    def create_database(self, suffix: str) -> str:
        name = f"a2a_bench_{self.run_id}_{suffix}"
        with self._admin() as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        self.databases.append(name)
        return with_database(self.postgres_url, name)

    def cleanup(self) -> None:
        with contextlib.suppress(Exception), self._admin() as conn:
            for name in self.databases:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        with contextlib.suppress(Exception):
            import redis

            client = redis.Redis.from_url(self.redis_url)
            keys = list(client.scan_iter(match=f"{self.redis_prefix}*", count=1000))
            for start in range(0, len(keys), 500):
                client.delete(*keys[start : start + 500])
            client.close()


def with_database(url: str, name: str) -> str:
    base, _, _ = url.rpartition("/")
    return f"{base}/{name}"


def _secret() -> str:
    return f"bench-only-{uuid.uuid4().hex}"


def _clean_environ() -> dict[str, str]:
    """This environment without the variables that switch project.settings to production."""
    drop = {"DATABASE_URL", "REDIS_URL", "A2A_EXECUTION_BACKEND", "DJANGO_SETTINGS_MODULE"}
    return {key: value for key, value in os.environ.items() if key not in drop}


def ours_env(
    services: Services,
    database_url: str | None,
    workdir: Path,
    name: str,
    *,
    open_endpoint: bool = True,
) -> dict[str, str]:
    """bench.settings, as deploy/env.example configures the project, DEBUG off.

    Open to anonymous callers (``A2A_OPEN_ENDPOINT=1``; with DEBUG off the project requires a
    token or session otherwise) unless ``open_endpoint`` is false.
    """
    extra = {
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": _secret(),
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
        "A2A_OPEN_ENDPOINT": "1" if open_endpoint else "0",
        # A prefix per server: each server's Celery worker takes only its own jobs.
        "BENCH_REDIS_PREFIX": f"{services.redis_prefix}-{name}",
    }
    if database_url:
        extra |= {
            "DATABASE_URL": database_url,
            "REDIS_URL": services.redis_url,
            "A2A_EXECUTION_BACKEND": "celery",
        }
    else:
        extra["A2A_DEMO_DB"] = str(workdir / "embedded.sqlite3")
    env = django_env("bench.settings", **extra)
    if not database_url:
        for key in ("DATABASE_URL", "REDIS_URL", "A2A_EXECUTION_BACKEND"):
            env.pop(key, None)
    return env


#: ``manage.py shell -c``: the run's caller, a user with the DRF token in ``BENCH_TOKEN``.
CREATE_CALLER = """
import os
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token
user = get_user_model().objects.create_user("bench-caller")
Token.objects.create(user=user, key=os.environ["BENCH_TOKEN"])
"""


def create_caller(env: dict[str, str]) -> dict[str, str]:
    """A user and a DRF token for it in ``env``'s database; the headers that authenticate."""
    key = secrets.token_hex(20)  # 40 characters, as DRF's Token.generate_key
    run_django(["shell", "-c", CREATE_CALLER], {**env, "BENCH_TOKEN": key}, timeout=120)
    return {"Authorization": f"Bearer {key}"}


def _daphne(
    name: str, application: str, env: dict[str, str], log_dir: Path, ready: str
) -> DaphneServer:
    server = DaphneServer(
        application,
        env=env,
        name=name,
        ready_path=ready,
        backlog=4096,  # 1,000 streams connect at once in the fan-out scenario
        log_dir=log_dir,
        startup_timeout=60,
    )
    # Verbosity 0: no access log line per request (uvicorn runs with --no-access-log too).
    server.command = pinned([*server.command[:-1], "-v", "0", server.command[-1]])
    return server


def _uvicorn(
    name: str, application: str, env: dict[str, str], log_dir: Path
) -> tuple[ManagedProcess, int]:
    port = free_port()
    # The pure-Python stack (h11, asyncio loop), as daphne is: uvloop/httptools are not
    # installed in this venv (installing them would change every other suite's uvicorn).
    command = pinned(
        [
            sys.executable,
            "-m",
            "uvicorn",
            application,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--no-access-log",
            "--log-level",
            "warning",
            "--loop",
            "asyncio",
            "--http",
            "h11",
            "--backlog",
            "4096",
        ]
    )
    process = ManagedProcess(
        name,
        command,
        env=env,
        ready=http_ready(f"http://127.0.0.1:{port}{CARD_PATH}"),
        log_dir=log_dir,
        startup_timeout=60,
    )
    return process, port


def _celery_worker(env: dict[str, str], services: Services, log_dir: Path) -> ManagedProcess:
    nodename = f"bench-{services.run_id}-{env['BENCH_REDIS_PREFIX'][-12:]}@%h"
    command = pinned(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "project",
            "worker",
            "-P",
            "prefork",
            "-c",
            "2",
            "-l",
            "info",
            "-n",
            nodename,
            "--without-mingle",
            "--without-gossip",
        ]
    )
    worker = ManagedProcess("celery", command, env=env, log_dir=log_dir, startup_timeout=60)
    worker.ready = lambda: " ready." in worker.log_text(limit=1_000_000)
    return worker


def build_target(name: str, services: Services, workdir: Path) -> Target:
    """Prepare (databases, migrations) and describe ``name``; ``start`` runs it."""
    log_dir = workdir / name
    log_dir.mkdir(parents=True, exist_ok=True)
    if name in {"ours-prod", "ours-prod-token", "ours-embedded"}:
        database_url = None
        if name != "ours-embedded":
            database_url = services.create_database("ours" if name == "ours-prod" else "ours_token")
        token = name == "ours-prod-token"
        env = ours_env(services, database_url, log_dir, name, open_endpoint=not token)
        run_django(["migrate", "--noinput"], env, timeout=180)
        headers = create_caller(env) if token else {}
        web = _daphne(name, "project.asgi:application", env, log_dir, CARD_PATH)
        helpers = [_celery_worker(env, services, log_dir)] if database_url else []
        return Target(name, web, web.port, helpers, database_url or "", headers)
    if name in {"sdk-sql", "sdk-memory"}:
        env = {**_clean_environ(), "PYTHONUNBUFFERED": "1"}
        database_url = ""
        if name == "sdk-sql":
            database_url = services.create_database("sdk")
            env["BENCH_SDK_DB"] = database_url.replace("postgres://", "postgresql+asyncpg://", 1)
        process, port = _uvicorn(name, "bench.sdk_server:app", env, log_dir)
        env["BENCH_BASE_URL"] = f"http://127.0.0.1:{port}"
        process.env = env
        return Target(name, process, port, [], database_url)
    if name in ("ceiling-django", "ceiling-django-stock"):
        env = ours_env(services, services.create_database(name.replace("-", "_")), log_dir, name)
        env["DJANGO_SETTINGS_MODULE"] = "bench.ceiling_django"
        app = (
            "bench.stock_asgi:application"
            if name.endswith("-stock")
            else "project.asgi:application"
        )
        web = _daphne(name, app, env, log_dir, "/")
        return Target(name, web, web.port)
    if name == "ceiling-daphne":
        web = _daphne(name, "bench.ceiling:application", _clean_environ(), log_dir, "/")
        return Target(name, web, web.port)
    if name == "ceiling-uvicorn":
        process, port = _uvicorn(name, "bench.ceiling:application", _clean_environ(), log_dir)
        process.ready = http_ready(f"http://127.0.0.1:{port}/")
        return Target(name, process, port)
    raise ValueError(f"unknown server {name!r}")


@contextlib.contextmanager
def started(targets: list[Target]) -> Iterator[list[Target]]:
    """Start every target (helpers first); stop all of them however the block ends."""
    with contextlib.ExitStack() as stack:
        for target in targets:
            for helper in target.helpers:
                stack.enter_context(helper)
            stack.enter_context(target.web)
        yield targets


def add_service_arguments(parser: Any) -> None:
    """``--postgres-url`` and ``--redis-url`` (``BENCH_POSTGRES_URL``, ``BENCH_REDIS_URL``):
    the services every bench command that starts servers needs."""
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get("BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres"),
    )
    parser.add_argument(
        "--redis-url", default=os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
    )
