"""The report of a run: ``<stamp>.md`` with medians, per-round ratios, targets, and PNG plots."""

from __future__ import annotations

import gzip
import json
import shlex
import statistics
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from bench.servers import DEFAULT_TARGETS, DESCRIPTIONS

THROUGHPUT = ("get_task", "list_tasks", "send_nonblocking")
TITLES = {
    "get_task": "GetTask (historyLength 1)",
    "get_task-embedded": "GetTask (historyLength 1) on ours-embedded",
    "get_task-token": "GetTask (historyLength 1) on ours-prod-token",
    "send_nonblocking-token": "SendMessage returnImmediately on ours-prod-token",
    "list_tasks": "ListTasks (pageSize 20, page 1 then page 2)",
    "send_nonblocking": "SendMessage returnImmediately (echo job)",
    "send_blocking": "SendMessage blocking echo, one client",
    "stream": "SendStreamingMessage echo, one client",
}
REFERENCE = "sdk-sql"
OURS = "ours-prod"
TOKEN = "ours-prod-token"
#: Authentication's target (the issue): the token server within 10 % of the open one.
AUTH_SCENARIOS = ("get_task", "send_nonblocking")


def _median(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def per_target(results: dict, scenario: str) -> dict[str, list[dict]]:
    """scenario → target → its result in each round (failed runs left out)."""
    found: dict[str, list[dict]] = {}
    for round_ in results.get("rounds", []):
        for target, result in round_["results"].get(scenario, {}).items():
            if "failed" not in result:
                found.setdefault(target, []).append(result)
    return found


def round_ratios(
    results: dict, scenario: str, numerator: str, denominator: str, key: str = "rps"
) -> list[float]:
    ratios = []
    for round_ in results.get("rounds", []):
        runs = round_["results"].get(scenario, {})
        top, bottom = runs.get(numerator, {}), runs.get(denominator, {})
        if top.get(key) and bottom.get(key):
            ratios.append(top[key] / bottom[key])
    return ratios


# --- tables ---------------------------------------------------------------------------------


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def throughput_table(results: dict, scenario: str) -> list[str]:
    rows = []
    for target, runs in per_target(results, scenario).items():
        extra = ""
        if scenario == "send_nonblocking":
            extra = _fmt(_median(r.get("drain_s") for r in runs), 2)
        rows.append(
            [
                f"`{target}`",
                _fmt(_median(r["rps"] for r in runs), 0),
                " / ".join(_fmt(r["rps"], 0) for r in runs),
                _fmt(_median(r["p50_ms"] for r in runs), 2),
                _fmt(_median(r["p99_ms"] for r in runs), 2),
                _fmt(_median(r["server_cpu_ms_per_req"] for r in runs), 3),
                _fmt(_median(r.get("worker_cpu_ms_per_req") for r in runs), 3),
                _fmt(_median(100 * r["client_cpu_util"] for r in runs), 0) + " %",
                str(sum(r["errors"] for r in runs)),
                *([extra] if scenario == "send_nonblocking" else []),
            ]
        )
    header = [
        "server",
        "req/s (median)",
        "req/s per round",
        "p50 ms",
        "p99 ms",
        "server CPU ms/req",
        "worker CPU ms/req",
        "client CPU",
        "errors",
    ]
    if scenario == "send_nonblocking":
        header.append("backlog drain s")
    return _table(header, rows)


def latency_table(results: dict, scenario: str) -> list[str]:
    rows = []
    for target, runs in per_target(results, scenario).items():
        row = [
            f"`{target}`",
            _fmt(_median(r["p50_ms"] for r in runs), 2),
            " / ".join(_fmt(r["p50_ms"], 2) for r in runs),
            _fmt(_median(r["p99_ms"] for r in runs), 2),
        ]
        if scenario == "stream":
            row.append(_fmt(_median(r["first_event_p50_ms"] for r in runs), 2))
            row.append(_fmt(_median(r["first_event_p99_ms"] for r in runs), 2))
        row += [
            _fmt(_median(r["server_cpu_ms_per_req"] for r in runs), 3),
            _fmt(_median(r.get("worker_cpu_ms_per_req") for r in runs), 3),
            str(sum(r["errors"] for r in runs)),
        ]
        rows.append(row)
    header = ["server", "p50 ms (median)", "p50 per round", "p99 ms"]
    if scenario == "stream":
        header = [
            "server",
            "final event p50 ms",
            "per round",
            "final p99 ms",
            "first event p50 ms",
            "first p99 ms",
        ]
    header += ["server CPU ms/req", "worker CPU ms/req", "errors"]
    return _table(header, rows)


def fanout_rows(results: dict) -> list[tuple[str, str, dict]]:
    """(target, size, median figures) for every fan-out run."""
    out = []
    for target, runs in per_target(results, "fanout").items():
        sizes = sorted({size for run in runs for size in run}, key=int)
        for size in sizes:
            at = [run[size] for run in runs if size in run]
            out.append(
                (
                    target,
                    size,
                    {
                        key: _median(r.get(key) for r in at)
                        for key in (
                            "delivery_p50_ms",
                            "delivery_p99_ms",
                            "delivery_max_ms",
                            "send_to_all_ms",
                            "open_s",
                        )
                    }
                    | {
                        # The first (cold) round: later rounds reuse the memory the previous
                        # round's streams freed, so their RSS delta is about zero.
                        "rss_per_stream_kib": max(r["rss_per_stream_kib"] for r in at),
                        "rss_rounds": " / ".join(_fmt(r["rss_per_stream_kib"]) for r in at),
                        "errors": sum(r["errors"] for r in at),
                        "delivered": " / ".join(f"{r['delivered']}" for r in at),
                        "p99_rounds": " / ".join(_fmt(r.get("delivery_p99_ms"), 0) for r in at),
                        "latencies": [x for r in at for x in r.get("latencies", [])],
                    },
                )
            )
    return out


def fanout_table(results: dict) -> list[str]:
    rows = [
        [
            f"`{target}`",
            size,
            m["delivered"],
            _fmt(m["delivery_p50_ms"]),
            _fmt(m["delivery_p99_ms"]),
            m["p99_rounds"],
            _fmt(m["delivery_max_ms"]),
            _fmt(m["send_to_all_ms"]),
            _fmt(m["open_s"], 2),
            _fmt(m["rss_per_stream_kib"]),
            m["rss_rounds"],
            str(m["errors"]),
        ]
        for target, size, m in fanout_rows(results)
    ]
    return _table(
        [
            "server",
            "streams",
            "got the update (per round)",
            "delivery p50 ms",
            "delivery p99 ms",
            "p99 per round",
            "max ms",
            "send → all ms",
            "open all s",
            "server KiB/stream (max)",
            "KiB/stream per round",
            "errors",
        ],
        rows,
    )


def scale_table(results: dict) -> list[str]:
    scale = results.get("scale") or {}
    rows = []
    base: dict[str, float | None] = {}
    for level, result in scale.items():
        row = [f"{int(level):,}", f"{result['rows']:,}"]
        for op in ("get_task", "list_tasks"):
            r = result[op]
            base.setdefault(op, r["p50_ms"])
            ratio = r["p50_ms"] / base[op] if base[op] and r["p50_ms"] else None
            row += [
                _fmt(r["p50_ms"], 2),
                _fmt(r["p99_ms"], 2),
                _fmt(ratio, 2) + "x",
                str(r["errors"]),
            ]
        rows.append(row)
    return _table(
        [
            "level",
            "rows",
            "GetTask p50 ms",
            "p99 ms",
            "vs first",
            "errors",
            "ListTasks p50 ms",
            "p99 ms",
            "vs first",
            "errors",
        ],
        rows,
    )


def profile_lines(results: dict) -> list[str]:
    lines: list[str] = []
    for name, entry in (results.get("profiles") or {}).items():
        load = entry.get("load", {})
        lines.append(
            f"#### {TITLES.get(name, name)} ({entry.get('server', OURS)}) - "
            f"{_fmt(load.get('rps'), 0)} req/s while sampled"
        )
        for process in ("daphne", "celery"):
            spots = entry.get(process)
            if not spots:
                continue
            if "failed" in spots:
                lines.append(f"- {process}: py-spy failed: `{spots['failed'][:200]}`")
                continue
            lines.append(
                f"\n{process}: {spots['seconds']:.1f} s of busy samples (`{spots['file']}`, open "
                f"in speedscope.app); {spots['db_wait_share']:.0f} % of them wait for PostgreSQL "
                "(psycopg `Connection.wait`). Self time (top of stack):\n"
            )
            lines += [f"1. {share:.1f} % `{frame}`" for frame, share in spots["self"][:10]]
            lines.append("\nInclusive, a2a_endpoint frames (with all they call):\n")
            lines += [f"1. {share:.1f} % `{frame}`" for frame, share in spots["inclusive"][:12]]
        lines.append("")
    return lines


# --- targets --------------------------------------------------------------------------------


def targets(results: dict) -> list[list[str]]:
    rows = []

    def add(
        name: str, value: float | None, goal: str, met: Callable[[float], bool], detail: str
    ) -> None:
        verdict = (
            "n/a (not measured)" if value is None else ("**met**" if met(value) else "**not met**")
        )
        rows.append([name, goal, _fmt(value, 2), detail, verdict])

    for scenario in THROUGHPUT:
        ratios = round_ratios(results, scenario, OURS, REFERENCE)
        add(
            f"{TITLES[scenario]}: ours-prod vs sdk-sql",
            _median(ratios),
            "≥ 2.00x",
            lambda v: v >= 2,
            "per round: " + " / ".join(f"{r:.2f}x" for r in ratios),
        )
    for scenario in AUTH_SCENARIOS:
        ratios = round_ratios(results, scenario, TOKEN, OURS)
        if ratios:  # ours-prod-token runs only when --servers names it
            add(
                f"{TITLES[scenario]}: DRF token (ours-prod-token) vs open (ours-prod)",
                _median(ratios),
                "≥ 0.90x",
                lambda v: v >= 0.9,
                "per round: " + " / ".join(f"{r:.2f}x" for r in ratios),
            )
    ratios = round_ratios(results, "get_task", OURS, "ceiling-daphne")
    add(
        "GetTask: ours-prod vs bare daphne ceiling",
        _median(ratios),
        "≥ 0.50x",
        lambda v: v >= 0.5,
        "per round: " + " / ".join(f"{r:.2f}x" for r in ratios),
    )
    blocking = per_target(results, "send_blocking").get(OURS, [])
    add(
        "Blocking echo SendMessage via Celery, one client: p50",
        _median(r["p50_ms"] for r in blocking),
        "< 20 ms",
        lambda v: v < 20,
        "per round: " + " / ".join(_fmt(r["p50_ms"], 2) for r in blocking),
    )
    fan = {size: m for target, size, m in fanout_rows(results) if target == OURS}
    big = fan.get("1000") or {}
    add(
        "Fan-out, 1,000 streams on one daphne: delivery p99",
        big.get("delivery_p99_ms"),
        "< 250 ms",
        lambda v: v < 250,
        f"delivered {big.get('delivered', '-')} (per round)",
    )
    add(
        "Fan-out: server memory per open stream",
        big.get("rss_per_stream_kib"),
        "< 64 KiB",
        lambda v: v < 64,
        "RSS delta of daphne / open streams, 1,000 streams",
    )
    scale = results.get("scale") or {}
    if "10000" in scale and "1000000" in scale:
        for op, label in (("list_tasks", "ListTasks"), ("get_task", "GetTask")):
            low, high = scale["10000"][op]["p50_ms"], scale["1000000"][op]["p50_ms"]
            add(
                f"{label} p50 at 1M tasks vs 10k",
                high / low if low and high else None,
                "≤ 1.50x",
                lambda v: v <= 1.5,
                f"{_fmt(low, 2)} ms → {_fmt(high, 2)} ms",
            )
    else:
        rows.append(["ListTasks/GetTask at 1M vs 10k", "≤ 1.50x", "-", "1M level not run", "n/a"])
    return rows


# --- plots ----------------------------------------------------------------------------------


def _save(fig: Any, output: Path, name: str) -> str:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(output / name, dpi=110)
    plt.close(fig)
    return name


def _cdf(values: list[float], points: int = 2000) -> tuple[list[float], list[float]]:
    """A CDF of ``values`` thinned to about ``points`` points."""
    values = sorted(values)
    step = max(1, len(values) // points)
    xs = values[::step]
    return xs, [i * step / len(values) for i in range(len(xs))]


def latency_plot(results: dict, output: Path, stamp: str) -> str | None:
    import matplotlib.pyplot as plt

    scenarios = [s for s in (*THROUGHPUT, "send_blocking", "stream") if per_target(results, s)]
    if not scenarios:
        return None
    fig, axes = plt.subplots(len(scenarios), 1, figsize=(9, 3.2 * len(scenarios)), squeeze=False)
    for ax, scenario in zip(axes[:, 0], scenarios, strict=True):
        for target, runs in per_target(results, scenario).items():
            values = [x * 1000 for r in runs for x in r.get("latencies", [])]
            if values:
                ax.plot(*_cdf(values), label=target)
        ax.set_xscale("log")
        ax.set_xlabel("latency (ms, log)")
        ax.set_ylabel("fraction <= x")
        ax.set_title(TITLES[scenario] + " - latency CDF, all rounds")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    return _save(fig, output, f"{stamp}-latency.png")


def fanout_plot(results: dict, output: Path, stamp: str) -> str | None:
    import matplotlib.pyplot as plt

    fan = fanout_rows(results)
    if not fan:
        return None
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.2))
    by_target: dict[str, list[tuple[int, dict]]] = {}
    for target, size, m in fan:
        by_target.setdefault(target, []).append((int(size), m))
        if m["latencies"]:
            right.plot(*_cdf([x * 1000 for x in m["latencies"]]), label=f"{target} x{size}")
    for target, points in by_target.items():
        points.sort()
        xs = [p[0] for p in points]
        for key, style in (("delivery_p50_ms", "o-"), ("delivery_p99_ms", "s--")):
            left.plot(xs, [p[1][key] for p in points], style, label=f"{target} {key[9:12]}")
    left.axhline(250, color="red", linewidth=0.8, label="target p99 250 ms")
    left.set_xscale("log")
    left.set_xlabel("SubscribeToTask streams on one task")
    left.set_ylabel("delivery latency of one update (ms)")
    left.set_title("Fan-out: update written -> received, per stream")
    right.set_xlabel("delivery latency (ms)")
    right.set_ylabel("fraction of streams <= x")
    right.set_title("Fan-out delivery latency CDF, all rounds")
    for ax in (left, right):
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    return _save(fig, output, f"{stamp}-fanout.png")


