"""Run the benchmark: start every server, run the scenarios in interleaved rounds, report.

``python -m bench.run [--quick] [--rounds N] [--duration S] [--scenarios a,b] [--servers a,b]``
(``make bench BENCH_ARGS=...``). Writes ``bench/results/<date>.md``, ``<date>.json.gz`` and the
plots beside them. Servers run on core 0, this load generator on core 1.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from bench import profile, report, scenarios
from bench.scenarios import Options
from bench.servers import (
    ALL_TARGETS,
    DEFAULT_TARGETS,
    Services,
    Target,
    add_service_arguments,
    build_target,
    pin_client,
    started,
)

RESULTS_DIR = Path(__file__).resolve().parent / "results"
REPO_ROOT = Path(__file__).resolve().parents[1]

#: The servers that run ours-prod's stack (ours-prod-token: the same, closed, with a token).
OURS_DB = {"ours-prod", "ours-prod-token"}
#: scenario → the servers it runs on (the ceiling only answers a constant: GetTask only).
APPLICABLE = {
    "get_task": set(ALL_TARGETS),
    "list_tasks": {*OURS_DB, "ours-embedded", "sdk-sql", "sdk-memory"},
    "send_nonblocking": {*OURS_DB, "ours-embedded", "sdk-sql", "sdk-memory"},
    "send_blocking": {*OURS_DB, "ours-embedded", "sdk-sql", "sdk-memory"},
    "stream": {*OURS_DB, "ours-embedded", "sdk-sql", "sdk-memory"},
    # The ceilings broadcast with no application work: the floor of the measurement itself
    # (the load generator reading 1,000 streams on one core included).
    "fanout": {*OURS_DB, "ours-embedded", "sdk-sql", "ceiling-daphne", "ceiling-uvicorn"},
}
ROUND_SCENARIOS = (
    "get_task",
    "list_tasks",
    "send_blocking",
    "stream",
    "send_nonblocking",
    "fanout",
)
ONCE_SCENARIOS = ("scale", "profile")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a ~2-minute smoke run")
    parser.add_argument("--rounds", type=int, help="interleaved rounds (default 3, quick 1)")
    parser.add_argument("--duration", type=float, help="seconds measured per load run")
    parser.add_argument("--warmup", type=float, help="seconds of unmeasured load first")
    parser.add_argument("--connections", type=int, default=16, help="concurrent connections")
    parser.add_argument(
        "--scenarios",
        default=",".join(ROUND_SCENARIOS + ONCE_SCENARIOS),
        help="comma list of " + ", ".join(ROUND_SCENARIOS + ONCE_SCENARIOS),
    )
    parser.add_argument(
        "--servers",
        default=",".join(DEFAULT_TARGETS),
        help=f"comma list of {', '.join(ALL_TARGETS)} (default all but "
        f"{', '.join(sorted(set(ALL_TARGETS) - set(DEFAULT_TARGETS)))})",
    )
    parser.add_argument("--fanout-sizes", help="comma list of stream counts (default 100,1000)")
    parser.add_argument("--scale-levels", help="comma list of task counts (default 10k,100k,1M)")
    parser.add_argument("--profile-seconds", type=float, help="py-spy seconds per profile")
    add_service_arguments(parser)
    parser.add_argument("--output", type=Path, default=RESULTS_DIR, help="results directory")
    args = parser.parse_args(argv)
    quick = args.quick
    args.rounds = args.rounds or (1 if quick else 3)
    args.duration = args.duration or (2.0 if quick else 10.0)
    args.warmup = args.warmup if args.warmup is not None else (0.5 if quick else 1.0)
    args.fanout_sizes = _ints(args.fanout_sizes or ("100" if quick else "100,1000"))
    args.scale_levels = _ints(args.scale_levels or ("10000" if quick else "10000,100000,1000000"))
    args.profile_seconds = args.profile_seconds or (3.0 if quick else 10.0)
    args.scenarios = [name for name in args.scenarios.split(",") if name]
    args.servers = [name for name in args.servers.split(",") if name]
    unknown = set(args.scenarios) - set(ROUND_SCENARIOS + ONCE_SCENARIOS)
    unknown |= set(args.servers) - set(ALL_TARGETS)
    if unknown:
        parser.error(f"unknown scenario or server: {', '.join(sorted(unknown))}")
    return args


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(",") if part)


def log(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)


def run_once(
    scenario: str, target: Target, options: Options, prepared: dict[str, list[str]]
) -> Any:
    if scenario == "get_task":
        return asyncio.run(scenarios.run_get_task(target, options, prepared[target.name]))
    if scenario == "list_tasks":
        return asyncio.run(scenarios.run_list_tasks(target, options))
    if scenario == "send_nonblocking":
        return asyncio.run(scenarios.run_send_nonblocking(target, options))
    if scenario == "send_blocking":
        return asyncio.run(scenarios.run_send_blocking(target, options))
    if scenario == "stream":
        return asyncio.run(scenarios.run_stream(target, options))
    if scenario == "fanout":
        return {
            str(size): asyncio.run(scenarios.run_fanout(target, size))
            for size in options.fanout_sizes
        }
    raise ValueError(scenario)


def _brief(result: Any) -> str:
    if not isinstance(result, dict):
        return str(result)
    if "rps" in result:
        text = (
            f"{result['rps']:.0f} req/s p50 {result['p50_ms'] or 0:.1f} ms "
            f"errors {result['errors']} {' '.join(result['error_examples'][:1])}"
        )
        if result.get("drain_s") is not None:
            text += f" drain {result['drain_s']:.1f} s"
        return text
    if "streams" in result:
        return (
            f"{result['delivered']}/{result['streams']} p99 {result['delivery_p99_ms']} ms "
            f"{result['rss_per_stream_kib']:.1f} KiB/stream errors {result['errors']}"
        )
    return "; ".join(f"{key}: {_brief(value)}" for key, value in result.items())


def run_rounds(
    targets: list[Target], args: argparse.Namespace, options: Options, prepared: dict
) -> list[dict]:
    rounds = []
    for number in range(args.rounds):
        order = targets if number % 2 == 0 else list(reversed(targets))
        log(f"round {number + 1}/{args.rounds}: {', '.join(t.name for t in order)}")
        results: dict[str, dict[str, Any]] = {}
        for scenario in ROUND_SCENARIOS:
            if scenario not in args.scenarios:
                continue
            results[scenario] = {}
            for target in order:
                if target.name not in APPLICABLE[scenario]:
                    continue
                try:
                    result = run_once(scenario, target, options, prepared)
                except Exception as exc:  # one failed run is reported, the bench goes on
                    traceback.print_exc()
                    result = {"failed": f"{type(exc).__name__}: {exc}"}
                results[scenario][target.name] = result
                log(f"  {scenario:17} {target.name:16} {_brief(result)}")
        rounds.append({"order": [t.name for t in order], "results": results})
    return rounds


def run_scale(target: Target, args: argparse.Namespace, options: Options, ids: list[str]) -> dict:
    levels = {}
    for level in args.scale_levels:
        rows, seconds = scenarios.grow_tasks(target.database_url, level)
        log(f"  scale: {rows} tasks stored (inserted in {seconds:.1f} s)")
        result = asyncio.run(scenarios.run_scale_level(target, options, ids))
        result["rows"] = rows
        levels[str(level)] = result
        log(f"  scale {level}: {_brief(result)}")
    return levels


def profile_one(
    target: Target, name: str, run: Any, args: argparse.Namespace, with_worker: bool
) -> dict[str, Any]:
    """py-spy on ``target``'s web process (and its Celery worker) while ``run()`` loads it."""
    base = f"{args.stamp}-profile-{name}"
    processes = {"daphne": target.web.process}
    if with_worker and target.helpers:
        processes["celery"] = target.helpers[0].process
    outputs = {key: args.output / f"{base}-{key}.speedscope.json" for key in processes}
    recorders = {
        key: profile.start_recording(
            process.pid, args.profile_seconds, outputs[key], subprocesses=key == "celery"
        )
        for key, process in processes.items()
        if process is not None
    }
    time.sleep(1.0)  # py-spy attaches before the load starts
    result = asyncio.run(run())
    entry: dict[str, Any] = {
        "server": target.name,
        "load": {k: v for k, v in result.items() if k != "latencies"},
    }
    for key, recorder in recorders.items():
        _, err = recorder.communicate(timeout=args.profile_seconds + 60)
        if recorder.returncode != 0 or not outputs[key].exists():
            entry[key] = {"failed": err.decode(errors="replace")[-500:]}
            continue
        entry[key] = profile.hot_spots(outputs[key]) | {"file": outputs[key].name}
    log(f"  profile {name}: {_brief(result)}")
    return entry


