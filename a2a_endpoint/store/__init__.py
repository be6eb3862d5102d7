"""Task persistence: every ORM write and read of tasks, converting rows to wire types.

Writes lock the task row (``select_for_update``), check the move with ``lifecycle``, write
the change and its numbered ``TaskEvent`` in one transaction, and hand the event to the
publisher only after commit, so a subscriber never sees an event that was rolled back.

One module per concern (docs/architecture.md, "Persistence"):

- ``tasks``: :class:`TaskStore`, the API the service uses, made of
- ``reads`` (snapshots, events, ListTasks), ``writes`` (create, continue, status,
  artifacts, cancel), ``jobs`` (claim, renew, release, hand-off, lost-job recovery) and
  ``pushes`` (the push config methods, the sender's side of the outbox);
- ``outbox``: what writes owe webhooks (configs saved with a message, delivery rows);
- ``sql``: the written-out statements and the row-to-model helpers they need;
- ``counts``: PostgreSQL's kept task counts; ``cursor``: ListTasks page tokens;
- ``records``: what the store hands out (events, records, claimed jobs) and builds.

Only the names below are the store's API; the modules' ``_private`` helpers are theirs.
"""

from a2a_endpoint.store.counts import (
    TASK_COUNT_TABLE,
    forget_task_counts,
    recount_tasks,
    task_counts_kept,
    wrong_task_counts,
)
from a2a_endpoint.store.pushes import CONFIG_PAGE_SIZE, Attempt, OwedDelivery
from a2a_endpoint.store.records import (
    DEFAULT_PAGE_SIZE,
    ClaimedJob,
    Publisher,
    Pusher,
    StoredEvent,
    TaskRecord,
    canonical_task_id,
    in_thread,
)
from a2a_endpoint.store.sql import RETRY_KEY
from a2a_endpoint.store.tasks import TaskStore

__all__ = [
    "CONFIG_PAGE_SIZE",
    "DEFAULT_PAGE_SIZE",
    "RETRY_KEY",
    "TASK_COUNT_TABLE",
    "Attempt",
    "ClaimedJob",
    "OwedDelivery",
    "Publisher",
    "Pusher",
    "StoredEvent",
    "TaskRecord",
    "TaskStore",
    "canonical_task_id",
    "forget_task_counts",
    "in_thread",
    "recount_tasks",
    "task_counts_kept",
    "wrong_task_counts",
]