def scale_plot(results: dict, output: Path, stamp: str) -> str | None:
    import matplotlib.pyplot as plt

    scale = results.get("scale") or {}
    if not scale:
        return None
    fig, ax = plt.subplots(figsize=(7, 4))
    rows = [result["rows"] for result in scale.values()]
    for op, label in (("get_task", "GetTask"), ("list_tasks", "ListTasks")):
        ax.plot(rows, [r[op]["p50_ms"] for r in scale.values()], "o-", label=f"{label} p50")
        ax.plot(rows, [r[op]["p99_ms"] for r in scale.values()], "s--", label=f"{label} p99")
    ax.set_xscale("log")
    ax.set_xlabel("stored tasks")
    ax.set_ylabel("latency (ms), one client")
    ax.set_title("ours-prod: latency against stored tasks")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, output, f"{stamp}-scale.png")


def plots(results: dict, output: Path, stamp: str) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    made = [plot(results, output, stamp) for plot in (latency_plot, fanout_plot, scale_plot)]
    return [name for name in made if name]


# --- the document ---------------------------------------------------------------------------


def _ratio_line(label: str, ratios: list[float]) -> list[str]:
    return [f"{label} per round: {' / '.join(f'{r:.2f}x' for r in ratios)}", ""] if ratios else []


