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
- ``records``: what the store hands out (events, records, claimed jobs) and builds;
- ``retention``: expired tasks (the ``RETENTION`` setting) and their purge in batches.

Only the names below are the store's API; the modules' ``_private`` helpers are theirs.
"""

from a2a_endpoint.store.counts import (
    TASK_COUNT_TABLE,
    TASK_STATE_COUNT_TABLE,
    forget_task_counts,
    kept_caller_count,
    kept_owners,
    kept_state_counts,
    recount_tasks,
    task_counts_kept,
    task_state_counts_kept,
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
from a2a_endpoint.store.retention import (
    MAX_PURGE_BATCH,
    PURGEABLE_STATES,
    PurgeBatch,
    PurgeError,
    PurgeResult,
    RetentionError,
    count_expired,
    parse_age,
    parse_state,
    purge_expired,
    retention_policy,
    state_named,
)
from a2a_endpoint.store.sql import RETRY_KEY
from a2a_endpoint.store.tasks import TaskStore

__all__ = [
    "CONFIG_PAGE_SIZE",
    "DEFAULT_PAGE_SIZE",
    "MAX_PURGE_BATCH",
    "PURGEABLE_STATES",
    "RETRY_KEY",
    "TASK_COUNT_TABLE",
    "TASK_STATE_COUNT_TABLE",
    "Attempt",
    "ClaimedJob",
    "OwedDelivery",
    "Publisher",
    "PurgeBatch",
    "PurgeError",
    "PurgeResult",
    "Pusher",
    "RetentionError",
    "StoredEvent",
    "TaskRecord",
    "TaskStore",
    "canonical_task_id",
    "count_expired",
    "forget_task_counts",
    "in_thread",
    "kept_caller_count",
    "kept_owners",
    "kept_state_counts",
    "parse_age",
    "parse_state",
    "purge_expired",
    "recount_tasks",
    "retention_policy",
    "state_named",
    "task_counts_kept",
    "task_state_counts_kept",
    "wrong_task_counts",
]
