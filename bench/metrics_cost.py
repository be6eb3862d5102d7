"""What recording the Prometheus metrics costs: ``python -m bench.metrics_cost``.

1. Each recording function of ``a2a_endpoint.metrics`` alone, per call: in this process
   (prometheus_client's default, one process) and in a child process with
   ``PROMETHEUS_MULTIPROC_DIR`` set (every value is a write to an mmap'd file), and with
   ``METRICS`` off (the switch's own cost).
2. A whole JSON-RPC request through Django's ASGI handler, in-process (no server, no socket):
   ``GetTask`` of an id that is no task, answered -32001 after authentication, dispatch, the
   binding and the service (its thread hop included) but no database query: the cheapest
   request that records what every request records (a request counted and timed), so the
   share of the metrics is the largest it gets. Metrics on and off take turns, round by
   round; CPU from ``time.process_time`` (all threads). Printed: the best round of each (the
   least disturbed by other work on the machine), and the median and quartiles of the
   difference between each round with metrics and the round without next to it.

``bench.settings`` with no ``DATABASE_URL`` or ``REDIS_URL`` (SQLite in a temporary
directory, never written). Pin it to one core (``taskset -c 0``) to compare two trees.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

FUNCTIONS: dict[str, str] = {
    "request_observed": "metrics.request_observed('jsonrpc', 'GetTask', 'ok', started)",
    "request_refused": "metrics.request_refused('jsonrpc', '-32700')",
    "task_finished": "metrics.task_finished('completed')",
    "bus_published": "metrics.bus_published('channels')",
    "bus_delivered": "metrics.bus_delivered('channels', started, started)",
    "job_started+ended": "metrics.job_ended(metrics.job_started())",
    "stream_open (enter+exit)": "with_stream()",
}


def _setup(tmp: str) -> None:
    for name in ("DATABASE_URL", "REDIS_URL", "A2A_EXECUTION_BACKEND"):
        os.environ.pop(name, None)
    os.environ.update(
        DJANGO_SETTINGS_MODULE="bench.settings",
        A2A_DEMO_DB=os.path.join(tmp, "db.sqlite3"),
        A2A_OPEN_ENDPOINT="1",
    )
    import django

    django.setup()


def _per_call(number: int, repeat: int) -> dict[str, float]:
    """Nanoseconds per call of each recording function (best of ``repeat`` runs)."""
    from a2a_endpoint import metrics

    def with_stream() -> None:
        with metrics.stream_open("jsonrpc", "SubscribeToTask"):
            pass

    started = time.perf_counter()
    scope = {"metrics": metrics, "started": started, "with_stream": with_stream}
    costs = {}
    for name, statement in FUNCTIONS.items():
        code = compile(f"for _ in range({number}):\n    {statement}", name, "exec")
        exec(code, scope)  # warm: the metric and its child exist
        runs = []
        for _ in range(repeat):
            begin = time.perf_counter()
            exec(code, scope)
            runs.append((time.perf_counter() - begin) / number * 1e9)
        costs[name] = min(runs)  # the least disturbed run (timeit's advice)
    return costs


def _switched(enabled: bool) -> None:
    from a2a_endpoint.metrics import recording

    recording._state.enabled = enabled  # what METRICS sets, read once per settings change


def _calls(args: argparse.Namespace) -> dict[str, dict[str, float]]:
    _switched(True)
    on = _per_call(args.number, args.repeat)
    _switched(False)
    off = _per_call(args.number, args.repeat)
    _switched(True)
    return {"on": on, "off": off}


async def _request(app: Any, body: bytes) -> int:
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/a2a/",
        "raw_path": b"/a2a/",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1"), (b"content-type", b"application/json")],
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 8000),
    }
    sent: list[dict[str, Any]] = []
    messages = [{"type": "http.request", "body": body, "more_body": False}]
    done = asyncio.Event()

    async def receive() -> dict[str, Any]:
        if messages:
            return messages.pop()
        await done.wait()  # connected until the response is complete, as a client is
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    try:
        await app(scope, receive, send)
    finally:
        done.set()
    return next(m["status"] for m in sent if m["type"] == "http.response.start")


def _requests(args: argparse.Namespace) -> dict[str, list[float]]:
    """Microseconds of CPU and wall per request, each round's mean, metrics on and off."""
    from a2a_endpoint.asgi import get_asgi_application

    app = get_asgi_application()
    body = json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "no-such-task"}}
    ).encode()
    rounds: dict[str, list[float]] = {"on cpu": [], "off cpu": [], "on wall": [], "off wall": []}

    async def run(count: int) -> None:
        for _ in range(count):
            assert await _request(app, body) == 200

    loop = asyncio.new_event_loop()
    loop.run_until_complete(run(200))  # warm: imports, caches, the thread pool
    for index in range(args.rounds):
        pair = [("on", True), ("off", False)]
        for label, enabled in pair if index % 2 else reversed(pair):  # neither always first
            _switched(enabled)
            cpu, wall = time.process_time(), time.perf_counter()
            loop.run_until_complete(run(args.requests))
            rounds[f"{label} cpu"].append((time.process_time() - cpu) / args.requests * 1e6)
            rounds[f"{label} wall"].append((time.perf_counter() - wall) / args.requests * 1e6)
    _switched(True)
    loop.close()
    return rounds


