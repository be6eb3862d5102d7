"""Push notification delivery on the production stack: ``python -m bench.push``.

``python -m bench.push [--tasks N] [--updates M] [--concurrency C] [--timeout S]
[--postgres-url ...] [--redis-url ...]``

Starts ``ours-prod`` exactly as ``bench.run`` does (daphne + one Celery worker, PostgreSQL,
Redis, pinned to core 0), with ``A2A_PUSH_ALLOW_HTTP=1`` and
``A2A_PUSH_ALLOW_PRIVATE_NETWORKS=1`` so it may POST to a webhook on loopback, and a webhook
receiver in this process (core 1) that answers 200 and records when each POST arrived. Then
``C`` threads drive ``N`` tasks: each task starts with a blocking SendMessage ``hold``
carrying an inline push config to the receiver (the task parks in INPUT_REQUIRED), then gets
``M`` blocking ``hold`` messages (each: WORKING, a ``tick`` WORKING update, INPUT_REQUIRED
again). Every event the database logged for those tasks (``a2a_endpoint_taskevent``) is owed
to the receiver once; the bench waits until it has them all (or ``--timeout``), then reports
lost, duplicated and out-of-order deliveries and the lag from each event's ``created_at``
(its write time, same clock) to its first arrival. Appends the report to
``bench/results/<date>-push.md``.
"""

from __future__ import annotations

import argparse
import datetime
import http.client
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import psycopg

from bench.servers import (
    ManagedProcess,
    Services,
    Target,
    add_service_arguments,
    build_target,
    pin_client,
    started,
)

RESULTS_DIR = Path(__file__).resolve().parent / "results"
REPO_ROOT = Path(__file__).resolve().parents[1]
RPC_PATH = "/a2a/"
INPUT_REQUIRED = "TASK_STATE_INPUT_REQUIRED"
#: The issue's targets: median lag, and nothing lost or sent twice to a receiver answering 200.
TARGET_P50_MS = 50.0
PUSH_ENV = {"A2A_PUSH_ALLOW_HTTP": "1", "A2A_PUSH_ALLOW_PRIVATE_NETWORKS": "1"}
#: --push-worker: the queue of push deliveries, and of their worker.
PUSH_QUEUE = "a2a-push"
#: How often the database is read again while waiting for deliveries.
POLL_SECONDS = 0.2
#: At most this long for the outbox's last rows to be marked delivered before reading them.
OUTBOX_SETTLE = 10.0


# --- the webhook receiver -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Arrival:
    at: float  # time.time() once the request was read
    task_id: str
    seq: int
    config_id: str


