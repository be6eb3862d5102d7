"""project/settings.py under different environments, its system checks, and ``/healthz``
under daphne (the view itself: tests/test_health.py).

Settings are imported in a subprocess per environment (they are read once, at import). The
production mode uses the real PostgreSQL and Redis of the test run.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psycopg
import pytest
import redis

from tests.integration.servers import DaphneServer, free_port

REPO_ROOT = Path(__file__).resolve().parents[1]
POSTGRES_URL = os.environ.get("A2A_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("A2A_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
SECRET = secrets.token_urlsafe(50)

DUMP_SETTINGS = """
import json, django
from django.conf import settings
django.setup()
names = [
    "DEBUG", "DATABASES", "CHANNEL_LAYERS", "A2A_ENDPOINT", "SECRET_KEY", "ALLOWED_HOSTS",
    "CSRF_TRUSTED_ORIGINS", "SECURE_PROXY_SSL_HEADER", "USE_X_FORWARDED_HOST", "STATIC_ROOT",
    "SESSION_COOKIE_SECURE", "CELERY_BROKER_URL", "CELERY_TASK_ACKS_LATE",
    "CELERY_TASK_REJECT_ON_WORKER_LOST", "CELERY_WORKER_PREFETCH_MULTIPLIER",
    "CELERY_BROKER_TRANSPORT_OPTIONS", "CELERY_TASK_IGNORE_RESULT",
    "CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP", "SERVER_GC_THRESHOLDS",
]
print(json.dumps({name: getattr(settings, name, None) for name in names}, default=str))
"""


def clean_env(**values: str) -> dict[str, str]:
    """This process's environment without any variable the project settings read."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DJANGO_", "A2A_", "DB_", "CELERY_", "DEMO_", "SERVER_"))
        and key not in {"DATABASE_URL", "REDIS_URL"}
    }
    return {**env, "DJANGO_SETTINGS_MODULE": "project.settings", **values}


