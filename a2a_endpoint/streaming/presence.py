"""Processes that share one database while each keeps its task events in memory.

The in-memory bus (``EVENT_BUS = "memory"``) carries events within one process. Several web
processes with it (two daphnes of one project, a process manager's workers ...) each keep
their own: a stream on one never hears the events of a task whose job runs on another, a
CancelTask may not reach the job, and nothing fails. So each such process records a
heartbeat in the database, the one thing they surely share (Django's default cache is per
process), and counts the others: on the first it finds it logs an ERROR (once), and the
health view names them.

Cheap by design: at most one heartbeat (an UPDATE, a SELECT) per ``MEMORY_BUS_HEARTBEAT``
seconds, taken on a request (no thread, no timer); every other request compares two clock
readings. A process is live while its last heartbeat is younger than three intervals. One
that stops cleanly deletes its row (``atexit``); one that was killed is forgotten after
three intervals, or at once by a process on the same host and PID namespace that finds its
pid gone.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.core.signals import setting_changed
from django.utils import timezone
from django.utils.module_loading import import_string

from a2a_endpoint.conf import SETTING_NAME, app_settings
from a2a_endpoint.models import ServerProcess
from a2a_endpoint.store import in_thread
from a2a_endpoint.streaming.memory import InMemoryEventBus

logger = logging.getLogger("a2a_endpoint.streaming")

#: A process is live while its last heartbeat is younger than this many intervals.
LIVE_INTERVALS = 3
#: Seconds between looks at the settings while there is no heartbeat to take.
IDLE_RECHECK = 60.0


@dataclass(frozen=True, slots=True)
class _Identity:
    id: uuid.UUID
    host: str
    pid_namespace: str
    pid: int
    started_at: datetime


def _pid_namespace() -> str:
    """This process's PID namespace (Linux): pids are comparable only within one."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: existence and permission check only
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


@functools.lru_cache(maxsize=8)
def _is_memory_bus(path: Any) -> bool:
    if path in {"memory", "channels"}:  # runtime.EVENT_BUSES' names
        return path == "memory"
    try:
        bus = import_string(path) if isinstance(path, str) else path
    except ImportError:
        return False  # reported by the bus's own construction
    return isinstance(bus, type) and issubclass(bus, InMemoryEventBus)


def uses_memory_bus() -> bool:
    """The configured event bus is the in-memory one (or a subclass of it)."""
    return _is_memory_bus(app_settings.EVENT_BUS)


class Presence:
    """This process's heartbeat and what the last one saw of the others."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._identity: _Identity | None = None
        self._due = 0.0
        self._others: list[str] = []
        self._warned = False

    def reset(self) -> None:
        """Beat at the next request (the settings changed)."""
        self._due = 0.0
        self._others = []

    @property
    def others(self) -> list[str]:
        """The other live processes with a memory bus on this database, as of the last beat."""
        return list(self._others)

    async def beat(self) -> list[str]:
        """Record a heartbeat when one is due; the other live processes (see ``others``).

        Never raises: a database that fails here is reported by the health view's own
        check, and the request goes on (it writes nothing else here).
        """
        now = time.monotonic()
        if now < self._due:  # every request but one an interval: two clock readings
            return self.others
        interval = float(app_settings.MEMORY_BUS_HEARTBEAT)
        if interval <= 0 or not uses_memory_bus():
            self._due = now + IDLE_RECHECK  # a change of the settings resets it at once
            return self.others
        self._due = now + interval  # concurrent requests do not beat again meanwhile
        try:
            self._others = await in_thread(self._beat_now)(interval)
        except Exception:
            logger.info("Could not record this process's memory-bus heartbeat", exc_info=True)
        if self._others and not self._warned:
            self._warned = True
            logger.error(
                "EVENT_BUS is 'memory', but %d other process(es) serve this database (%s): "
                "each keeps its task events to itself, so streams and blocking sends miss "
                "the events of tasks that run in another process, and CancelTask may not "
                "reach their jobs. Serve with one process, or set EVENT_BUS to 'channels' "
                "with a channels_redis layer (docs/deployment.md).",
                len(self._others),
                "; ".join(self._others),
            )
        return self.others

    def _beat_now(self, interval: float) -> list[str]:
        me = self._me()
        now = timezone.now()
        rows = ServerProcess.objects
        rows.beat(
            me.id,
            now,
            host=me.host,
            pid_namespace=me.pid_namespace,
            pid=me.pid,
            started_at=me.started_at,
        )
        horizon = now - timedelta(seconds=interval * LIVE_INTERVALS)
        rows.silent(before=horizon).delete()
        others = list(rows.live(since=horizon).other_than(me.id))
        gone = [row.id for row in others if self._gone(row, me)]
        if gone:
            rows.forget(gone)
        return [
            f"{row.host} pid {row.pid}, seen {(now - row.seen_at).total_seconds():.0f} s ago"
            for row in others
            if row.id not in gone
        ]

    @staticmethod
    def _gone(row: ServerProcess, me: _Identity) -> bool:
        """A process of this host (and PID namespace) whose pid no longer exists."""
        same_host = row.host == me.host and row.pid_namespace == me.pid_namespace != ""
        return same_host and not _alive(row.pid)

    def _me(self) -> _Identity:
        with self._lock:
            if self._identity is None or self._identity.pid != os.getpid():  # forked
                first = self._identity is None
                self._identity = _Identity(
                    uuid.uuid4(),
                    socket.gethostname(),
                    _pid_namespace(),
                    os.getpid(),
                    timezone.now(),
                )
                if first:
                    atexit.register(self._leave)
            return self._identity

    def _leave(self) -> None:
        """At a clean exit: the others stop counting this process at once."""
        identity = self._identity
        if identity is not None and identity.pid == os.getpid():
            with contextlib.suppress(Exception):
                ServerProcess.objects.forget([identity.id])


presence = Presence()


def _on_setting_changed(*, setting: str, **kwargs: Any) -> None:
    if setting == SETTING_NAME:
        presence.reset()


setting_changed.connect(_on_setting_changed)
