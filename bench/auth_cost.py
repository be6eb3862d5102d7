"""What authenticating a request costs, step by step: ``python -m bench.auth_cost``.

In-process, on a fresh PostgreSQL database (``--postgres-url``, dropped at the end) with
``bench.settings`` as ``ours-prod`` runs them (the project's ``BearerTokenAuthentication`` and
``SessionAuthentication``), one user and one DRF token. Each request is a POST through the
session and authentication middleware (a lazy ``request.user``, as in the server). Times, per
call, the gate ``a2a_endpoint.auth`` runs before any method:

- ``_check`` open (``AllowAny``, no ``Authorization``: both authenticators find nothing) and
  with the token (``IsAuthenticated``, ``Authorization: Bearer <key>``), and what the latter
  is made of: DRF's ``Request`` and the authenticators' construction (``_drf_request``),
  ``Token.objects.select_related("user").get(key=...)`` (what ``TokenAuthentication`` runs)
  and the ORM's building and compiling of that query alone, the same SQL through a cursor,
  alone and with the two model instances built from its row (``from_db``: what a lookup that
  kept its compiled SQL would cost), and a ``SELECT 1`` round trip;
- ``authenticate()`` open and with the token, from an event loop: the thread hop included
  (the project's endpoint has authentication classes, so even the open one hops), and the
  hop alone (``sync_to_async(noop, thread_sensitive=True)``).

CPU is this process's (every thread: the hop's too) from ``time.process_time``, wall from
``perf_counter``; PostgreSQL's own CPU is not in either. Medians of ``--repeat`` runs of
``--number`` calls, the variants taking turns run by run. The connection stays open across
calls (inside a request the token query and the method's queries share one connection).
Run it pinned to one core (``taskset -c 0``) to compare two trees.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from bench.servers import Services, add_service_arguments

KEY = secrets.token_hex(20)
#: Prepares a run (its requests made before the clock starts) and returns it.
Prepare = Callable[[], Callable[[], None]]


def _configure(database_url: str) -> None:
    """bench.settings on PostgreSQL, closed (the token server's), DEBUG off; no Redis."""
    for name in ("REDIS_URL", "A2A_EXECUTION_BACKEND", "A2A_SERVER_PROCESS"):
        os.environ.pop(name, None)
    os.environ.update(
        DJANGO_SETTINGS_MODULE="bench.settings",
        DATABASE_URL=database_url,
        DJANGO_DEBUG="0",
        A2A_OPEN_ENDPOINT="0",
        DJANGO_SECRET_KEY="bench-only-" + "x" * 40,
        DJANGO_ALLOWED_HOSTS="testserver",
    )


def _requests(count: int, token: bool) -> list[Any]:
    """``count`` fresh POSTs to /a2a/ past the session and authentication middleware."""
    from django.contrib.auth.middleware import AuthenticationMiddleware
    from django.contrib.sessions.middleware import SessionMiddleware
    from django.test import RequestFactory

    factory = RequestFactory()
    headers = {"A2A-Version": "1.0"} | ({"Authorization": f"Bearer {KEY}"} if token else {})
    session = SessionMiddleware(lambda request: None)
    authentication = AuthenticationMiddleware(lambda request: None)
    made = []
    for _ in range(count):
        request = factory.post("/a2a/", b"{}", content_type="application/json", headers=headers)
        session.process_request(request)
        authentication.process_request(request)
        made.append(request)
    return made


def _timed(run: Callable[[], None]) -> tuple[float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    run()
    return time.process_time() - cpu, time.perf_counter() - wall


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.auth_cost", description=__doc__)
    parser.add_argument("--number", type=int, default=2000, help="calls per run")
    parser.add_argument("--repeat", type=int, default=7, help="runs per variant")
    add_service_arguments(parser)
    args = parser.parse_args(argv)
    services = Services(args.postgres_url, args.redis_url)
    try:
        _configure(services.create_database("auth_cost"))
        return _run(args.number, args.repeat)
    finally:
        from django.db import connections

        connections.close_all()
        services.cleanup()


def _setup() -> dict[str, Any]:
    """Migrate, create the caller and its token; what the variants need."""
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from rest_framework.authtoken.models import Token

    call_command("migrate", verbosity=0)
    user_model = get_user_model()
    Token.objects.create(user=user_model.objects.create_user("bench-caller"), key=KEY)
    sql, params = Token.objects.select_related("user").filter(key=KEY).query.sql_with_params()
    return {
        "Token": Token,
        "User": user_model,
        "sql": sql,
        "params": params,
        "token_fields": [field.attname for field in Token._meta.concrete_fields],
        "user_fields": [field.attname for field in user_model._meta.concrete_fields],
    }


def _per_request(token: bool, call: Callable[[Any], Any], number: int) -> Prepare:
    """``call(request)`` on ``number`` fresh requests (made before the clock starts)."""

    def prepare() -> Callable[[], None]:
        made = _requests(number, token)
        return lambda: [call(request) for request in made] and None

    return prepare


def _repeated(call: Callable[[], Any], number: int) -> Prepare:
    return lambda: lambda: [call() for _ in range(number)] and None


def _from_loop(token: bool, coroutine: Callable[[Any], Any], number: int) -> Prepare:
    """``await coroutine(request)`` on ``number`` fresh requests, in one event loop."""

    def prepare() -> Callable[[], None]:
        made = _requests(number, token)

        async def calls() -> None:
            for request in made:
                await coroutine(request)

        return lambda: asyncio.run(calls())

    return prepare


def _gate(request: Any) -> None:
    from a2a_endpoint import auth

    auth._check(request)
    if not request.user.is_authenticated and "HTTP_AUTHORIZATION" in request.META:
        raise RuntimeError("the token did not authenticate")


def _queries(case: dict[str, Any]) -> dict[str, Callable[[], None]]:
    """The token lookup and its parts, each a no-argument call."""
    from django.db import connection

    token_model, user_model = case["Token"], case["User"]
    count = len(case["token_fields"])

    def orm() -> None:
        token_model.objects.select_related("user").get(key=KEY)

    def compile_only() -> None:
        query = token_model.objects.select_related("user").filter(key=KEY).query
        query.set_limits(high=21)  # as QuerySet.get() does (MAX_GET_RESULTS)
        query.get_compiler(using="default").as_sql()

    def raw() -> None:
        with connection.cursor() as cursor:
            cursor.execute(case["sql"], case["params"])
            cursor.fetchall()

    def kept_sql() -> None:
        with connection.cursor() as cursor:
            cursor.execute(case["sql"], case["params"])
            row = cursor.fetchone()
        token = token_model.from_db("default", case["token_fields"], row[:count])
        token.user = user_model.from_db("default", case["user_fields"], row[count:])

    def select_1() -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchall()

    return {
        "orm": orm,
        "compile": compile_only,
        "raw": raw,
        "kept_sql": kept_sql,
        "select_1": select_1,
    }


def _variants(case: dict[str, Any], number: int) -> list[tuple[str, Prepare, bool]]:
    """(name, prepare → run, on the open endpoint's settings?)"""
    from asgiref.sync import sync_to_async

    from a2a_endpoint import auth

    query = _queries(case)
    hop = sync_to_async(lambda: None, thread_sensitive=True)
    return [
        ("_check, open (AllowAny, no Authorization)", _per_request(False, _gate, number), True),
        ("_check, DRF token (IsAuthenticated)", _per_request(True, _gate, number), False),
        (
            "  _drf_request: DRF Request + authenticators",
            _per_request(True, lambda r: auth._drf_request(auth._Gate(), r), number),
            False,
        ),
        (
            "  Token.objects.select_related('user').get(key=...)",
            _repeated(query["orm"], number),
            False,
        ),
        (
            "    of which the ORM builds and compiles the query",
            _repeated(query["compile"], number),
            False,
        ),
        ("  the same SQL, cursor.execute + fetchall", _repeated(query["raw"], number), False),
        (
            "  the same SQL + Token/User.from_db (SQL kept)",
            _repeated(query["kept_sql"], number),
            False,
        ),
        ("  SELECT 1 round trip", _repeated(query["select_1"], number), False),
        (
            "authenticate(), open, from an event loop",
            _from_loop(False, auth.authenticate, number),
            True,
        ),
        (
            "authenticate(), DRF token, from an event loop",
            _from_loop(True, auth.authenticate, number),
            False,
        ),
        (
            "  thread hop alone: sync_to_async(noop)",
            _from_loop(False, lambda r: hop(), number),
            False,
        ),
    ]


def _run(number: int, repeat: int) -> int:
    from django.conf import settings
    from django.test import override_settings

    case = _setup()
    opened = override_settings(
        A2A_ENDPOINT={
            **settings.A2A_ENDPOINT,
            "PERMISSION_CLASSES": ["rest_framework.permissions.AllowAny"],
        }
    )
    variants = _variants(case, number)
    cpu: dict[str, list[float]] = {name: [] for name, _, _ in variants}
    wall: dict[str, list[float]] = {name: [] for name, _, _ in variants}
    for _ in range(repeat):
        for name, prepare, open_endpoint in variants:
            if open_endpoint:
                opened.enable()
            try:
                spent_cpu, spent_wall = _timed(prepare())
            finally:
                if open_endpoint:
                    opened.disable()
            cpu[name].append(1e6 * spent_cpu / number)
            wall[name].append(1e6 * spent_wall / number)
    print(f"µs per call, median of {repeat} runs of {number} calls (min-max CPU):")
    print(f"{'':56} {'CPU':>8} {'wall':>8}")
    for name, _, _ in variants:
        print(
            f"{name:56} {statistics.median(cpu[name]):8.1f} {statistics.median(wall[name]):8.1f}"
            f"   ({min(cpu[name]):.1f}-{max(cpu[name]):.1f})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