def production_env(**values: str) -> dict[str, str]:
    """DEBUG off with a secret, the test run's PostgreSQL and Redis, then ``values``."""
    base = {
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": SECRET,
        "DATABASE_URL": POSTGRES_URL,
        "REDIS_URL": REDIS_URL,
    }
    return clean_env(**{**base, **values})


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def project_settings(env: dict[str, str]) -> dict[str, Any]:
    result = run(["-c", DUMP_SETTINGS], env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run(["manage.py", *args], env)


def closed_port() -> int:
    """A loopback port nothing listens on (the kernel just handed it out and it was closed)."""
    return free_port()


# --- settings per environment ---------------------------------------------------------------


def test_no_environment_needs_no_service() -> None:
    """`make run`: SQLite, the inline backend, the in-memory bus, DEBUG on."""
    settings = project_settings(clean_env())
    database = settings["DATABASES"]["default"]
    assert database["ENGINE"] == "django.db.backends.sqlite3"
    assert database["NAME"] == str(REPO_ROOT / "db.sqlite3")
    assert database["OPTIONS"]["transaction_mode"] == "IMMEDIATE"
    assert settings["A2A_ENDPOINT"]["EXECUTION_BACKEND"] == "inline"
    assert settings["A2A_ENDPOINT"]["EVENT_BUS"] == "memory"
    assert settings["CHANNEL_LAYERS"] is None
    assert settings["CELERY_BROKER_URL"] is None
    assert settings["DEBUG"] is True
    assert settings["ALLOWED_HOSTS"] == ["127.0.0.1", "localhost"]


def test_database_and_redis_urls_select_postgres_celery_and_channels() -> None:
    settings = project_settings(production_env())
    database = settings["DATABASES"]["default"]
    assert database["ENGINE"] == "django.db.backends.postgresql"
    # Celery workers and commands keep their connections (health-checked before reuse).
    assert database["CONN_MAX_AGE"] == 300
    assert database["CONN_HEALTH_CHECKS"] is True
    assert "pool" not in database["OPTIONS"]  # a pool must not cross the prefork fork
    assert database["OPTIONS"]["connect_timeout"] == 5
    layer = settings["CHANNEL_LAYERS"]["default"]
    assert layer["BACKEND"] == "channels_redis.core.RedisChannelLayer"
    (host,) = layer["CONFIG"]["hosts"]
    assert host["address"] == REDIS_URL
    # No socket timeout: idle receives must not time out (#422), and redis-py must not wrap
    # commands in asyncio.wait_for (a lost cancellation on Python 3.11).
    assert host["socket_timeout"] is None
    assert settings["CELERY_BROKER_URL"] == REDIS_URL
    assert settings["A2A_ENDPOINT"]["EXECUTION_BACKEND"] == "celery"
    assert settings["A2A_ENDPOINT"]["EVENT_BUS"] == "channels"


def test_the_asgi_server_pools_connections_instead_of_keeping_them() -> None:
    """ASGI: no persistent connections (they pile up per thread; docs/deployment.md)."""
    settings = project_settings(production_env(A2A_SERVER_PROCESS="asgi"))
    database = settings["DATABASES"]["default"]
    assert database["CONN_MAX_AGE"] == 0
    assert database["OPTIONS"]["pool"] == {"min_size": 2, "max_size": 10, "timeout": 10}
    explicit = project_settings(production_env(A2A_SERVER_PROCESS="asgi", DB_CONN_MAX_AGE="60"))
    assert explicit["DATABASES"]["default"]["CONN_MAX_AGE"] == 60
    assert "pool" not in explicit["DATABASES"]["default"]["OPTIONS"]


GC_OF_THE_ASGI_PROCESS = """
import gc, json
import project.asgi
print(json.dumps({"thresholds": gc.get_threshold(), "frozen": gc.get_freeze_count()}))
"""


def asgi_gc(env: dict[str, str]) -> dict[str, Any]:
    result = run(["-c", GC_OF_THE_ASGI_PROCESS], env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_the_asgi_server_collects_garbage_less_often_and_freezes_start_up_objects() -> None:
    """1,000 open streams: Python's default thresholds ran a 200 ms full collection every few
    updates (docs/deployment.md, "Garbage collection")."""
    default = asgi_gc(clean_env())
    assert default["thresholds"] == [20000, 10, 10]
    assert default["frozen"] > 10_000  # Django's apps, models and admin, loaded at start-up
    assert asgi_gc(clean_env(SERVER_GC_THRESHOLDS="5000"))["thresholds"][0] == 5000
    assert asgi_gc(clean_env(SERVER_GC_THRESHOLDS=" "))["thresholds"] == [20000, 10, 10]
    python = run(["-c", "import gc, json; print(json.dumps(gc.get_threshold()))"], clean_env())
    kept = asgi_gc(clean_env(SERVER_GC_THRESHOLDS="python"))["thresholds"]
    assert kept == json.loads(python.stdout)
    # Only the server process: a Celery worker or a command importing the settings keeps
    # Python's thresholds.
    assert project_settings(clean_env())["SERVER_GC_THRESHOLDS"] == [20000, 10, 10]
    worker = run(
        ["-c", "import django, gc, json; django.setup(); print(json.dumps(gc.get_threshold()))"],
        clean_env(),
    )
    assert json.loads(worker.stdout) == json.loads(python.stdout)


def test_celery_settings_for_leased_agent_jobs() -> None:
    settings = project_settings(production_env(CELERY_VISIBILITY_TIMEOUT="7200"))
    assert settings["CELERY_TASK_ACKS_LATE"] is True
    assert settings["CELERY_TASK_REJECT_ON_WORKER_LOST"] is True
    assert settings["CELERY_WORKER_PREFETCH_MULTIPLIER"] == 1
    assert settings["CELERY_BROKER_TRANSPORT_OPTIONS"] == {"visibility_timeout": 7200}
    assert settings["CELERY_TASK_IGNORE_RESULT"] is True
    assert settings["CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP"] is True


def test_redis_with_the_inline_backend() -> None:
    """Several daphnes running their own jobs still share events through Redis."""
    settings = project_settings(production_env(A2A_EXECUTION_BACKEND="inline"))
    assert settings["A2A_ENDPOINT"]["EXECUTION_BACKEND"] == "inline"
    assert settings["A2A_ENDPOINT"]["EVENT_BUS"] == "channels"


def test_proxy_hosts_and_static_root_from_the_environment() -> None:
    settings = project_settings(
        production_env(
            DJANGO_ALLOWED_HOSTS="agent.example.com, 127.0.0.1",
            DJANGO_CSRF_TRUSTED_ORIGINS="https://agent.example.com",
            DJANGO_STATIC_ROOT="/srv/static",
            DB_CONN_MAX_AGE="300",
        )
    )
    assert settings["DEBUG"] is False
    assert settings["SECRET_KEY"] == SECRET
    assert settings["ALLOWED_HOSTS"] == ["agent.example.com", "127.0.0.1"]
    assert settings["CSRF_TRUSTED_ORIGINS"] == ["https://agent.example.com"]
    assert settings["SECURE_PROXY_SSL_HEADER"] == ["HTTP_X_FORWARDED_PROTO", "https"]
    assert settings["USE_X_FORWARDED_HOST"] is True
    assert settings["SESSION_COOKIE_SECURE"] is True
    assert settings["STATIC_ROOT"] == "/srv/static"
    assert settings["DATABASES"]["default"]["CONN_MAX_AGE"] == 300


def test_a2a_overrides_from_the_environment() -> None:
    settings = project_settings(
        clean_env(
            A2A_BASE_URL="https://agent.example.com",
            A2A_BLOCKING_TIMEOUT="2.5",
            A2A_CANCEL_GRACE_PERIOD="0.2",
            A2A_JOB_LEASE="1.5",
            A2A_LOST_JOB_POLICY="fail",
            A2A_LOST_JOB_MAX_RETRIES="3",
            A2A_SSE_KEEPALIVE="0.5",
        )
    )
    a2a = settings["A2A_ENDPOINT"]
    assert a2a["BASE_URL"] == "https://agent.example.com"
    assert a2a["BLOCKING_TIMEOUT"] == 2.5
    assert a2a["CANCEL_GRACE_PERIOD"] == 0.2
    assert a2a["JOB_LEASE"] == 1.5
    assert a2a["LOST_JOB_POLICY"] == "fail"
    assert a2a["LOST_JOB_MAX_RETRIES"] == 3
    assert a2a["SSE_KEEPALIVE"] == 0.5


def test_no_override_keeps_the_app_defaults() -> None:
    a2a = project_settings(clean_env())["A2A_ENDPOINT"]
    assert set(a2a) == {
        "AGENT",
        "CARD",
        "EXECUTION_BACKEND",
        "EVENT_BUS",
        "PERMISSION_CLASSES",
        "EXTENDED_CARD",
        "PUSH_ALLOW_HTTP",
        "PUSH_ALLOW_PRIVATE_NETWORKS",
    }
    # The demo's webhook receiver is http on loopback: allowed while DEBUG is on (the default).
    assert (a2a["PUSH_ALLOW_HTTP"], a2a["PUSH_ALLOW_PRIVATE_NETWORKS"]) == (True, True)


def test_with_debug_off_push_webhooks_must_be_public_https() -> None:
    env = clean_env(DJANGO_DEBUG="0", DJANGO_SECRET_KEY="x" * 50)
    a2a = project_settings(env)["A2A_ENDPOINT"]
    assert (a2a["PUSH_ALLOW_HTTP"], a2a["PUSH_ALLOW_PRIVATE_NETWORKS"]) == (False, False)
    env = clean_env(DJANGO_DEBUG="0", DJANGO_SECRET_KEY="x" * 50, A2A_PUSH_ALLOW_HTTP="1")
    assert project_settings(env)["A2A_ENDPOINT"]["PUSH_ALLOW_HTTP"] is True


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"DJANGO_DEBUG": "0"}, "Set DJANGO_SECRET_KEY when DJANGO_DEBUG is off."),
        ({"A2A_JOB_LEASE": "soon"}, "A2A_JOB_LEASE='soon' is not a valid float."),
        ({"DB_CONN_MAX_AGE": "1.5", "DATABASE_URL": POSTGRES_URL}, "DB_CONN_MAX_AGE='1.5'"),
        ({"A2A_LOST_JOB_POLICY": "ignore"}, "A2A_LOST_JOB_POLICY must be 'retry' or 'fail'."),
        ({"SERVER_GC_THRESHOLDS": "lots"}, "SERVER_GC_THRESHOLDS='lots' must be 1 to 3"),
        ({"SERVER_GC_THRESHOLDS": "1,2,3,4"}, "SERVER_GC_THRESHOLDS='1,2,3,4' must be 1 to 3"),
        ({"SERVER_GC_THRESHOLDS": "700,-1"}, "SERVER_GC_THRESHOLDS='700,-1' must be 1 to 3"),
    ],
)
def test_misconfiguration_stops_at_import(env: dict[str, str], message: str) -> None:
    result = run(["-c", DUMP_SETTINGS], clean_env(**env))
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert message in result.stderr