def run_profiles(
    targets: dict[str, Target], args: argparse.Namespace, options: Options, prepared: dict
) -> dict:
    """py-spy on our daphnes (and the Celery worker) under GetTask and SendMessage load."""
    load = Options(duration=args.profile_seconds, warmup=0.0, connections=options.connections)
    one = Options(duration=args.profile_seconds, warmup=0.0, connections=1)
    plan: list[tuple[str, str, Any, bool]] = [
        (
            "get_task",
            "ours-prod",
            lambda t: scenarios.run_get_task(t, load, prepared[t.name]),
            False,
        ),
        ("send_nonblocking", "ours-prod", lambda t: scenarios.run_send_nonblocking(t, load), True),
        ("send_blocking", "ours-prod", lambda t: scenarios.run_send_blocking(t, one), True),
        (
            "get_task-embedded",
            "ours-embedded",
            lambda t: scenarios.run_get_task(t, load, prepared[t.name]),
            False,
        ),
        # Only when --servers names ours-prod-token: where authentication's time goes.
        (
            "get_task-token",
            "ours-prod-token",
            lambda t: scenarios.run_get_task(t, load, prepared[t.name]),
            False,
        ),
        (
            "send_nonblocking-token",
            "ours-prod-token",
            lambda t: scenarios.run_send_nonblocking(t, load),
            False,
        ),
    ]
    profiles = {}
    for name, server, make, with_worker in plan:
        target = targets.get(server)
        if target is not None:
            profiles[name] = profile_one(
                target, name, lambda t=target, m=make: m(t), args, with_worker
            )
    return profiles