def header(results: dict) -> list[str]:
    meta = results["meta"]
    env = meta["environment"]
    args = meta["args"]
    dirty = " (dirty tree)" if env["dirty"] else ""
    if "argv" in meta:  # the command as given (runs before 2026-12-02 stored only the args)
        command = shlex.join(["python", "-m", "bench.run", *meta["argv"]])
    else:
        command = (
            f"python -m bench.run {'--quick ' if args['quick'] else ''}"
            f"--rounds {args['rounds']} --duration {args['duration']}"
        )
    servers = meta.get("servers") or DEFAULT_TARGETS
    return [
        f"# a2a_endpoint benchmark - {meta['started']}",
        "",
        f"Command: `{command}` "
        f"({meta['seconds']:.0f} s). Commit `{env['commit']}`{dirty}, "
        f"Python {env['python']}, {env['cpu']}, {env['cores']} cores. Load average "
        f"{' '.join(env['loadavg_start'])} at the start, {' '.join(meta['loadavg_end'])} at "
        "the end (the machine is shared: compare the per-round ratios, not absolute figures).",
        "",
        "Servers (each pinned to core 0 with taskset; the load generator on core 1; PostgreSQL "
        "and Redis are shared system services, not pinned):",
        "",
        *[f"- `{name}`: {DESCRIPTIONS[name]}" for name in servers if name in DESCRIPTIONS],
        "",
        f"Load: closed loop, {args['connections']} keep-alive HTTP/1.1 connections for the "
        f"throughput scenarios, one for the latency ones; {args['warmup']} s warm-up then "
        f"{args['duration']} s measured per run; {args['rounds']} round(s), servers visited in "
        "order and in reverse order on alternate rounds (A/B/A/B). Medians over rounds. Server "
        "CPU = utime+stime delta of the web process (/proc/<pid>/stat) / requests; worker CPU "
        "= the same for the Celery worker's processes. Every response is validated.",
        "",
    ]


