"""The configured parts, built once per process: event bus, task store, execution backend."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.core.signals import setting_changed
from django.utils.module_loading import import_string

from a2a_endpoint import metrics
from a2a_endpoint.conf import SETTING_NAME, app_settings
from a2a_endpoint.execution.backends import ExecutionBackend
from a2a_endpoint.store import StoredEvent, TaskStore
from a2a_endpoint.streaming.bus import EventBus

EVENT_BUSES = {
    "memory": "a2a_endpoint.streaming.bus.InMemoryEventBus",
    "channels": "a2a_endpoint.streaming.bus.ChannelLayerEventBus",
}
BACKENDS = {
    "inline": "a2a_endpoint.execution.backends.InlineBackend",
    "celery": "a2a_endpoint.execution.celery_backend.CeleryBackend",
}


@functools.cache
def get_event_bus() -> EventBus:
    path = app_settings.EVENT_BUS
    return import_string(EVENT_BUSES.get(path, path))()


@functools.cache
def get_store() -> TaskStore:
    return TaskStore(publisher=_counting(get_event_bus().publish), pusher=_push)


def _counting(publish: Callable[[StoredEvent], None]) -> Callable[[StoredEvent], None]:
    """``publish``, counting each task that finished (``a2a_tasks_finished_total``).

    The store hands every committed change to its publisher once, and a task's terminal
    state is its last change: whatever finished it (its agent, CancelTask, a lost worker).
    """

    def published(event: StoredEvent) -> None:
        if event.state.is_terminal:
            metrics.task_finished(event.state.name.lower())
        publish(event)

    return published


def _push(task_id: str) -> None:
    """Wake the push sender of the configured backend (the store is built before it)."""
    get_backend().push(task_id)


@functools.cache
def get_backend() -> ExecutionBackend:
    path = app_settings.EXECUTION_BACKEND
    return import_string(BACKENDS.get(path, path))(get_store())


def reset() -> None:
    """Forget the built parts (tests that change A2A_ENDPOINT get fresh ones)."""
    if get_backend.cache_info().currsize:
        backend = get_backend()
        shutdown = getattr(backend, "shutdown", None)
        if shutdown is not None:
            shutdown()
    for getter in (get_event_bus, get_store, get_backend):
        getter.cache_clear()


def _on_setting_changed(*, setting: str, **kwargs: Any) -> None:
    if setting == SETTING_NAME:
        reset()


setting_changed.connect(_on_setting_changed)
