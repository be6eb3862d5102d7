"""SQL statements per A2A call: ``python -m bench.queries`` (embedded settings, a fresh SQLite).

Counts every statement Django executes, from any thread, while one call is served through
Django's test client (async view, sync ORM in threads), so the hot spots of a profile can be
read against how many round trips each call makes. The agent runs inline; the blocking
SendMessage count therefore includes the job's own statements.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

CALLS = ("SendMessage returnImmediately", "SendMessage blocking", "GetTask", "ListTasks")


@contextmanager
def counting() -> Iterator[list[str]]:
    """Every SQL statement run (any thread) while the block runs."""
    from django.db.backends import utils

    seen: list[str] = []
    lock = threading.Lock()
    original = utils.CursorWrapper._execute

    def execute(self: Any, sql: str, *args: Any, **kwargs: Any) -> Any:
        with lock:
            seen.append(sql.split(" ", 1)[0].upper())
            if os.environ.get("BENCH_QUERIES_SQL"):
                print("   ", sql[:160])
        return original(self, sql, *args, **kwargs)

    utils.CursorWrapper._execute = execute  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        utils.CursorWrapper._execute = original  # type: ignore[method-assign]


def main() -> int:
    workdir = tempfile.mkdtemp(prefix="a2a-bench-queries-")
    for name in ("DATABASE_URL", "REDIS_URL", "A2A_EXECUTION_BACKEND"):
        os.environ.pop(name, None)
    os.environ.update(
        DJANGO_SETTINGS_MODULE="bench.settings",
        A2A_DEMO_DB=os.path.join(workdir, "queries.sqlite3"),
        DJANGO_DEBUG="0",
        A2A_OPEN_ENDPOINT="1",  # anonymous calls, as before the endpoint required a caller
        DJANGO_SECRET_KEY="bench-queries-only",
        DJANGO_ALLOWED_HOSTS="testserver",
    )
    import django

    django.setup()
    from django.core.management import call_command
    from django.test import Client

    from bench.scenarios import message

    call_command("migrate", verbosity=0)
    client = Client(headers={"A2A-Version": "1.0"})

    def rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        response = client.post("/a2a/", body, content_type="application/json")
        if response.status_code != 200:
            raise RuntimeError(f"{method}: HTTP {response.status_code} {response.content[:300]!r}")
        payload = response.json()
        if "result" not in payload:
            raise RuntimeError(f"{method} failed: {payload}")
        return payload["result"]

    task_id = rpc("SendMessage", {"message": message("echo warm-up")})["task"]["id"]
    calls: dict[str, Callable[[], Any]] = {
        CALLS[0]: lambda: rpc(
            "SendMessage",
            {"message": message("echo q"), "configuration": {"returnImmediately": True}},
        ),
        CALLS[1]: lambda: rpc("SendMessage", {"message": message("echo q")}),
        CALLS[2]: lambda: rpc("GetTask", {"id": task_id, "historyLength": 1}),
        CALLS[3]: lambda: rpc("ListTasks", {"pageSize": 20}),
    }
    for name, call in calls.items():
        with counting() as seen:
            call()
        kinds = {kind: seen.count(kind) for kind in sorted(set(seen))}
        print(f"{name}: {len(seen)} statements {kinds}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
