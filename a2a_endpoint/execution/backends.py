"""Execution backends: where agent jobs and push deliveries run. ``InlineBackend`` runs them
in this process."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from abc import ABC, abstractmethod
from concurrent.futures import Future, ThreadPoolExecutor

from django.db import close_old_connections

from a2a_endpoint import logs, metrics
from a2a_endpoint.conf import app_settings
from a2a_endpoint.execution.runner import run_task
from a2a_endpoint.push.sender import deliver_task, lease_seconds
from a2a_endpoint.store import TaskStore

logger = logging.getLogger("a2a_endpoint.execution")

#: Threads of the inline backend's push sender (one config at a time each).
PUSH_THREADS = 4


class ExecutionBackend(ABC):
    """Runs the agent job of a task somewhere. ``submit`` is called after the commit."""

    def __init__(self, store: TaskStore) -> None:
        self.store = store

    @abstractmethod
    def submit(self, task_id: str) -> None:
        """Start the agent job for a stored task (its newest user message)."""

    @abstractmethod
    def cancel(self, task_id: str) -> None:
        """Tell the job of a task that was just canceled to stop."""

    def push(self, task_id: str) -> None:
        """Send what the task's webhooks are owed (called after the commit that owed it).

        This default sends from a thread of its own and schedules no retry: a backend of a
        project's own should override it (the inline and Celery backends do).
        """
        threading.Thread(
            target=_deliver, args=(self.store, task_id), name="a2a-push", daemon=True
        ).start()

    async def ping(self, timeout: float) -> bool:
        """Prove that jobs handed over now would reach the backend's service (its broker)
        within ``timeout`` seconds: True, or raises (a health check's probe). False: the
        backend has nothing outside this process to check (the inline backend)."""
        return False


def _deliver(store: TaskStore, task_id: str) -> float | None:
    """Send the task's owed events from this thread; seconds until a retry is due."""
    try:
        return deliver_task(store, task_id)
    except Exception:
        logger.exception("Push delivery for task %s failed; it is retried", task_id)
        return lease_seconds()  # the sender's lease has lapsed by then
    finally:
        close_old_connections()


class InlineBackend(ExecutionBackend):
    """The embedded default: jobs run on a private event loop thread of this process.

    Async agents run on that loop; sync agents in its thread pool. Push deliveries run in a
    small pool of their own, their retries timed on the loop, and every PUSH_SWEEP_INTERVAL
    a sweep sends what a previous run of the process left owed. No service needed, but
    jobs die with the process: use the Celery backend in production.
    """

    def __init__(self, store: TaskStore) -> None:
        super().__init__(store)
        self._jobs: dict[str, tuple[Future[None], threading.Event]] = {}
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._pool = ThreadPoolExecutor(
            int(app_settings.INLINE_MAX_WORKERS), thread_name_prefix="a2a-agent"
        )
        self._loop.set_default_executor(self._pool)
        self._push_pool = ThreadPoolExecutor(PUSH_THREADS, thread_name_prefix="a2a-push")
        self._thread = threading.Thread(target=self._run, name="a2a-inline-backend", daemon=True)
        self._thread.start()
        sweep = float(app_settings.PUSH_SWEEP_INTERVAL)
        if sweep > 0 and app_settings.PUSH_NOTIFICATIONS:
            self._loop.call_soon_threadsafe(self._loop.call_later, sweep, self._sweep, sweep)

    def _run(self) -> None:
        try:
            self._loop.run_forever()
        finally:
            # Closed in its own thread: what wraps the close (channels_redis flushes the
            # layer a job published through on this loop) runs the loop once more, which a
            # thread running another loop (a server's, a test's) could not do.
            try:
                self._loop.close()
            except Exception:
                logger.warning("Could not close the inline backend's event loop", exc_info=True)

    def submit(self, task_id: str) -> None:
        cancel_event = threading.Event()
        # The job's task copies the context it is started from: a job's own log fields,
        # not the request's that submitted it (kept as origin_request_id).
        context = logs.job_context(task_id=task_id, job_id=logs.new_id(), method="job")
        future = context.run(
            asyncio.run_coroutine_threadsafe,
            run_task(task_id, self.store, cancel_event),
            self._loop,
        )
        with self._lock:
            self._jobs[task_id] = (future, cancel_event)
        future.add_done_callback(lambda done: self._forget(task_id, done))
        metrics.job_queued("inline")

    def cancel(self, task_id: str) -> None:
        with self._lock:
            job = self._jobs.get(task_id)
        if job is None:
            return
        future, cancel_event = job
        cancel_event.set()
        # An async agent that ignores the signal is stopped after the grace period; a sync
        # one is refused at its next update (threads cannot be killed safely).
        grace = float(app_settings.CANCEL_GRACE_PERIOD)
        self._loop.call_soon_threadsafe(self._loop.call_later, grace, future.cancel)

    def push(self, task_id: str) -> None:
        with contextlib.suppress(RuntimeError):  # shut down: the rows stay owed
            self._push_pool.submit(self._push_now, task_id)

    def _push_now(self, task_id: str) -> None:
        wait = _deliver(self.store, task_id)
        if wait is not None and not self._loop.is_closed():
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._loop.call_later, wait, self.push, task_id)

    def _sweep(self, interval: float) -> None:
        """On the loop: look for owed events no sender holds, then again after ``interval``."""
        with contextlib.suppress(RuntimeError):
            self._push_pool.submit(self._sweep_now)
        self._loop.call_later(interval, self._sweep, interval)

    def _sweep_now(self) -> None:
        try:
            overdue = self.store.push_tasks_overdue(lease_seconds())
        except Exception:
            logger.exception("Sweeping for owed push deliveries failed")
            return
        finally:
            close_old_connections()
        for task_id in overdue:
            self._push_now(task_id)

    def running(self, task_id: str) -> bool:
        with self._lock:
            return task_id in self._jobs

    def _forget(self, task_id: str, done: Future[None]) -> None:
        with self._lock:
            if self._jobs.get(task_id, (None,))[0] is done:
                del self._jobs[task_id]
        if not done.cancelled() and done.exception() is not None:
            logger.error("Agent job for task %s crashed", task_id, exc_info=done.exception())

    def shutdown(self, timeout: float = 10.0) -> None:
        """Stop every job, then the loop and its threads (their DB connections go with them).

        Jobs are told to stop as on CancelTask; the tasks they leave unfinished stay as they
        are (the inline backend keeps no jobs across restarts: see docs/architecture.md).
        """
        with self._lock:
            jobs = list(self._jobs.values())
        for future, cancel_event in jobs:
            cancel_event.set()
            future.cancel()
        if self._loop.is_running():
            drained = asyncio.run_coroutine_threadsafe(_drain(), self._loop)
            with contextlib.suppress(Exception):
                drained.result(timeout)
        # Threads first: a finishing sync job reports back to the loop, so it must still run.
        self._pool.shutdown(wait=True, cancel_futures=True)
        # Deliveries not sent yet stay owed in the outbox (the next sweep sends them).
        self._push_pool.shutdown(wait=True, cancel_futures=True)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout)  # the thread closes the loop as it ends


async def _drain() -> None:
    """Wait for every other task of the backend loop to finish after its cancellation."""
    current = asyncio.current_task()
    pending = [task for task in asyncio.all_tasks() if task is not current]
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
