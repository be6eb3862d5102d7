"""The task store the service uses: reads, writes and job leases in one class."""

from __future__ import annotations

from a2a_endpoint.store.jobs import TaskJobs
from a2a_endpoint.store.reads import TaskReads
from a2a_endpoint.store.records import Publisher
from a2a_endpoint.store.writes import TaskWrites


class TaskStore(TaskReads, TaskWrites, TaskJobs):
    """The Django ORM task store. ``publisher`` receives each event after its commit."""

    def __init__(self, publisher: Publisher | None = None) -> None:
        self.publisher = publisher