def test_the_card_advertises_a2a_base_url() -> None:
    script = (
        "import django, json; django.setup()\n"
        "from django.test import Client\n"
        "card = Client().get('/.well-known/agent-card.json', HTTP_HOST='127.0.0.1').json()\n"
        "print(card['supportedInterfaces'][0]['url'])\n"
    )
    result = run(["-c", script], clean_env(A2A_BASE_URL="https://agent.example.com"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "https://agent.example.com/a2a/"


# --- system checks in both modes ------------------------------------------------------------


def test_check_passes_without_services() -> None:
    result = manage("check", "--fail-level", "WARNING", env=clean_env())
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_check_deploy_passes_in_production_mode(postgres_url: str, redis_url: str) -> None:
    env = production_env(DATABASE_URL=postgres_url, REDIS_URL=redis_url)
    result = manage(
        "check", "--deploy", "--database", "default", "--fail-level", "WARNING", env=env
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_celery_without_redis_is_e009() -> None:
    """The troubleshooting entry of docs/deployment.md: the in-memory bus cannot reach workers."""
    result = manage("check", env=clean_env(A2A_EXECUTION_BACKEND="celery"))
    assert result.returncode != 0
    assert "a2a_endpoint.E009" in result.stderr


def test_celery_on_sqlite_warns_w001() -> None:
    result = manage("check", env=clean_env(REDIS_URL=REDIS_URL))
    assert result.returncode == 0, result.stderr
    assert "a2a_endpoint.W001" in result.stderr


# --- /healthz of daphne serving project.settings in production mode -------------------------


def daphne_health(env: dict[str, str], tmp_path: Path) -> tuple[int, dict[str, str]]:
    with DaphneServer("project.asgi:application", env=env, log_dir=tmp_path) as server:
        try:
            with urllib.request.urlopen(server.url("/healthz"), timeout=15) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())


@pytest.mark.integration
def test_daphne_health_ok_with_postgres_and_redis(
    postgres_url: str, redis_url: str, tmp_path: Path
) -> None:
    env = production_env(DATABASE_URL=postgres_url, REDIS_URL=redis_url, PYTHONUNBUFFERED="1")
    assert daphne_health(env, tmp_path) == (
        200,
        {"status": "ok", "database": "ok", "channel_layer": "ok", "broker": "ok"},
    )


@pytest.mark.integration
def test_daphne_health_503_with_redis_down(postgres_url: str, tmp_path: Path) -> None:
    env = production_env(
        DATABASE_URL=postgres_url,
        REDIS_URL=f"redis://127.0.0.1:{closed_port()}/0",
        PYTHONUNBUFFERED="1",
    )
    assert daphne_health(env, tmp_path) == (
        503,
        # REDIS_URL is the Celery broker too.
        {"status": "error", "database": "ok", "channel_layer": "error", "broker": "error"},
    )


@pytest.mark.integration
def test_daphne_health_503_with_postgres_down(redis_url: str, tmp_path: Path) -> None:
    env = production_env(
        DATABASE_URL=f"postgres://postgres@127.0.0.1:{closed_port()}/nowhere",
        REDIS_URL=redis_url,
        PYTHONUNBUFFERED="1",
    )
    assert daphne_health(env, tmp_path) == (
        503,
        {"status": "error", "database": "error", "channel_layer": "ok", "broker": "ok"},
    )


def connections_named(application_name: str) -> int:
    with psycopg.connect(POSTGRES_URL, connect_timeout=5) as admin:
        row = admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
            [application_name],
        ).fetchone()
    return row[0]


@pytest.mark.integration
@pytest.mark.parametrize(("pool_size", "most"), [("0", 0), ("4", 4)])
def test_daphne_database_connections_stay_bounded(
    postgres_url: str, redis_url: str, tmp_path: Path, pool_size: str, most: int
) -> None:
    """Under ASGI, persistent connections pile up per thread: the default closes them after
    each request, into a bounded pool (DB_POOL_SIZE) or for good (DB_POOL_SIZE=0)."""
    name = f"a2a-conn-{secrets.token_hex(4)}"
    env = production_env(
        DATABASE_URL=f"{postgres_url}?application_name={name}", DB_POOL_SIZE=pool_size
    )
    with DaphneServer("project.asgi:application", env=env, log_dir=tmp_path) as server:

        def probe(_: int) -> int:
            with urllib.request.urlopen(server.url("/healthz"), timeout=15) as response:
                return response.status

        with ThreadPoolExecutor(max_workers=8) as pool:
            assert set(pool.map(probe, range(40))) == {200}
        # Django closes a request's connection just after the response is sent: allow it a
        # moment. Persistent ones would stay (CONN_MAX_AGE seconds), far past the deadline.
        deadline = time.monotonic() + 5
        while (left := connections_named(name)) > most and time.monotonic() < deadline:
            time.sleep(0.1)
        assert left <= most


# --- services -------------------------------------------------------------------------------


def service_missing(message: str) -> None:
    if os.environ.get("A2A_REQUIRE_SERVICES") == "1":
        pytest.fail(f"{message} (A2A_REQUIRE_SERVICES=1)", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="module")
def postgres_url() -> str:
    """The test run's PostgreSQL (A2A_TEST_POSTGRES_URL): the settings only connect to it."""
    try:
        psycopg.connect(POSTGRES_URL, connect_timeout=5).close()
    except psycopg.OperationalError as exc:
        service_missing(f"PostgreSQL is not reachable at {POSTGRES_URL}: {exc}")
    return POSTGRES_URL


@pytest.fixture(scope="module")
def redis_url() -> str:
    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2, socket_timeout=2)
    try:
        client.ping()
    except redis.RedisError as exc:
        service_missing(f"Redis is not reachable at {REDIS_URL}: {exc}")
    finally:
        client.close()
    return REDIS_URL


