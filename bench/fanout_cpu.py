"""CPU of one event to N SubscribeToTask streams, in-process: ``python -m bench.fanout_cpu``.

The fan-out scenario of ``bench.run`` measures delivery through daphne, whose Twisted
transport costs more per write than our code does. This tool isolates our part: N streams
through Django's ASGI application (the sample project's settings and middleware, the bench
echo agent, embedded SQLite and the in-memory bus) with in-memory ``receive``/``send`` and no
sockets. Each round writes one status update from a thread, as an agent's updater does, and
times until every stream has sent it. It prints the median CPU time of the process per event
(all threads) and the median wall time, over ``--events`` rounds; run it pinned to one core
(``taskset -c 0``) to compare two trees.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent


def _configure(workdir: Path) -> None:
    """bench.settings on the embedded default (no DATABASE_URL/REDIS_URL), DEBUG off."""
    for name in ("DATABASE_URL", "REDIS_URL", "A2A_EXECUTION_BACKEND"):
        os.environ.pop(name, None)
    os.environ.update(
        DJANGO_SETTINGS_MODULE="bench.settings",
        A2A_DEMO_DB=str(workdir / "fanout.sqlite3"),
        DJANGO_DEBUG="0",
        A2A_OPEN_ENDPOINT="1",  # anonymous calls, as before the endpoint required a caller
        DJANGO_SECRET_KEY="bench-only-" + "x" * 40,
        DJANGO_ALLOWED_HOSTS="127.0.0.1",
    )
    sys.path.insert(0, str(REPO_ROOT))


def _scope() -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/a2a/",
        "raw_path": b"/a2a/",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"content-type", b"application/json"), (b"host", b"127.0.0.1")],
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 80),
    }


def _body(method: str, params: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()


def _call(app: Any, body: bytes, on_body: Callable[[bytes], None]) -> asyncio.Event:
    """Start one request; the returned event ends it (the client disconnects)."""
    gone = asyncio.Event()
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            on_body(message.get("body", b""))
            if not message.get("more_body"):
                gone.set()

    task = asyncio.ensure_future(app(_scope(), receive, send))
    task.add_done_callback(lambda _: gone.set())
    return gone


async def measure(streams: int, events: int) -> tuple[list[float], list[float]]:
    from django.core.asgi import get_asgi_application

    from a2a_endpoint import types
    from a2a_endpoint.execution import runtime
    from a2a_endpoint.lifecycle import TaskState

    app = get_asgi_application()
    chunks: list[bytes] = []
    hold = {"message": {"role": "ROLE_USER", "messageId": "hold-1", "parts": [{"text": "hold"}]}}
    await _call(app, _body("SendMessage", hold), chunks.append).wait()
    task_id = json.loads(b"".join(chunks))["result"]["task"]["id"]

    opened = 0
    all_open = asyncio.Event()
    marker = [b""]
    got = 0
    all_got = asyncio.Event()

    def on_body(chunk: bytes) -> None:
        nonlocal opened, got
        if b'"task"' in chunk:  # the snapshot
            opened += 1
            if opened == streams:
                all_open.set()
        elif marker[0] and marker[0] in chunk:
            got += 1
            if got == streams:
                all_got.set()

    subscribe = _body("SubscribeToTask", {"id": task_id})
    clients = [_call(app, subscribe, on_body) for _ in range(streams)]
    await asyncio.wait_for(all_open.wait(), 120)

    store = runtime.get_store()
    walls, cpus = [], []
    for round_ in range(events):
        marker[0] = f"fanout-{round_}".encode()
        got = 0
        all_got.clear()
        text = types.Part(text=marker[0].decode())
        message = types.Message(
            role=types.Role.AGENT, message_id=f"m-{round_}", parts=[text], task_id=task_id
        )
        state = TaskState.WORKING if round_ % 2 == 0 else TaskState.INPUT_REQUIRED
        gc.collect()  # not inside the measured interval
        began, cpu = time.perf_counter(), time.process_time()
        await asyncio.to_thread(store.update_status, task_id, state, message)
        await asyncio.wait_for(all_got.wait(), 120)
        walls.append((time.perf_counter() - began) * 1000)
        cpus.append((time.process_time() - cpu) * 1000)
    for gone in clients:
        gone.set()
    await asyncio.sleep(0)
    return walls, cpus


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.fanout_cpu", description=__doc__)
    parser.add_argument("--streams", type=int, default=1000, help="SubscribeToTask streams")
    parser.add_argument("--events", type=int, default=10, help="events timed, one at a time")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="a2a-fanout-") as workdir:
        _configure(Path(workdir))
        import django
        from django.core.management import call_command

        django.setup()
        call_command("migrate", verbosity=0)
        walls, cpus = asyncio.run(measure(args.streams, args.events))
    print(
        f"{args.streams} streams, {args.events} events: CPU per event median "
        f"{statistics.median(cpus):.1f} ms (min {min(cpus):.1f}), wall median "
        f"{statistics.median(walls):.1f} ms (min {min(walls):.1f})"
    )


if __name__ == "__main__":
    main()
