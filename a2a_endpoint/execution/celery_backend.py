"""The Celery execution backend: agent jobs on Celery workers. Celery is imported only here.

Jobs carry only the task id and are enqueued after the commit that stored the message
(the service calls ``submit`` from ``transaction.on_commit``). The job stays owed until a
worker claims it: the sweeper enqueues it again if that did not happen in time (the broker
was down, the web process died before enqueueing it, or the broker lost it). Jobs are
``acks_late`` with ``reject_on_worker_lost``, and leased (see ``jobs.py``): a redelivered job
never runs an agent twice for one message, and a job lost with its worker is retried or
failed by the sweeper. A job that ignores CancelTask is killed after the grace period
(``revoke(terminate=True)``: the prefork pool), by a stop job or, when no pool process is
free to run it, by the sweeper.

Push deliveries run here too (``deliver_push_notifications``, woken after the commit that
owed them, acks_late), and the sweeper hands over the ones whose sender was lost. So does the
retention purge (``purge_expired_tasks``), which Celery beat schedules.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

try:
    from celery import current_app, shared_task
    from celery.signals import worker_process_shutdown, worker_ready, worker_shutdown
except ImportError as exc:  # pragma: no cover - reported by system check E010
    raise ImportError(
        "The Celery execution backend needs Celery: pip install 'a2a-endpoint[celery]'"
    ) from exc

from a2a_endpoint import logs, metrics
from a2a_endpoint.conf import app_settings
from a2a_endpoint.execution import runtime
from a2a_endpoint.execution.backends import ExecutionBackend
from a2a_endpoint.execution.jobs import run_leased_job
from a2a_endpoint.push.sender import deliver_task, lease_seconds
from a2a_endpoint.store import purge_expired, retention_policy

logger = logging.getLogger("a2a_endpoint.execution")

RUN_TASK = "a2a_endpoint.run_agent_task"
STOP_JOB = "a2a_endpoint.stop_canceled_job"
RECOVER = "a2a_endpoint.recover_lost_jobs"
PUSH = "a2a_endpoint.deliver_push_notifications"
PURGE_EXPIRED = "a2a_endpoint.purge_expired_tasks"
#: Seconds a finished job waits for its leftover tasks (leaving channel-layer groups).
LEFTOVER_TIMEOUT = 5.0
#: Threads of a job loop: a sync agent, the heartbeat's and the updater's store calls.
JOB_THREADS = 4


def _queue() -> dict[str, Any]:
    queue = app_settings.CELERY_QUEUE
    return {"queue": queue} if queue else {}


class CeleryBackend(ExecutionBackend):
    """Production backend: any worker runs any job; cancellation reaches it wherever it runs."""

    def submit(self, task_id: str) -> None:
        _enqueue(task_id)

    def push(self, task_id: str) -> None:
        _enqueue_push(task_id)

    def cancel(self, task_id: str) -> None:
        # The task is CANCELED already and the job hears it on the bus at once. A job still
        # running after the grace period is terminated by Celery (prefork pool).
        stop_canceled_job.apply_async(
            args=[task_id], countdown=float(app_settings.CANCEL_GRACE_PERIOD) + 1, **_queue()
        )

    async def ping(self, timeout: float) -> bool:
        """A fresh connection to the broker, in a thread (kombu blocks), within ``timeout``.

        Fresh, not one of the producer pool's: a pooled connection may look connected to
        a broker that went away since.
        """
        async with asyncio.timeout(timeout):
            await asyncio.to_thread(_connect_to_broker, timeout)
        return True


def _connect_to_broker(timeout: float) -> None:
    """Connect to the broker once (no retry), every socket wait bounded by ``timeout``."""
    with current_app.connection_for_write(connect_timeout=timeout) as connection:
        if connection.transport.driver_type == "redis":
            # The Redis transport ignores connect_timeout: it reads its socket options.
            connection.transport_options.update(
                socket_connect_timeout=timeout, socket_timeout=timeout
            )
        # Connecting opens a channel, which the Redis transport checks with a PING.
        connection.ensure_connection(max_retries=0, timeout=timeout)


_loops = threading.local()


def _job_loop() -> asyncio.AbstractEventLoop:
    """The event loop of this worker thread, reused by every job it runs.

    Not a new loop per job (``asyncio.run``): channels_redis keeps receive state (asyncio
    locks) bound to the loop that used it, so a later job's cancel watch failed ("bound to a
    different event loop") and heard CancelTask only from the heartbeat, a third of a lease
    later; and closing the loop cancelled the bus's leaving of the task's group.
    """
    loop: asyncio.AbstractEventLoop | None = getattr(_loops, "loop", None)
    if loop is None or loop.is_closed():
        loop = _loops.loop = asyncio.new_event_loop()
        # The job's store calls and its sync agent run in these threads, each keeping a
        # database connection for CONN_MAX_AGE: a small pool bounds the worker's connections
        # (asyncio's default pool has up to 32 threads on a big host).
        loop.set_default_executor(ThreadPoolExecutor(JOB_THREADS, thread_name_prefix="a2a-job"))
    return loop


def close_job_loop() -> None:
    """Stop what is left on this thread's job loop (the event bus's reader) and close it."""
    loop: asyncio.AbstractEventLoop | None = getattr(_loops, "loop", None)
    if loop is None or loop.is_closed():
        return
    pending = asyncio.all_tasks(loop)
    for task in pending:
        task.cancel()
    if pending:
        loop.run_until_complete(asyncio.wait(pending, timeout=LEFTOVER_TIMEOUT))
    loop.close()
    _loops.loop = None


@shared_task(
    name=RUN_TASK, bind=True, acks_late=True, reject_on_worker_lost=True, ignore_result=True
)
def run_agent_task(self: Any, task_id: str) -> None:
    """Run the agent for the newest message of ``task_id`` (thin: the work is in ``jobs``)."""
    job_id = self.request.id or f"local-{threading.get_ident()}"
    store = runtime.get_store()
    bus = runtime.get_event_bus()
    loop = _job_loop()
    # The job's asyncio task copies these (its runner adds the attempt and the caller).
    with logs.scope(fresh=True, task_id=task_id, job_id=job_id, method="job"):
        loop.run_until_complete(run_leased_job(task_id, job_id, store, bus))
    # The loop does not run between jobs: let what the job left behind finish now (the bus
    # leaves the task's channel-layer group in a task of its own), not at the next job. The
    # bus's own reader stays: it waits for the next job's messages.
    pending = asyncio.all_tasks(loop) - bus.resident_tasks(loop)
    if pending:
        loop.run_until_complete(asyncio.wait(pending, timeout=LEFTOVER_TIMEOUT))


def _terminate(task_id: str, job_id: str) -> None:
    logger.warning("Terminating job %s: task %s was canceled and it kept running", job_id, task_id)
    current_app.control.revoke(job_id, terminate=True, signal="SIGKILL")
    runtime.get_store().release_job(task_id, job_id)


@shared_task(name=STOP_JOB, ignore_result=True)
def stop_canceled_job(task_id: str) -> None:
    """Terminate the job of a canceled task if it ignored the cancellation."""
    job_id = runtime.get_store().job_of_finished_task(task_id)
    if job_id is not None:
        _terminate(task_id, job_id)


def stop_stubborn_jobs() -> list[str]:
    """Terminate jobs still running a grace period after their task ended; their task ids.

    The sweeper's backstop for ``stop_canceled_job``, which needs a free pool process: on a
    worker whose every process is busy (one of them with the very job to stop) it would wait.
    """
    grace = float(app_settings.CANCEL_GRACE_PERIOD)
    stopped = []
    for task_id, job_id in runtime.get_store().jobs_outliving_their_tasks(grace):
        _terminate(task_id, job_id)
        stopped.append(task_id)
    return stopped


def _enqueue(task_id: str) -> None:
    run_agent_task.apply_async(args=[task_id], **_queue())
    metrics.job_queued("celery")


def _enqueue_push(task_id: str, countdown: float | None = None) -> None:
    queue = app_settings.PUSH_CELERY_QUEUE
    options = {"queue": queue} if queue else _queue()
    deliver_push_notifications.apply_async(args=[task_id], countdown=countdown, **options)


@shared_task(name=PUSH, acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def deliver_push_notifications(task_id: str) -> None:
    """Send what the webhooks of ``task_id`` are owed (thin: the work is in push.sender),
    and enqueue itself again for when the next retry is due."""
    try:
        wait = deliver_task(runtime.get_store(), task_id)
    except Exception:
        logger.exception("Push delivery for task %s failed; the sweeper retries it", task_id)
        return
    if wait is not None:
        _enqueue_push(task_id, countdown=wait)


def sweep_push_deliveries() -> list[str]:
    """Hand the sender every task owing an event that no sender has held for a lease: its
    worker was killed mid-delivery, or its wake-up never reached the broker."""
    overdue = runtime.get_store().push_tasks_overdue(lease_seconds())
    for task_id in overdue:
        _enqueue_push(task_id)
    if overdue:
        logger.info("Handed %d task(s) with overdue push deliveries to the sender", len(overdue))
    return overdue


@shared_task(name=RECOVER, ignore_result=True)
def recover_lost_jobs() -> list[str]:
    """Retry or fail tasks whose job stopped renewing its lease (its worker is gone), then
    hand over every job owed past its deadline (the retried ones among them, at once)."""
    retry = app_settings.LOST_JOB_POLICY == "retry"
    store = runtime.get_store()
    retried = store.recover_lost_jobs(
        retry=retry, max_retries=int(app_settings.LOST_JOB_MAX_RETRIES)
    )
    handed = store.hand_off_owed_jobs(_enqueue)
    if handed:
        logger.info("Handed %d owed job(s) to the broker again: %s", len(handed), handed)
    return retried


@shared_task(name=PURGE_EXPIRED, ignore_result=True)
def purge_expired_tasks() -> dict[str, int]:
    """Delete the tasks RETENTION lets go (thin: the work is the store's ``purge_expired``);
    returns how many went per state. Scheduled by Celery beat (docs/retention.md); nothing
    to do when RETENTION is empty. A database failure rolls back the batch under way and
    fails this run (Celery logs it); the earlier batches stay deleted, the next run goes on."""
    policy = retention_policy()
    if not policy:
        return {}
    result = purge_expired(policy)
    logger.info(
        "Purged %d expired task(s) in %d batch(es), %.2f s (longest batch %.0f ms)",
        result.total,
        result.batches,
        result.seconds,
        result.longest_batch * 1000,
    )
    return {state.value: count for state, count in result.deleted.items()}


class _Sweeper(threading.Thread):
    """Each worker sweeps for lost jobs, so a dead worker is noticed by the live ones, and for
    stubborn ones (from its main process: no pool process needed to stop them)."""

    def __init__(self) -> None:
        super().__init__(name="a2a-lost-job-sweeper", daemon=True)
        self.stopped = threading.Event()

    def run(self) -> None:
        interval = max(float(app_settings.JOB_LEASE) / 2, 0.5)
        while not self.stopped.wait(interval):
            try:
                recover_lost_jobs()
                stop_stubborn_jobs()
            except Exception:
                logger.exception("Sweeping for lost jobs failed")
            if app_settings.PUSH_NOTIFICATIONS:
                try:
                    sweep_push_deliveries()
                except Exception:
                    logger.exception("Sweeping for owed push deliveries failed")


_sweeper: _Sweeper | None = None


@worker_ready.connect
def _start_sweeper(**kwargs: Any) -> None:
    global _sweeper
    if not app_settings.LOST_JOB_SWEEPER or not isinstance(runtime.get_backend(), CeleryBackend):
        return
    _sweeper = _Sweeper()
    _sweeper.start()


@worker_shutdown.connect
def _stop_sweeper(**kwargs: Any) -> None:
    if _sweeper is not None:
        _sweeper.stopped.set()


@worker_process_shutdown.connect
def _close_job_loop(**kwargs: Any) -> None:
    # A pool process ends: its job loop (run by its main thread) closes cleanly.
    try:
        close_job_loop()
    except Exception:
        logger.warning("Could not close the job loop", exc_info=True)


@worker_ready.connect
def _check_metrics_reach_a_scrape(**kwargs: Any) -> None:
    # Without PROMETHEUS_MULTIPROC_DIR a worker's metrics are invisible: say so at start.
    metrics.worker_ready()


@worker_process_shutdown.connect
def _mark_metrics_dead(**kwargs: Any) -> None:
    # A pool process ends (os._exit: no atexit): its live gauges (jobs running) leave the
    # sums of a multiprocess scrape; its counters stay counted (docs/metrics.md).
    metrics.process_exited()