def _child(args: argparse.Namespace) -> None:
    """In a process of its own (``--child``): the per-call costs, as JSON on stdout."""
    with tempfile.TemporaryDirectory() as tmp:
        _setup(tmp)
        result: dict[str, Any] = {"calls": _calls(args)}
        if args.child == "requests":
            result["requests"] = _requests(args)
        print(json.dumps(result))


def _spawn(args: argparse.Namespace, what: str, env: dict[str, str]) -> dict[str, Any]:
    command = [sys.executable, "-m", "bench.metrics_cost", "--child", what]
    command += ["--number", str(args.number), "--repeat", str(args.repeat)]
    command += ["--rounds", str(args.rounds), "--requests", str(args.requests)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _table(title: str, rows: list[tuple[str, ...]]) -> None:
    print(f"\n{title}")
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  " + "  ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=True)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--number", type=int, default=100_000, help="calls per timed run")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per function")
    parser.add_argument("--rounds", type=int, default=41, help="request rounds, on and off")
    parser.add_argument("--requests", type=int, default=300, help="requests per round")
    parser.add_argument("--child", choices=["calls", "requests"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args)
        return
    env = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    single = _spawn(args, "requests", env)
    with tempfile.TemporaryDirectory() as directory:
        multi = _spawn(args, "requests", {**env, "PROMETHEUS_MULTIPROC_DIR": directory})
    rows = [("function", "one process", "multiprocess", "METRICS off")]
    for name in FUNCTIONS:
        rows.append(
            (
                name,
                f"{single['calls']['on'][name]:.0f} ns",
                f"{multi['calls']['on'][name]:.0f} ns",
                f"{single['calls']['off'][name]:.0f} ns",
            )
        )
    _table("Per call (best of runs)", rows)
    _table("Request path (per request; rounds of on and off, paired)", _request_rows(single, multi))


def _request_rows(single: dict[str, Any], multi: dict[str, Any]) -> list[tuple[str, ...]]:
    """Best of the rounds on and off, and the median of each round's difference (on minus
    the off round next to it), with its quartiles: what the noise leaves of the cost."""
    rows = [("GetTask -32001", "best on", "best off", "median on - off", "quartiles")]
    for mode, result in (("one process", single), ("multiprocess", multi)):
        for kind in ("cpu", "wall"):
            on, off = result["requests"][f"on {kind}"], result["requests"][f"off {kind}"]
            paired = [a - b for a, b in zip(on, off, strict=True)]
            low, _, high = statistics.quantiles(paired, n=4)
            rows.append(
                (
                    f"{mode}, {kind}",
                    f"{min(on):.1f} us",
                    f"{min(off):.1f} us",
                    f"{statistics.median(paired):+.1f} us",
                    f"{low:+.1f} .. {high:+.1f} us",
                )
            )
    return rows


if __name__ == "__main__":
    main()
