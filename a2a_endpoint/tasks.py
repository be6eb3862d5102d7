"""Celery autodiscovery looks for ``<app>.tasks``: the agent jobs live in the Celery backend."""

from a2a_endpoint.execution.celery_backend import (
    deliver_push_notifications,
    purge_expired_tasks,
    recover_lost_jobs,
    run_agent_task,
    stop_canceled_job,
)

__all__ = [
    "deliver_push_notifications",
    "purge_expired_tasks",
    "recover_lost_jobs",
    "run_agent_task",
    "stop_canceled_job",
]
