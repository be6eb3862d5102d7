"""The metrics a2a_endpoint records: names, types, labels and buckets (docs/metrics.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

#: Seconds until a request's answer starts: 1 ms (a GetTask) to 60 s (a blocking SendMessage
#: that waits out a long BLOCKING_TIMEOUT).
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
#: Seconds from an event's publication to its delivery: well under a millisecond in one
#: process, a few through Redis; seconds mean a stalled loop or a backed-up layer.
LAG_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)
#: Seconds an agent job runs: an echo's milliseconds to an hour-long job.
JOB_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600)

#: Gauges sum the values of the live processes in multiprocess mode: a process that exited
#: (and was marked dead) no longer counts.
LIVE = {"multiprocess_mode": "livesum"}

#: Field of :class:`Families` → (type, name, help, labels, options). Counters are exposed
#: with ``_total``; histograms as ``_bucket``, ``_sum`` and ``_count``.
METRICS: dict[str, tuple[type, str, str, tuple[str, ...], dict[str, Any]]] = {
    "requests": (
        Counter,
        "a2a_requests",
        "Requests answered, by binding, method and outcome (ok, or the error code).",
        ("binding", "method", "outcome"),
        {},
    ),
    "request_duration": (
        Histogram,
        "a2a_request_duration_seconds",
        "Seconds until a request's answer starts: the whole answer, or a stream's opening.",
        ("binding", "method"),
        {"buckets": LATENCY_BUCKETS},
    ),
    "streams_open": (
        Gauge,
        "a2a_streams_open",
        "SSE streams open now.",
        ("binding", "method"),
        LIVE,
    ),
    "tasks_created": (Counter, "a2a_tasks_created", "Tasks created.", (), {}),
    "tasks_finished": (
        Counter,
        "a2a_tasks_finished",
        "Tasks that reached a terminal state, by that state.",
        ("state",),
        {},
    ),
    "jobs_queued": (
        Counter,
        "a2a_jobs_queued",
        "Agent jobs handed to the execution backend (again for each re-hand-off).",
        ("backend",),
        {},
    ),
    "jobs_running": (Gauge, "a2a_jobs_running", "Agent jobs running now.", (), LIVE),
    "job_duration": (
        Histogram,
        "a2a_job_duration_seconds",
        "Seconds an agent job ran.",
        (),
        {"buckets": JOB_BUCKETS},
    ),
    "jobs_lost": (
        Counter,
        "a2a_jobs_lost",
        "Jobs found lost with their worker (lease lapsed), retried or failed.",
        (),
        {},
    ),
    "jobs_retried": (Counter, "a2a_jobs_retried", "Lost jobs given to another worker.", (), {}),
    "bus_published": (
        Counter,
        "a2a_bus_published",
        "Task events published on the event bus, by bus.",
        ("bus",),
        {},
    ),
    "bus_delivery_lag": (
        Histogram,
        "a2a_bus_delivery_lag_seconds",
        "Seconds from an event's publication to its delivery to a listening process.",
        ("bus",),
        {"buckets": LAG_BUCKETS},
    ),
    "push_deliveries": (
        Counter,
        "a2a_push_deliveries",
        "Push notification tries, by outcome: delivered, retried or dead.",
        ("outcome",),
        {},
    ),
}


@dataclass(frozen=True, slots=True)
class Families:
    """Every metric of the app, created once per process (``build``)."""

    requests: Counter
    request_duration: Histogram
    streams_open: Gauge
    tasks_created: Counter
    tasks_finished: Counter
    jobs_queued: Counter
    jobs_running: Gauge
    job_duration: Histogram
    jobs_lost: Counter
    jobs_retried: Counter
    bus_published: Counter
    bus_delivery_lag: Histogram
    push_deliveries: Counter


def build(registry: CollectorRegistry = REGISTRY) -> Families:
    """Create the metrics of :data:`METRICS` in ``registry``."""
    return Families(
        **{
            field: kind(name, documentation, labels, registry=registry, **options)
            for field, (kind, name, documentation, labels, options) in METRICS.items()
        }
    )
