"""Wall-clock spans of the steps of a request, across daphne and the Celery worker.

Installed by ``bench.settings`` when ``BENCH_TRACE`` names a file: each process wraps a few
service, store, bus and backend methods so that entering and leaving them appends a line
``<unix time> <pid> <'>' or '<'> <name>`` to that file (one ``write`` per line, appended, so
processes do not interleave lines). ``python -m bench.trace`` reads it back. Wrapping happens
when a process serves its first request or starts its first job (the apps are loaded then).
"""

from __future__ import annotations

import functools
import inspect
import os
import time
from typing import Any

#: (module, class, method) wrapped in every process, in the order of a blocking echo.
TRACED = (
    ("a2a_endpoint.service.handler", "RequestHandler", "send_message"),
    ("a2a_endpoint.service.handler", "RequestHandler", "_wait"),
    ("a2a_endpoint.store", "TaskStore", "task_for_message"),
    ("a2a_endpoint.store", "TaskStore", "create_task"),
    ("a2a_endpoint.store", "TaskStore", "load"),
    ("a2a_endpoint.store", "TaskStore", "claim_job"),
    ("a2a_endpoint.store", "TaskStore", "update_status"),
    ("a2a_endpoint.store", "TaskStore", "add_artifact"),
    ("a2a_endpoint.store", "TaskStore", "release_job"),
    ("a2a_endpoint.store", "TaskStore", "get_task"),
    ("a2a_endpoint.streaming.bus", "ChannelLayerEventBus", "publish"),
    ("a2a_endpoint.execution.celery_backend", "CeleryBackend", "submit"),
)

_installed = False


def log(path: str, mark: str, name: str) -> None:
    line = f"{time.time():.6f} {os.getpid()} {mark} {name}\n".encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def _wrap(path: str, owner: type, attribute: str) -> None:
    original = getattr(owner, attribute)
    name = f"{owner.__name__}.{attribute}"
    if inspect.iscoroutinefunction(original):

        @functools.wraps(original)
        async def traced_async(*args: Any, **kwargs: Any) -> Any:
            log(path, ">", name)
            try:
                return await original(*args, **kwargs)
            finally:
                log(path, "<", name)

        setattr(owner, attribute, traced_async)
        return

    @functools.wraps(original)
    def traced(*args: Any, **kwargs: Any) -> Any:
        log(path, ">", name)
        try:
            return original(*args, **kwargs)
        finally:
            log(path, "<", name)

    setattr(owner, attribute, traced)


def install(path: str) -> None:
    """Wrap the TRACED methods of this process (once)."""
    global _installed
    if _installed:
        return
    _installed = True
    import importlib

    for module, cls, attribute in TRACED:
        _wrap(path, getattr(importlib.import_module(module), cls), attribute)


def connect(path: str) -> None:
    """Install at the first request (daphne) or in each worker process (Celery prefork)."""
    from django.core.signals import request_started

    request_started.connect(lambda **kwargs: install(path), weak=False)
    try:
        from celery.signals import task_prerun, worker_process_init
    except ImportError:  # pragma: no cover - Celery is installed with the bench
        return
    worker_process_init.connect(lambda **kwargs: install(path), weak=False)
    task_prerun.connect(lambda **kwargs: log(path, "|", "celery.task_prerun"), weak=False)
