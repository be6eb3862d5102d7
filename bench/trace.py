"""Where the time of a blocking echo SendMessage goes, step by step: ``python -m bench.trace``.

Starts ours-prod (daphne + PostgreSQL + Redis + a Celery worker, pinned as the benchmark
pins them) with ``bench.tracing`` installed, sends ``--requests`` blocking echoes one after
another, and prints, for each traced step (store calls, channel-layer publishes, the job's
enqueueing, the worker taking it), its median start offset from the request and its median
duration, and the median request's own timeline.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from bench.loadgen import Connection
from bench.scenarios import send_blocking_echo
from bench.servers import Services, add_service_arguments, build_target, pin_client, started

WARMUP = 5


def parse_trace(path: Path) -> list[tuple[float, int, str, str]]:
    lines = []
    for line in path.read_text().splitlines():
        stamp, pid, mark, name = line.split(" ", 3)
        lines.append((float(stamp), int(pid), mark, name))
    return sorted(lines)


def spans(
    lines: list[tuple[float, int, str, str]], start: float, until: float
) -> list[tuple[float, float, str, str]]:
    """(offset ms, duration ms, process, step) of the steps in [start, until), in order:
    ``until`` is the next request's start (the worker may still be releasing its job after
    the response)."""
    open_calls: dict[tuple[int, str], list[float]] = defaultdict(list)
    result = []
    web = None
    for stamp, pid, mark, name in lines:
        if not start <= stamp < until:
            continue
        if web is None and name == "RequestHandler.send_message":
            web = pid
        if mark == "|":
            result.append(((stamp - start) * 1000, 0.0, pid, name))
        elif mark == ">":
            open_calls[(pid, name)].append(stamp)
        elif open_calls[(pid, name)]:
            began = open_calls[(pid, name)].pop()
            result.append(((began - start) * 1000, (stamp - began) * 1000, pid, name))
    return [
        (offset, duration, "daphne" if pid == web else "worker", name)
        for offset, duration, pid, name in sorted(result)
    ]


async def send(port: int, count: int) -> list[tuple[float, float]]:
    conn = Connection("127.0.0.1", port)
    windows = []
    try:
        for _ in range(count):
            began = time.time()
            await send_blocking_echo(conn)
            windows.append((began, time.time()))
    finally:
        conn.close()
    return windows


def report(windows: list[tuple[float, float]], lines: list[tuple[float, int, str, str]]) -> str:
    totals = [(end - start) * 1000 for start, end in windows]
    steps: dict[tuple[str, str, int], list[tuple[float, float]]] = defaultdict(list)
    for index, (start, end) in enumerate(windows):
        until = windows[index + 1][0] if index + 1 < len(windows) else end + 1.0
        seen: dict[tuple[str, str], int] = defaultdict(int)
        for offset, duration, process, name in spans(lines, start, until):
            nth = seen[(process, name)]
            seen[(process, name)] += 1
            steps[(process, name, nth)].append((offset, duration))
    out = [
        f"{len(windows)} blocking echoes, one client: p50 {statistics.median(totals):.1f} ms, "
        f"min {min(totals):.1f} ms, max {max(totals):.1f} ms",
        "",
        "| process | step | n-th call | median start ms | median duration ms | seen in |",
        "|---|---|---|---|---|---|",
    ]
    order = sorted(steps, key=lambda key: statistics.median(o for o, _ in steps[key]))
    for key in order:
        process, name, nth = key
        values = steps[key]
        out.append(
            f"| {process} | `{name}` | {nth + 1} | "
            f"{statistics.median(o for o, _ in values):.1f} | "
            f"{statistics.median(d for _, d in values):.1f} | {len(values)}/{len(windows)} |"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.trace", description=__doc__)
    parser.add_argument("--requests", type=int, default=30, help="blocking echoes to time")
    add_service_arguments(parser)
    args = parser.parse_args(argv)
    pin_client()
    workdir = Path(tempfile.mkdtemp(prefix="a2a-bench-trace-"))
    trace = workdir / "trace.log"
    services = Services(args.postgres_url, args.redis_url)
    try:
        target = build_target("ours-prod", services, workdir)
        for process in [target.web, *target.helpers]:
            process.env["BENCH_TRACE"] = str(trace)
        with started([target]):
            asyncio.run(send(target.port, WARMUP))
            windows = asyncio.run(send(target.port, args.requests))
    finally:
        services.cleanup()
    print(report(windows, parse_trace(trace)))
    print(f"\n(trace and logs in {workdir})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