def errors_seen(results: dict) -> list[str]:
    lines = []
    for round_ in results.get("rounds", []):
        for scenario, runs in round_["results"].items():
            for target, outcome in runs.items():
                nested = scenario == "fanout" and "failed" not in outcome
                for result in outcome.values() if nested else [outcome]:
                    examples = [result["failed"]] if "failed" in result else []
                    examples += result.get("error_examples") or []
                    lines += [f"- {scenario} / {target}: {example}" for example in examples]
    return ["## Errors seen", "", *lines[:40], ""] if lines else []


def sections(results: dict) -> list[str]:
    lines = []
    for scenario in THROUGHPUT:
        if per_target(results, scenario):
            lines += [f"## {TITLES[scenario]}", "", *throughput_table(results, scenario), ""]
            lines += _ratio_line(
                "ours-prod / sdk-sql req/s", round_ratios(results, scenario, OURS, REFERENCE)
            )
            lines += _ratio_line(
                "ours-prod-token / ours-prod req/s (DRF token against an open endpoint)",
                round_ratios(results, scenario, TOKEN, OURS),
            )
            lines += _ratio_line(
                "ours-prod-token / ours-prod p50",
                round_ratios(results, scenario, TOKEN, OURS, key="p50_ms"),
            )
    lines += _ratio_line(
        "GetTask ours-prod / ceiling-daphne",
        round_ratios(results, "get_task", OURS, "ceiling-daphne"),
    )
    lines += _ratio_line(
        "GetTask ours-prod / ceiling-django (Django's handler and middleware, no A2A work)",
        round_ratios(results, "get_task", OURS, "ceiling-django"),
    )
    lines += _ratio_line(
        "ceiling-django / sdk-sql GetTask",
        round_ratios(results, "get_task", "ceiling-django", REFERENCE),
    )
    lines += _ratio_line(
        "GetTask ceiling-django / ceiling-django-stock (a2a_endpoint.asgi's handler against "
        "Django's)",
        round_ratios(results, "get_task", "ceiling-django", "ceiling-django-stock"),
    )
    for scenario in ("send_blocking", "stream"):
        if per_target(results, scenario):
            lines += [f"## {TITLES[scenario]}", "", *latency_table(results, scenario), ""]
    if fanout_rows(results):
        lines += [
            "## SSE fan-out: SubscribeToTask streams on one task, one update",
            "",
            "Delivery = the agent's write time (carried in the update) -> the client reading it, "
            "per stream (same machine clock). send -> all = the continuation SendMessage sent -> "
            "the last stream read the update (includes the job dispatch). Memory = the web "
            "process's RSS (VmRSS) with all streams open minus before, / streams; the max over "
            "rounds is the first, cold one (later rounds reuse memory freed by earlier streams).",
            "",
            *fanout_table(results),
            "",
        ]
    if results.get("scale"):
        lines += [
            "## Stored task count (ours-prod, PostgreSQL, one client)",
            "",
            "Rows bulk-inserted straight into `a2a_endpoint_task` (3/4 owned by the bench's "
            "anonymous caller), then `VACUUM ANALYZE`. GetTask reads real echo tasks and sampled "
            "bulk rows; ListTasks alternates page 1 and page 2.",
            "",
            *scale_table(results),
            "",
        ]
    if results.get("profiles"):
        lines += ["## Profile hot spots (py-spy)", "", *profile_lines(results)]
    return lines