ALLOW_ANY = "rest_framework.permissions.AllowAny"
IS_AUTHENTICATED = "rest_framework.permissions.IsAuthenticated"


@pytest.mark.parametrize(
    ("values", "permission"),
    [
        ({}, ALLOW_ANY),  # make run: DEBUG on, no login
        ({"DJANGO_DEBUG": "0", "DJANGO_SECRET_KEY": "x" * 50}, IS_AUTHENTICATED),
        ({"A2A_OPEN_ENDPOINT": "0"}, IS_AUTHENTICATED),
        ({"DJANGO_DEBUG": "0", "DJANGO_SECRET_KEY": "x" * 50, "A2A_OPEN_ENDPOINT": "1"}, ALLOW_ANY),
    ],
)
def test_the_demo_is_open_only_while_debug_is_on(values: dict[str, str], permission: str) -> None:
    a2a = project_settings(clean_env(**values))["A2A_ENDPOINT"]
    assert a2a["PERMISSION_CLASSES"] == [permission]


def test_an_open_endpoint_with_debug_off_is_warned_about() -> None:
    env = clean_env(DJANGO_DEBUG="0", DJANGO_SECRET_KEY="x" * 50, A2A_OPEN_ENDPOINT="1")
    result = manage("check", env=env)
    assert "a2a_endpoint.W010" in result.stderr + result.stdout
    closed = manage("check", env=clean_env(DJANGO_DEBUG="0", DJANGO_SECRET_KEY="x" * 50))
    assert "W010" not in closed.stderr + closed.stdout


def test_drf_create_token_gives_a_token_the_closed_demo_accepts(tmp_path: Path) -> None:
    env = clean_env(A2A_OPEN_ENDPOINT="0", A2A_DEMO_DB=str(tmp_path / "db.sqlite3"))
    assert manage("migrate", "--noinput", env=env).returncode == 0
    create_user = "from django.contrib.auth.models import User; User.objects.create_user('ada')"
    assert manage("shell", "-c", create_user, env=env).returncode == 0
    created = manage("drf_create_token", "ada", env=env)
    assert created.returncode == 0, created.stderr
    token = created.stdout.split()[2]
    call = (
        "import json; from django.test import Client; c = Client(); "
        "body = json.dumps({'jsonrpc': '2.0', 'id': 1, 'method': 'ListTasks', 'params': {}}); "
        f"print(c.post('/a2a/', body, content_type='application/json', "
        f"HTTP_AUTHORIZATION='Bearer {token}').status_code, "
        "c.post('/a2a/', body, content_type='application/json').status_code)"
    )
    result = manage("shell", "-c", call, env={**env, "DJANGO_ALLOWED_HOSTS": "testserver"})
    assert result.stdout.split()[-2:] == ["200", "401"], result.stderr
