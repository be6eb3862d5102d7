"""Recording the metrics where things happen: cheap, switched by ``METRICS``, and never failing
the request or job that records (a failure is logged once per metric and swallowed)."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

from django.core.signals import setting_changed

from a2a_endpoint.conf import SETTING_NAME, app_settings
from a2a_endpoint.metrics import families as definitions
from a2a_endpoint.metrics.families import Families
from a2a_endpoint.metrics.multiprocess import ENV, directory, register_exit

logger = logging.getLogger("a2a_endpoint.metrics")

#: The ``method`` label of a request no method ran for (refused over HTTP, not JSON, not a
#: request object, or naming no method of the binding).
NO_METHOD = "none"


class _State:
    """What this process knows: the switch (read once per settings change), the metrics
    (built at the first record), their labelled children, and what failed already."""

    def __init__(self) -> None:
        self.enabled: bool | None = None
        self.families: Families | None = None
        self.broken = False
        self.children: dict[tuple[int, tuple[str, ...]], Any] = {}
        self.failed: set[str] = set()
        self.lock = threading.Lock()


_state = _State()


def _reset(*, setting: str, **kwargs: Any) -> None:
    if setting == SETTING_NAME:
        _state.enabled = None


setting_changed.connect(_reset)


def _families() -> Families | None:
    """The metrics, or None when recording is off (``METRICS``) or could not start."""
    enabled = _state.enabled
    if enabled is None:
        enabled = _state.enabled = bool(app_settings.METRICS) and not _state.broken
    if not enabled:
        return None
    return _state.families or _build()


def _build() -> Families | None:
    with _state.lock:  # two threads recording first must not register the metrics twice
        if _state.families is None and not _state.broken:
            try:
                _state.families = definitions.build()
            except Exception:
                # E.g. PROMETHEUS_MULTIPROC_DIR names no writable directory (check W032).
                _state.broken, _state.enabled = True, False
                logger.exception("Metrics could not be set up: none are recorded by this process")
                return None
            register_exit()
        return _state.families


def _child(metric: Any, *values: str) -> Any:
    """``metric.labels(*values)``, looked up once: ``labels()`` takes a lock and checks its
    arguments each time, a third of a record's cost."""
    key = (id(metric), values)
    child = _state.children.get(key)
    if child is None:
        child = _state.children[key] = metric.labels(*values)
    return child


def _failed(name: str) -> None:
    if name in _state.failed:
        return
    _state.failed.add(name)
    logger.warning("Recording metric %s failed (not logged again)", name, exc_info=True)


# --- requests -------------------------------------------------------------------------------


def request_observed(binding: str, method: str, outcome: str, started: float) -> None:
    """A request to ``method`` answered with ``outcome`` ("ok" or the error code), whose answer
    started now; ``started``: ``time.perf_counter()`` when it arrived."""
    try:
        if (metrics := _families()) is None:
            return
        _child(metrics.requests, binding, method, outcome).inc()
        _child(metrics.request_duration, binding, method).observe(time.perf_counter() - started)
    except Exception:
        _failed("a2a_requests")


def request_refused(binding: str, outcome: str) -> None:
    """A request no method ran for (method label ``none``): refused over HTTP (``http_413``),
    or answered a JSON-RPC error before any method (``-32700``, ``-32600``, ``-32601``)."""
    try:
        if (metrics := _families()) is None:
            return
        _child(metrics.requests, binding, NO_METHOD, outcome).inc()
    except Exception:
        _failed("a2a_requests")


@contextlib.contextmanager
def stream_open(binding: str, method: str) -> Iterator[None]:
    """Count an SSE stream as open for the duration of the ``with`` block."""
    gauge = None
    try:
        if (metrics := _families()) is not None:
            gauge = _child(metrics.streams_open, binding, method)
            gauge.inc()
    except Exception:
        gauge = None
        _failed("a2a_streams_open")
    try:
        yield
    finally:
        if gauge is not None:
            try:
                gauge.dec()
            except Exception:
                _failed("a2a_streams_open")


# --- tasks and jobs -------------------------------------------------------------------------


def task_created() -> None:
    try:
        if (metrics := _families()) is not None:
            metrics.tasks_created.inc()
    except Exception:
        _failed("a2a_tasks_created")


def task_finished(state: str) -> None:
    """A task reached terminal ``state`` ("completed", "failed", "canceled", "rejected")."""
    try:
        if (metrics := _families()) is not None:
            _child(metrics.tasks_finished, state).inc()
    except Exception:
        _failed("a2a_tasks_finished")


def job_queued(backend: str) -> None:
    try:
        if (metrics := _families()) is not None:
            _child(metrics.jobs_queued, backend).inc()
    except Exception:
        _failed("a2a_jobs_queued")


def job_started() -> float | None:
    """An agent job starts: counted as running until ``job_ended`` gets what this returned."""
    try:
        if (metrics := _families()) is None:
            return None
        metrics.jobs_running.inc()
    except Exception:
        _failed("a2a_jobs_running")
        return None
    return time.perf_counter()


def job_ended(started: float | None) -> None:
    if started is None:  # not counted as running: nothing to undo
        return
    try:
        if (metrics := _families()) is not None:
            metrics.jobs_running.dec()
            metrics.job_duration.observe(time.perf_counter() - started)
    except Exception:
        _failed("a2a_jobs_running")


def job_lost(*, retried: bool) -> None:
    """A job lost with its worker (its lease lapsed) was found: retried or its task failed."""
    try:
        if (metrics := _families()) is None:
            return
        metrics.jobs_lost.inc()
        if retried:
            metrics.jobs_retried.inc()
    except Exception:
        _failed("a2a_jobs_lost")


# --- event bus and push ---------------------------------------------------------------------


def bus_published(bus: str) -> None:
    try:
        if (metrics := _families()) is not None:
            _child(metrics.bus_published, bus).inc()
    except Exception:
        _failed("a2a_bus_published")


def bus_delivered(bus: str, published: Any, now: float) -> None:
    """An event published at ``published`` reached a listening process (or loop) at ``now``
    (both of one clock; ``published`` as a message carried it, so not trusted to be one)."""
    try:
        if (metrics := _families()) is not None:
            # Clocks of two hosts may disagree by a little: never a negative lag.
            _child(metrics.bus_delivery_lag, bus).observe(max(now - published, 0.0))
    except Exception:
        _failed("a2a_bus_delivery_lag_seconds")


def push_delivery(outcome: str) -> None:
    """One try of a push delivery came to ``outcome``: delivered, retried or dead."""
    try:
        if (metrics := _families()) is not None:
            _child(metrics.push_deliveries, outcome).inc()
    except Exception:
        _failed("a2a_push_deliveries")


# --- processes ------------------------------------------------------------------------------


def worker_ready() -> None:
    """A worker process that serves no HTTP started (Celery's): without multiprocess mode,
    what it records reaches no scrape, a silent gap worth a warning."""
    try:
        if directory() is None and bool(app_settings.METRICS):
            logger.warning(
                "%s is not set: the metrics this worker records (jobs, tasks finished, push "
                "deliveries) reach no scrape. Set it, for this worker and the web processes, "
                "to one directory (docs/metrics.md, 'Several processes').",
                ENV,
            )
    except Exception:
        _failed("worker_ready")
