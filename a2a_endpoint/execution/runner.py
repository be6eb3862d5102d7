"""Runs one agent job for a task: load, build the context, execute, and never leave it WORKING."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import threading
import time

from a2a_endpoint import logs, metrics
from a2a_endpoint.conf import app_settings
from a2a_endpoint.errors import TaskStateError
from a2a_endpoint.execution.context import RequestContext
from a2a_endpoint.execution.executor import AgentError, AgentExecutor
from a2a_endpoint.execution.updater import TaskUpdater
from a2a_endpoint.lifecycle import TaskState
from a2a_endpoint.store import ClaimedJob, TaskStore, in_thread
from a2a_endpoint.types import Role

logger = logging.getLogger("a2a_endpoint.execution")

FAILED_MESSAGE = "The agent failed while working on this task."


def _build_context(
    store: TaskStore,
    task_id: str,
    cancel_event: threading.Event,
    claimed: ClaimedJob | None = None,
) -> RequestContext | None:
    attempt = 1
    if claimed is not None:  # read by the job's claim, under the task's row lock
        record, history, attempt = claimed.record, claimed.history, claimed.attempt
    else:
        record = store.load(task_id)
        if record is None or record.state.is_terminal:
            return None  # canceled (or finished) before the job started: nothing to do
        history = store.history(task_id)
    # Up to the message this job runs: a retry after a lost worker sees the conversation the
    # lost run saw, not that run's own status messages nor the store's notice of the retry
    # (they are the clients'; the agent knows it is a retry from ``attempt``).
    last = max(i for i, m in enumerate(history) if m.role is Role.USER)
    history = history[: last + 1]
    incoming = history[-1]
    return RequestContext(
        task_id=record.id,
        context_id=record.context_id,
        message=incoming,
        history=history,
        metadata=record.metadata,
        owner=record.owner,
        tenant=record.tenant,
        cancel_event=cancel_event,
        attempt=attempt,
    )


def _finish(store: TaskStore, updater: TaskUpdater) -> None:
    """An agent that returned without a final word completes its task."""
    if updater.settled:
        # It ended in a terminal or interrupted state itself. (An interrupted task may
        # already be WORKING again on the client's answer: that is the next job's.)
        return
    record = store.load(updater.task_id)
    if record is not None and record.state in (TaskState.SUBMITTED, TaskState.WORKING):
        # Finished concurrently (e.g. canceled)? That outcome stands.
        with contextlib.suppress(TaskStateError):
            updater.complete()


def _fail(updater: TaskUpdater, exc: BaseException) -> None:
    text = str(exc) if isinstance(exc, AgentError) and str(exc) else FAILED_MESSAGE
    with contextlib.suppress(TaskStateError):
        updater.fail(text)


async def run_task(
    task_id: str,
    store: TaskStore,
    cancel_event: threading.Event | None = None,
    claimed: ClaimedJob | None = None,
) -> None:
    """Execute the configured agent for ``task_id``; failures end as TASK_STATE_FAILED.

    ``claimed``: what a leased job's claim read (``TaskStore.claim_job``), which the
    agent's context is built from; without it the task is read first.
    """
    cancel_event = cancel_event or threading.Event()
    if claimed is not None:
        context = _build_context(store, task_id, cancel_event, claimed)
    else:
        context = await in_thread(_build_context)(store, task_id, cancel_event)
    if context is None:
        return
    updater = TaskUpdater(store, context)
    started = time.perf_counter()
    # Its own asyncio task (both backends start one): these fields stay the job's.
    owner, tenant = context.owner or None, context.tenant or None
    logs.update(task_id=task_id, method="job", attempt=context.attempt, caller=owner, tenant=tenant)
    logs.log_job_start(context.attempt)
    running = metrics.job_started()  # a2a_jobs_running until the finally below
    try:
        # Inside the try: an agent that cannot even be built fails its task, not the job.
        agent: AgentExecutor = app_settings.AGENT()
        if inspect.iscoroutinefunction(agent.execute):
            await agent.execute(context, updater)
        else:
            await in_thread(agent.execute)(context, updater)
    except TaskStateError:
        logger.info("Task %s finished while its agent was still writing", task_id)
    except asyncio.CancelledError:
        logger.info("Agent job for task %s was stopped", task_id)
        raise
    except AgentError as exc:
        # The documented way to fail a task: not a crash, no traceback needed.
        logger.info("Agent failed task %s: %s", task_id, exc)
        await in_thread(_fail)(updater, exc)
    except Exception as exc:
        logger.exception("Agent failed on task %s", task_id)
        await in_thread(_fail)(updater, exc)
    else:
        if not cancel_event.is_set():  # canceled, or the backend is shutting down
            await in_thread(_finish)(store, updater)
    finally:
        metrics.job_ended(running)
        state = updater.state.value if updater.state is not None else None
        logs.log_job_finish(started, state, stopped=cancel_event.is_set())