def write(results: dict, output: Path, stamp: str) -> Path:
    """Write ``<stamp>.md`` (and its plots) into ``output``; its path."""
    images = plots(results, output, stamp)
    lines = [
        *header(results),
        "## Targets",
        "",
        *_table(["target", "goal", "measured", "detail", "verdict"], targets(results)),
        "",
        *sections(results),
        "## Plots",
        "",
        *[f"![{name}]({name})" for name in images],
        "",
        *errors_seen(results),
    ]
    path = output / f"{stamp}.md"
    path.write_text("\n".join(lines))
    return path


def _rounded(value: Any) -> Any:
    """Floats to 6 decimals (latencies to the microsecond): a third of the JSON's size."""
    if isinstance(value, float):
        return round(value, 6)
    if isinstance(value, dict):
        return {key: _rounded(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_rounded(item) for item in value]
    return value


def save(results: dict, path: Path) -> None:
    """Every figure of a run, raw latencies included, as gzipped JSON."""
    with gzip.open(path, "wt", encoding="utf-8") as out:
        json.dump(_rounded(results), out, default=str)


def load(path: Path) -> dict:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as source:
        return json.load(source)


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.report results/<stamp>.json.gz``: render a stored run's report again."""
    paths = argv if argv is not None else sys.argv[1:]
    for name in paths:
        path = Path(name)
        stamp = path.name.removesuffix(".gz").removesuffix(".json")
        print(write(load(path), path.parent, stamp))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