class Receiver:
    """A loopback ThreadingHTTPServer answering 200 to every POST, recording its arrival."""

    def __init__(self) -> None:
        self.arrivals: list[Arrival] = []
        self.changed = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as a production receiver would

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                arrival = Arrival(
                    time.time(),
                    self.headers.get("X-A2A-Task-Id", ""),
                    int(self.headers.get("X-A2A-Event-Seq") or -1),
                    self.headers.get("X-A2A-Push-Config-Id", ""),
                )
                with receiver.changed:
                    receiver.arrivals.append(arrival)
                    receiver.changed.notify_all()
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 128

        self.server = Server(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(
            target=self.server.serve_forever, name="push-receiver", daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def snapshot(self) -> list[Arrival]:
        with self.changed:
            return list(self.arrivals)

    def wait_for_more(self, seen: int, timeout: float) -> None:
        """Return once more than ``seen`` arrivals are recorded, or after ``timeout``."""
        with self.changed:
            self.changed.wait_for(lambda: len(self.arrivals) > seen, timeout)

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


# --- the client -----------------------------------------------------------------------------


class Client:
    """Blocking JSON-RPC calls on one keep-alive connection per thread."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.local = threading.local()

    def _connection(self) -> http.client.HTTPConnection:
        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = self.local.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        return conn

    def call(self, method: str, params: dict[str, Any]) -> Any:
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
        headers = {"Content-Type": "application/json", "A2A-Version": "1.0"}
        conn = self._connection()
        try:
            conn.request("POST", RPC_PATH, body=body, headers=headers)
            response = conn.getresponse()
            data = response.read()
        except Exception:
            conn.close()
            self.local.conn = None
            raise
        if response.status != 200:
            raise RuntimeError(f"HTTP {response.status}: {data[:200]!r}")
        payload = json.loads(data)
        if "result" not in payload:
            raise RuntimeError(f"JSON-RPC error: {payload.get('error')!r}")
        return payload["result"]


def message(text: str, **fields: Any) -> dict[str, Any]:
    return {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"text": text}],
        **fields,
    }


def _parked(result: Any, what: str) -> str:
    task = (result or {}).get("task") or {}
    if task.get("status", {}).get("state") != INPUT_REQUIRED:
        raise RuntimeError(f"{what} did not park the task: {str(result)[:300]}")
    return task["id"]


@dataclass
class Sent:
    task_ids: list[str] = field(default_factory=list)
    messages: int = 0
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def drive_task(client: Client, hook: str, updates: int, sent: Sent) -> None:
    """One task: ``hold`` with the inline push config, then ``updates`` more ``hold``s."""
    try:
        params = {
            "message": message("hold"),
            "configuration": {"taskPushNotificationConfig": {"url": hook}},
        }
        task_id = _parked(client.call("SendMessage", params), "hold")
        with sent.lock:
            sent.task_ids.append(task_id)
            sent.messages += 1
        for _ in range(updates):
            result = client.call("SendMessage", {"message": message("hold", taskId=task_id)})
            _parked(result, "a follow-up hold")
            with sent.lock:
                sent.messages += 1
    except Exception as exc:
        with sent.lock:
            sent.errors.append(f"{type(exc).__name__}: {exc}"[:300])


# --- waiting and measuring ------------------------------------------------------------------

EVENTS_SQL = (
    "SELECT task_id::text, seq, created_at FROM a2a_endpoint_taskevent WHERE task_id = ANY(%s)"
)
OUTBOX_SQL = (
    "SELECT state, count(*), max(attempts) FROM a2a_endpoint_pushdelivery"
    " WHERE task_id = ANY(%s) GROUP BY state ORDER BY state"
)


def logged_events(conn: psycopg.Connection, task_ids: list[str]) -> dict[tuple[str, int], float]:
    """(task, seq) → created_at (unix time) of every event the tasks logged."""
    rows = conn.execute(EVENTS_SQL, [[uuid.UUID(t) for t in task_ids]]).fetchall()
    return {(task_id, seq): created.timestamp() for task_id, seq, created in rows}


def wait_for_deliveries(
    receiver: Receiver, conn: psycopg.Connection, task_ids: list[str], timeout: float
) -> tuple[dict[tuple[str, int], float], bool]:
    """Poll the event log and the receiver until every logged event arrived, or the
    deadline; (the events, whether all arrived)."""
    deadline = time.monotonic() + timeout
    while True:
        expected = logged_events(conn, task_ids)
        arrivals = receiver.snapshot()
        got = {(a.task_id, a.seq) for a in arrivals}
        if expected.keys() <= got:
            return expected, True
        left = deadline - time.monotonic()
        if left <= 0:
            return expected, False
        receiver.wait_for_more(len(arrivals), min(POLL_SECONDS, left))


def settled_outbox(conn: psycopg.Connection, task_ids: list[str]) -> list[tuple[str, int, int]]:
    """The outbox rows of the tasks by state, once none is pending (a sender records a try
    just after its POST was answered) or OUTBOX_SETTLE seconds passed."""
    ids = [uuid.UUID(t) for t in task_ids]
    deadline = time.monotonic() + OUTBOX_SETTLE
    while True:
        rows = conn.execute(OUTBOX_SQL, [ids]).fetchall()
        if all(state != "pending" for state, _, _ in rows) or time.monotonic() >= deadline:
            return rows
        time.sleep(POLL_SECONDS)  # a poll interval, bounded by the deadline


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def measure(expected: dict[tuple[str, int], float], arrivals: list[Arrival]) -> dict[str, Any]:
    first: dict[tuple[str, int], float] = {}
    counts: Counter[tuple[str, int]] = Counter()
    violations = 0
    highest: dict[tuple[str, str], int] = defaultdict(lambda: -1)
    for arrival in arrivals:  # in the order the receiver recorded them
        key = (arrival.task_id, arrival.seq)
        counts[key] += 1
        if counts[key] > 1:
            continue  # a second copy is a duplicate, not an ordering fault
        first[key] = arrival.at
        config = (arrival.task_id, arrival.config_id)
        if arrival.seq < highest[config]:
            violations += 1
        highest[config] = max(highest[config], arrival.seq)
    delivered = [key for key in expected if key in first]
    lags = [(first[key] - expected[key]) * 1000 for key in delivered]
    span = (max(first.values()) - min(expected.values())) if first and expected else 0.0
    return {
        "expected": len(expected),
        "delivered": len(delivered),
        "lost": len(expected) - len(delivered),
        "duplicated": sum(1 for key, n in counts.items() if n > 1 and key in expected),
        "extra_copies": sum(n - 1 for n in counts.values() if n > 1),
        "unknown": sum(1 for key in counts if key not in expected),
        "posts": len(arrivals),
        "order_violations": violations,
        "lag_p50_ms": percentile(lags, 50),
        "lag_p90_ms": percentile(lags, 90),
        "lag_p99_ms": percentile(lags, 99),
        "lag_max_ms": max(lags) if lags else None,
        "lag_min_ms": min(lags) if lags else None,
        "span_s": span,
        "deliveries_per_s": len(delivered) / span if span > 0 else None,
    }


# --- reporting ------------------------------------------------------------------------------


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return f"{value:,}"


def table(figures: dict[str, Any]) -> str:
    p50 = figures["lag_p50_ms"]
    clean = figures["lost"] == 0 and figures["duplicated"] == 0
    rows = [
        ("events expected (logged in a2a_endpoint_taskevent)", _fmt(figures["expected"])),
        ("delivered (received at least once)", _fmt(figures["delivered"])),
        ("lost (expected, never received)", _fmt(figures["lost"])),
        (
            "duplicated (same task + seq received again)",
            f"{_fmt(figures['duplicated'])} ({_fmt(figures['extra_copies'])} extra POSTs)",
        ),
        ("POSTs received (all)", _fmt(figures["posts"])),
        (
            "order violations (a seq after a higher one, same config)",
            _fmt(figures["order_violations"]),
        ),
        ("lag p50 ms (arrival - event created_at)", _fmt(p50)),
        ("lag p90 ms", _fmt(figures["lag_p90_ms"])),
        ("lag p99 ms", _fmt(figures["lag_p99_ms"])),
        ("lag max ms", _fmt(figures["lag_max_ms"])),
        (
            "deliveries/s (delivered / (last arrival - first event))",
            _fmt(figures["deliveries_per_s"]),
        ),
        (
            f"target: p50 < {TARGET_P50_MS:.0f} ms",
            "met" if p50 is not None and p50 < TARGET_P50_MS else "**not met**",
        ),
        ("target: none lost or duplicated", "met" if clean else "**not met**"),
    ]
    lines = ["| figure | value |", "|---|---|"]
    lines += [f"| {name} | {value} |" for name, value in rows]
    return "\n".join(lines)


def machine() -> str:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    return (
        f"{os.cpu_count()} CPUs (nproc) {model}, Linux {platform.release()}, "
        f"Python {platform.python_version()}; load average at the end {load}"
    )


def commit() -> str:
    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, check=False
        ).stdout.strip()

    dirty = " (working tree has uncommitted changes)" if git("status", "--porcelain") else ""
    return git("rev-parse", "--short", "HEAD") + dirty


def worker_log_notes(target: Target) -> list[str]:
    """Warnings and errors about push deliveries in the Celery worker's log."""
    notes = []
    for helper in target.helpers:
        try:
            text = helper.log_path.read_text(errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            if ("WARNING" in line or "ERROR" in line or "Traceback" in line) and (
                "push" in line.lower() or "Traceback" in line
            ):
                notes.append(line.strip()[:300])
    return notes


def write_report(path: Path, section: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    header = "" if path.exists() else "# Push notification delivery (`python -m bench.push`)\n"
    with path.open("a") as out:
        out.write(header + "\n" + section)


# --- main -----------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.push", description=__doc__)
    parser.add_argument("--tasks", type=int, default=50, help="tasks, each with a push config")
    parser.add_argument("--updates", type=int, default=10, help="follow-up holds per task")
    parser.add_argument("--concurrency", type=int, default=8, help="client threads")
    parser.add_argument(
        "--timeout", type=float, default=120.0, help="seconds to wait for deliveries after sending"
    )
    parser.add_argument(
        "--push-worker",
        action="store_true",
        help=f"deliveries on a queue of their own ({PUSH_QUEUE}), with a worker of their own",
    )
    add_service_arguments(parser)
    parser.add_argument("--output", type=Path, default=RESULTS_DIR, help="results directory")
    return parser.parse_args(argv)


def push_worker(agent_worker: ManagedProcess) -> ManagedProcess:
    """A second worker, one process, consuming only the push queue (PUSH_CELERY_QUEUE), as
    docs/settings.md suggests: deliveries never wait behind agent jobs."""
    command = list(agent_worker.command)
    name = command.index("-n")
    command[name + 1] = "push-" + command[name + 1]
    command[command.index("-c") + 1] = "1"
    command += ["-Q", PUSH_QUEUE]
    worker = ManagedProcess(
        "celery-push",
        command,
        env=dict(agent_worker.env),
        log_dir=agent_worker.log_path.parent,
        startup_timeout=60,
    )
    worker.ready = lambda: " ready." in worker.log_text(limit=1_000_000)
    return worker


def run(args: argparse.Namespace, workdir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    services = Services(args.postgres_url, args.redis_url)
    try:
        target = build_target("ours-prod", services, workdir)
        extra = {"A2A_PUSH_CELERY_QUEUE": PUSH_QUEUE} if args.push_worker else {}
        for process in [target.web, *target.helpers]:
            process.env.update({**PUSH_ENV, **extra})
        if args.push_worker:
            target.helpers.append(push_worker(target.helpers[0]))
        with Receiver() as receiver, started([target]):
            client = Client(target.port)
            sent = Sent()
            began = time.monotonic()
            pool = ThreadPoolExecutor(args.concurrency, thread_name_prefix="push-client")
            try:
                for _ in range(args.tasks):
                    pool.submit(drive_task, client, receiver.url, args.updates, sent)
                pool.shutdown(wait=True)
            finally:  # interrupted: drop the tasks not started (the servers stop next)
                pool.shutdown(wait=False, cancel_futures=True)
            send_s = time.monotonic() - began
            with psycopg.connect(target.database_url, autocommit=True) as conn:
                expected, complete = wait_for_deliveries(
                    receiver, conn, sent.task_ids, args.timeout
                )
                wait_s = time.monotonic() - began - send_s
                outbox = settled_outbox(conn, sent.task_ids)
            figures = measure(expected, receiver.snapshot())
        info = {
            "tasks_started": len(sent.task_ids),
            "messages": sent.messages,
            "send_errors": sent.errors,
            "send_s": send_s,
            "wait_s": wait_s,
            "complete": complete,
            "outbox": outbox,
            "worker_notes": worker_log_notes(target),
        }
        return figures, info
    finally:
        services.cleanup()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    pin_client()
    workdir = Path(tempfile.mkdtemp(prefix="a2a-bench-push-"))
    command = shlex.join(["python", "-m", "bench.push", *(sys.argv[1:] if argv is None else argv)])
    started_at = datetime.datetime.now(datetime.UTC)
    figures, info = run(args, workdir)
    outbox = "; ".join(
        f"{state} {count} (max attempts {most})" for state, count, most in info["outbox"]
    )
    notes = [
        f"- Sent {info['messages']} SendMessage calls for {info['tasks_started']} tasks in "
        f"{info['send_s']:.1f} s ({args.concurrency} client thread"
        f"{'s' if args.concurrency != 1 else ''}); "
        f"{len(info['send_errors'])} failed"
        + (f" (first: `{info['send_errors'][0]}`)" if info["send_errors"] else "")
        + ".",
        f"- Every logged event arrived {info['wait_s']:.2f} s after the last send returned."
        if info["complete"]
        else f"- **Timed out** after {args.timeout:.0f} s waiting for the missing deliveries.",
        f"- Outbox rows of these tasks at the end: {outbox or 'none'}.",
        f"- Worker log: {len(info['worker_notes'])} push warning/error lines"
        + (f" (first: `{info['worker_notes'][0]}`)" if info["worker_notes"] else "")
        + ".",
        f"- Lag min {_fmt(figures['lag_min_ms'])} ms; span {figures['span_s']:.2f} s.",
    ]
    section = "\n".join(
        [
            f"## {started_at:%Y-%m-%d %H:%M} UTC: {args.tasks} tasks x {args.updates} updates",
            "",
            f"Command: `{command}`  ",
            f"Machine: {machine()}  ",
            f"Commit: {commit()}  ",
            f"Parameters: tasks {args.tasks}, follow-up holds per task {args.updates}, "
            f"client threads {args.concurrency}, timeout {args.timeout:.0f} s; ours-prod "
            "(daphne + 1 Celery worker, prefork 2, on core 0; receiver and client on core 1), "
            "A2A_PUSH_ALLOW_HTTP=1, A2A_PUSH_ALLOW_PRIVATE_NETWORKS=1.",
            "",
            table(figures),
            "",
            *notes,
            "",
        ]
    )
    print(section)
    path = args.output / f"{started_at:%Y-%m-%d}-push.md"
    write_report(path, section)
    print(f"(appended to {path}; logs in {workdir})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
