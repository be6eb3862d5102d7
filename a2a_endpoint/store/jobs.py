"""Leased jobs (out-of-process workers: execution.jobs): claim, renew, release, hand-off
of owed jobs, and recovery of jobs lost with their worker."""

from __future__ import annotations

import functools
import logging
import os
import socket
import uuid
from collections.abc import Callable
from datetime import timedelta

import msgspec
from django.db import connection, transaction
from django.utils import timezone

from a2a_endpoint import metrics, models, types
from a2a_endpoint.lifecycle import TERMINAL_STATES, TaskState
from a2a_endpoint.store.records import (
    ClaimedJob,
    Publisher,
    _handoff_deadline,
    _parse_uuid,
    _record,
)
from a2a_endpoint.store.sql import (
    RETRY_KEY,
    _artifact_update,
    _history_rows,
    _release_sql,
    _save_fields,
)

logger = logging.getLogger("a2a_endpoint.store")


def _worker_name() -> str:
    """host:pid of this process: the one claiming a job runs it (a Celery pool process)."""
    return f"{socket.gethostname()}:{os.getpid()}"


class TaskJobs:
    """The job leases of :class:`~a2a_endpoint.store.TaskStore`."""

    publisher: Publisher | None

    def claim_job(self, task_id: str, job_id: str, lease: float) -> ClaimedJob | None:
        """Claim the newest user message of the task for ``job_id``, under a lease; the
        task and its history as they were claimed.

        None when there is nothing to run: the task is terminal, or this message was
        claimed before (by a running job, a finished one, or a lost one).
        """
        with transaction.atomic():
            task = self._locked(task_id)
            if TaskState(task.state).is_terminal:
                return None
            # The whole history: its newest user message is the one to claim, and the
            # agent's context is built from it.
            rows = _history_rows(task.pk)
            user = types.Role.USER.value
            position = max((row[0] for row in rows if row[1] == user), default=-1) + 1
            if task.job_position >= position:
                # Claimed before: a duplicate or redelivered job. If its job was lost, the
                # lapsed lease is the sweeper's to retry or fail (recover_lost_jobs).
                return None
            task.job_position = position
            task.job_id = job_id
            task.job_worker = _worker_name()  # where it runs, for the admin's task page
            task.lease_expires_at = timezone.now() + timedelta(seconds=lease)
            task.handoff_deadline = None  # handed over: the lease watches it from now on
            task.handoffs = 0
            _save_fields(
                task,
                "job_position",
                "job_id",
                "job_worker",
                "lease_expires_at",
                "handoff_deadline",
                "handoffs",
            )
        history = [msgspec.convert(payload, types.Message) for _, _, payload in rows]
        return ClaimedJob(_record(task), history, attempt=task.job_attempts + 1)

    def renew_job(self, task_id: str, job_id: str, lease: float) -> TaskState | None:
        """Extend the lease of a running job; returns the task state (None: not its job)."""
        expires = timezone.now() + timedelta(seconds=lease)
        updated = models.Task.objects.filter(pk=_parse_uuid(task_id), job_id=job_id).update(
            lease_expires_at=expires
        )
        if not updated:
            return None
        state = models.Task.objects.filter(pk=_parse_uuid(task_id)).values_list("state", flat=True)
        return TaskState(state.first())

    def release_job(self, task_id: str, job_id: str) -> None:
        """The job ended (whatever the outcome): no lease to watch any more."""
        key = models.Task._meta.pk.get_db_prep_value(_parse_uuid(task_id), connection)
        with connection.cursor() as cursor:
            cursor.execute(_release_sql(), [key, job_id])

    def job_of_finished_task(self, task_id: str) -> str | None:
        """The job still holding a live lease on a task that is already terminal."""
        row = (
            models.Task.objects.filter(
                pk=_parse_uuid(task_id),
                state__in=[state.value for state in TERMINAL_STATES],
                lease_expires_at__gt=timezone.now(),
            )
            .exclude(job_id="")
            .values_list("job_id", flat=True)
            .first()
        )
        return row

    def jobs_outliving_their_tasks(self, grace: float) -> list[tuple[str, str]]:
        """(task id, job id) of jobs still leasing a task that ended over ``grace`` s ago."""
        now = timezone.now()
        rows = (
            models.Task.objects.filter(
                state__in=[state.value for state in TERMINAL_STATES],
                lease_expires_at__gt=now,
                status_timestamp__lt=now - timedelta(seconds=grace),
            )
            .exclude(job_id="")
            .values_list("id", "job_id")[:100]
        )
        return [(str(task_id), job_id) for task_id, job_id in rows]

    def hand_off_owed_jobs(self, submit: Callable[[str], None], *, limit: int = 100) -> list[str]:
        """Hand to ``submit`` again each job owed past its hand-off deadline; their task ids.

        A job is owed from the commit of its message until a worker claims it. It is still
        owed past the deadline when the hand-off after the commit failed (the broker was
        unreachable), never happened (the process died in between), or the broker lost it.
        A job handed twice runs once (the second finds its message claimed). Each further
        hand-off of one task waits twice as long, so a long queue is not flooded with copies
        of the jobs waiting in it. ``submit`` failing (the broker still down) ends this
        sweep: what was handed so far is committed, the rest waits for the next.
        """
        handed: list[str] = []
        now = timezone.now()
        with transaction.atomic():
            owed = (
                models.Task.objects.select_for_update(skip_locked=True)
                .filter(handoff_deadline__lt=now)
                .order_by("handoff_deadline")[:limit]
            )
            for task in owed:
                if TaskState(task.state).is_settled:  # finished or waiting: nothing to run
                    task.handoff_deadline = None
                    task.save(update_fields=["handoff_deadline"])
                    continue
                try:
                    submit(str(task.id))
                except Exception:
                    logger.warning(
                        "Could not hand the owed job of task %s to the backend; the next "
                        "sweep tries again",
                        task.id,
                        exc_info=True,
                    )
                    break
                task.handoffs += 1
                task.handoff_deadline = _handoff_deadline(now, task.handoffs)
                task.save(update_fields=["handoff_deadline", "handoffs"])
                handed.append(str(task.id))
        return handed

    def recover_lost_jobs(self, *, retry: bool, max_retries: int) -> list[str]:
        """Tasks whose job's lease lapsed: retried (returned; their job is owed at once, for
        ``hand_off_owed_jobs`` to enqueue) or failed."""
        retried: list[str] = []
        with transaction.atomic():
            lost = (
                models.Task.objects.select_for_update(skip_locked=True)
                .filter(lease_expires_at__lt=timezone.now())
                .order_by("lease_expires_at")[:100]
            )
            for task in lost:
                if self._recover(task, retry=retry and task.job_attempts < max_retries):
                    retried.append(str(task.id))
        return retried

    def _recover(self, task: models.Task, *, retry: bool) -> bool:
        task.lease_expires_at = None
        task.job_id = ""
        if TaskState(task.state).is_settled:
            task.save(update_fields=["lease_expires_at", "job_id"])
            return False
        # Counted once the sweep commits (a rolled-back sweep recovered nothing).
        transaction.on_commit(functools.partial(metrics.job_lost, retried=retry), robust=True)
        if retry:
            lost = task.job_attempts + 1
            self._supersede(task, lost)
            task.job_attempts += 1
            task.job_position = 0  # unclaimed: the next job may run the message again
            # Owed at once: hand_off_owed_jobs enqueues it, and again should that fail.
            task.handoff_deadline = timezone.now()
            task.handoffs = 0
            task.save(
                update_fields=[
                    "lease_expires_at",
                    "job_id",
                    "job_attempts",
                    "job_position",
                    "handoff_deadline",
                    "handoffs",
                ]
            )
            notice = types.Message(
                message_id=str(uuid.uuid4()),
                role=types.Role.AGENT,
                parts=[
                    types.Part(
                        text=f"The worker running this task was lost; it runs again "
                        f"(attempt {lost + 1}). Output of attempt {lost} is superseded."
                    )
                ],
                metadata={RETRY_KEY: {"attempt": lost + 1, "lostAttempt": lost}},
            )
            self._change_status(task, TaskState.WORKING, notice)
            return True
        task.save(update_fields=["lease_expires_at", "job_id"])
        message = types.Message(
            message_id=str(uuid.uuid4()),
            context_id=task.context_id,
            task_id=str(task.id),
            role=types.Role.AGENT,
            parts=[types.Part(text="The worker running this task was lost.")],
        )
        self._change_status(task, TaskState.FAILED, message)
        return False

    def _supersede(self, task: models.Task, attempt: int) -> None:
        """Mark what the lost run ``attempt`` wrote as superseded, each artifact closed with
        a last chunk (an empty text part) whose metadata says so: clients following the task
        see it end, and GetTask tells it from the retry's output. An artifact the retry
        writes again from its start (same artifactId, ``append`` false) loses the mark."""
        rows = task.artifacts.filter(attempt=attempt).order_by("position")
        for artifact_id, name in rows.values_list("artifact_id", "name"):
            closing = types.Artifact(
                artifact_id=artifact_id,
                name=name,
                parts=[types.Part(text="")],
                metadata={RETRY_KEY: {"attempt": attempt, "superseded": True}},
            )
            self._merge_artifact(task, closing, append=True, last_chunk=True, attempt=attempt)
            self._record_event(task, _artifact_update(task, closing, append=True, last_chunk=True))
        # task.seq is saved by the status change that follows (the retry's notice).

    # --- internals ----------------------------------------------------------------------
