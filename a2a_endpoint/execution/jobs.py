"""Leased jobs for out-of-process workers: claim, heartbeat, cancel watch, release.

A job claims the task's newest user message under a lease before it runs the agent. A second
delivery of the same job (a broker redelivery, a retry) finds the message claimed and does
nothing; a job whose worker died stops renewing its lease, and ``recover_lost_jobs`` then
retries or fails the task (A2A tasks are never left WORKING by a lost worker).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import threading

from a2a_endpoint.conf import app_settings
from a2a_endpoint.execution.runner import run_task
from a2a_endpoint.lifecycle import TaskState
from a2a_endpoint.store import TaskStore, in_thread
from a2a_endpoint.streaming.bus import EventBus

logger = logging.getLogger("a2a_endpoint.execution")


def lease_seconds() -> float:
    return float(app_settings.JOB_LEASE)


class _CancelSignal:
    """The stop signal of a job: a threading.Event for the agent (``context.cancel_event``,
    also read by sync agents in their thread) and an asyncio.Event the job awaits."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.heard = asyncio.Event()

    def set(self) -> None:
        self.event.set()
        self.heard.set()


async def _heartbeat(store: TaskStore, task_id: str, job_id: str, cancel: _CancelSignal) -> None:
    """Renew the lease while the agent runs; a task found terminal means: stop."""
    interval = lease_seconds() / 3
    while True:
        await asyncio.sleep(interval)
        state = await in_thread(store.renew_job)(task_id, job_id, lease_seconds())
        if state is None or state.is_terminal:
            cancel.set()


async def _watch_cancel(bus: EventBus, task_id: str, cancel: _CancelSignal) -> None:
    """Hear CancelTask at once through the bus (the heartbeat is the slower fallback)."""
    async with bus.watch_cancel(task_id) as updates:
        while True:
            event = await updates.get()
            if event.state is TaskState.CANCELED:
                cancel.set()
                return


def _agent_is_async() -> bool:
    return inspect.iscoroutinefunction(getattr(app_settings.AGENT, "execute", None))


async def _stop_after_grace(job: asyncio.Task[None], cancel: _CancelSignal) -> None:
    """An async agent that ignores the cancel signal is cancelled after the grace period.

    A sync agent's thread cannot be stopped: cancelling its job would only end the wait for
    it and release the lease while the agent still runs, so the backend's stop job (which
    kills the process of a job still leasing a canceled task) would find nothing to stop.
    """
    if not _agent_is_async():
        return
    await cancel.heard.wait()
    try:
        await asyncio.wait_for(asyncio.shield(job), float(app_settings.CANCEL_GRACE_PERIOD))
    except TimeoutError:
        job.cancel()


async def run_leased_job(task_id: str, job_id: str, store: TaskStore, bus: EventBus) -> bool:
    """Run the agent for the task's newest message unless a job already has it.

    Returns False when there was nothing to do (claimed elsewhere, finished, or terminal).
    """
    claimed = await in_thread(store.claim_job)(task_id, job_id, lease_seconds())
    if claimed is None:
        logger.info(
            "Job %s for task %s: nothing to do (already claimed or finished)", job_id, task_id
        )
        return False
    cancel = _CancelSignal()
    job = asyncio.create_task(run_task(task_id, store, cancel.event, claimed))
    helpers = [
        asyncio.create_task(_heartbeat(store, task_id, job_id, cancel)),
        asyncio.create_task(_watch_cancel(bus, task_id, cancel)),
        asyncio.create_task(_stop_after_grace(job, cancel)),
    ]
    try:
        with contextlib.suppress(asyncio.CancelledError):
            await job
    finally:
        for helper in helpers:
            helper.cancel()
        await asyncio.gather(*helpers, return_exceptions=True)
        await in_thread(store.release_job)(task_id, job_id)
    return True
