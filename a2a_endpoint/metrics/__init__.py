"""Prometheus metrics of a2a_endpoint (docs/metrics.md): what every layer records, and the
exposition that ``a2a_endpoint.metrics.views.metrics`` serves.

This package sits below every other layer of the app, which all record into it: it imports
nothing of a2a_endpoint but ``conf``.
"""

from a2a_endpoint.metrics.exposition import render
from a2a_endpoint.metrics.multiprocess import process_exited
from a2a_endpoint.metrics.recording import (
    NO_METHOD,
    bus_delivered,
    bus_published,
    job_ended,
    job_lost,
    job_queued,
    job_started,
    push_delivery,
    request_observed,
    request_refused,
    stream_open,
    task_created,
    task_finished,
    worker_ready,
)

__all__ = [
    "NO_METHOD",
    "bus_delivered",
    "bus_published",
    "job_ended",
    "job_lost",
    "job_queued",
    "job_started",
    "process_exited",
    "push_delivery",
    "render",
    "request_observed",
    "request_refused",
    "stream_open",
    "task_created",
    "task_finished",
    "worker_ready",
]