def environment() -> dict[str, Any]:
    def command(*args: str) -> str:
        try:
            return subprocess.run(
                args, capture_output=True, text=True, cwd=REPO_ROOT, check=False
            ).stdout.strip()
        except OSError:
            return ""

    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "commit": command("git", "rev-parse", "--short", "HEAD"),
        "dirty": bool(command("git", "status", "--porcelain")),
        "loadavg_start": Path("/proc/loadavg").read_text().split()[:3],
    }


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # SIGTERM, and SIGINT even when started in the background (where it is ignored), stop the
    # run through the same cleanup as Ctrl-C: servers stopped, databases and keys removed.
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    pin_client()
    args.output.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now()
    args.stamp = now.strftime("%Y-%m-%d") + ("-quick" if args.quick else "")
    options = Options(
        duration=args.duration,
        warmup=args.warmup,
        connections=args.connections,
        prepared_tasks=30 if args.quick else 100,
        fanout_sizes=args.fanout_sizes,
        scale_levels=args.scale_levels,
        scale_duration=args.duration / 2 if args.quick else 5.0,
    )
    names = list(args.servers)
    if "scale" in args.scenarios or "profile" in args.scenarios:
        names = list(dict.fromkeys(["ours-prod", *names]))
    if "profile" in args.scenarios:
        names = list(dict.fromkeys([*names, "ours-embedded"]))
    names = [name for name in ALL_TARGETS if name in names]
    services = Services(args.postgres_url, args.redis_url)
    workdir = Path(tempfile.mkdtemp(prefix="a2a-bench-"))
    log(f"run {services.run_id}: servers {', '.join(names)}; logs in {workdir}")
    results: dict[str, Any] = {
        "meta": {
            "started": now.isoformat(timespec="seconds"),
            "argv": list(sys.argv[1:] if argv is None else argv),
            "servers": names,
            "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
            "environment": environment(),
        }
    }
    began = time.perf_counter()
    try:
        targets = [build_target(name, services, workdir) for name in names]
        with started(targets):
            log("servers up; preparing tasks")
            prepared = {
                t.name: asyncio.run(scenarios.prepare_tasks(t, options.prepared_tasks))
                for t in targets
            }
            round_targets = [t for t in targets if t.name in args.servers]
            results["rounds"] = run_rounds(round_targets, args, options, prepared)
            prod = next((t for t in targets if t.name == "ours-prod"), None)
            if prod is not None and "scale" in args.scenarios:
                log("scale: ListTasks and GetTask against the stored task count (ours-prod)")
                results["scale"] = run_scale(prod, args, options, prepared[prod.name])
            if "profile" in args.scenarios:
                log("profile: py-spy on our daphnes under GetTask and SendMessage load")
                by_name = {t.name: t for t in targets}
                results["profiles"] = run_profiles(by_name, args, options, prepared)
    finally:
        services.cleanup()
    results["meta"]["seconds"] = time.perf_counter() - began
    results["meta"]["loadavg_end"] = Path("/proc/loadavg").read_text().split()[:3]
    json_path = args.output / f"{args.stamp}.json.gz"
    report.save(results, json_path)
    markdown = report.write(results, args.output, args.stamp)
    log(f"wrote {markdown} and {json_path.name} ({results['meta']['seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
