"""Multiprocess mode: each process writes its metrics to files under PROMETHEUS_MULTIPROC_DIR,
and a scrape of any process sums them (several daphnes and Celery workers on one host)."""

from __future__ import annotations

import atexit
import logging
import os
import threading

from prometheus_client import multiprocess

#: The directory prometheus_client writes to. Set, it switches every metric of the process to
#: files there; prometheus_client reads it once, when it is first imported.
ENV = "PROMETHEUS_MULTIPROC_DIR"

logger = logging.getLogger("a2a_endpoint.metrics")

_exit_registered = threading.Event()


def directory() -> str | None:
    """The multiprocess directory, or None in single-process mode (as prometheus_client
    decides it: the variable is present, even if empty)."""
    return os.environ.get(ENV)


def process_exited(pid: int | None = None) -> None:
    """This process (or ``pid``) has ended: its live gauges (streams open, jobs running)
    leave the sums. Its counters and histograms stay counted. Never raises."""
    path = directory()
    if path is None:
        return
    try:
        multiprocess.mark_process_dead(pid if pid is not None else os.getpid(), path)
    except Exception:
        logger.warning(
            "Could not mark process %s dead in %s", pid or os.getpid(), path, exc_info=True
        )


def register_exit() -> None:
    """Mark this process dead when its interpreter exits (daphne after SIGTERM, a Celery
    worker's main process). Forked pool processes end without it (``os._exit``): the Celery
    backend marks them on ``worker_process_shutdown``."""
    if directory() is None or _exit_registered.is_set():
        return
    _exit_registered.set()
    atexit.register(process_exited)
