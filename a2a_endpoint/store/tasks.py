"""The task store the service uses: reads, writes, job leases and push configs in one class."""

from __future__ import annotations

from a2a_endpoint.store.jobs import TaskJobs
from a2a_endpoint.store.pushes import TaskPushes
from a2a_endpoint.store.reads import TaskReads
from a2a_endpoint.store.records import Publisher, Pusher
from a2a_endpoint.store.writes import TaskWrites


class TaskStore(TaskReads, TaskWrites, TaskJobs, TaskPushes):
    """The Django ORM task store. ``publisher`` receives each event after its commit, and
    ``pusher`` the id of a task whose event was owed to its webhooks (the push sender)."""

    def __init__(self, publisher: Publisher | None = None, pusher: Pusher | None = None) -> None:
        self.publisher = publisher
        self.pusher = pusher
