"""Retention: which tasks have outlived their state's age (the ``RETENTION`` setting), and
their deletion, with every row they own, in short batches.

A purge walks each state's expired tasks oldest first, ``RETENTION_BATCH_SIZE`` at a time,
through the partial index ``a2a_task_state_age`` (state, status_timestamp, id). Each batch
is one short transaction:

1. select the batch's ids (on PostgreSQL ``FOR UPDATE SKIP LOCKED``: a task a writer holds
   right now is passed over, never waited for, and the purge holds the rows it takes);
2. delete those tasks, the expiry test repeated in the ``DELETE``'s ``WHERE`` (a task that
   changed in between is kept), ``RETURNING`` the ids actually deleted;
3. delete their push deliveries, push configs, events, artifacts and history with one
   set-based ``DELETE … WHERE task_id IN (…)`` each (not the ORM's per-object collector;
   the foreign keys are deferred, so the parent may go first).

PostgreSQL's kept task counts (migration 0003) are updated by the task table's statement
trigger inside each batch's transaction, so ListTasks' ``totalSize`` is right after every
commit. These statements send no model signals (``pre_delete``, ``post_delete``).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import DatabaseError, NotSupportedError, connection, transaction
from django.utils import timezone

from a2a_endpoint import models
from a2a_endpoint.conf import app_settings
from a2a_endpoint.lifecycle import INTERRUPTED_STATES, TERMINAL_STATES, TaskState

#: In RETENTION: every terminal state the setting does not name.
EVERY_TERMINAL = "*"
#: States whose tasks may be deleted: the terminal ones, and the interrupted ones when named
#: (conversations abandoned while waiting for the client). Never submitted or working tasks.
PURGEABLE_STATES = TERMINAL_STATES | INTERRUPTED_STATES
#: The largest batch: one statement's IN list (SQLite allows 32,766 parameters).
MAX_PURGE_BATCH = 10_000
#: The longest age: its cutoff must stay a date.
MAX_AGE = timedelta(days=36_525)
_UNITS = {"d": 86_400, "h": 3_600, "m": 60}
_AGE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([dhm]?)\s*", re.IGNORECASE)

#: The tables of a task's rows, deliveries before the configs they belong to.
_CHILDREN = (
    models.PushDelivery,
    models.PushNotificationConfig,
    models.TaskEvent,
    models.Artifact,
    models.Message,
)


class RetentionError(ValueError):
    """A retention setting or argument that cannot be used; the message says why."""


@dataclass(frozen=True, slots=True)
class PurgeBatch:
    """One committed batch: its state, the tasks it deleted, and how long it held them."""

    state: TaskState
    deleted: int
    seconds: float


@dataclass(slots=True)
class PurgeResult:
    """What a purge deleted per state, in how many batches, and how long it took."""

    deleted: dict[TaskState, int] = field(default_factory=dict)
    batches: int = 0
    seconds: float = 0.0
    longest_batch: float = 0.0

    @property
    def total(self) -> int:
        return sum(self.deleted.values())

    def add(self, batch: PurgeBatch) -> None:
        self.deleted[batch.state] = self.deleted.get(batch.state, 0) + batch.deleted
        self.batches += 1
        self.longest_batch = max(self.longest_batch, batch.seconds)


class PurgeError(Exception):
    """The database failed during a purge: the batch under way was rolled back whole, the
    ones before it stay deleted (``result``), and a new purge continues from there."""

    def __init__(self, result: PurgeResult, cause: DatabaseError) -> None:
        super().__init__(
            f"{cause} (the failed batch was rolled back; {result.total} task(s) deleted "
            f"before it in {result.batches} batch(es))"
        )
        self.result = result


def parse_age(value: Any) -> timedelta:
    """An age as RETENTION and ``--older-than`` give it: days as a number (or a string of
    one), ``"<n>d"``, ``"<n>h"`` or ``"<n>m"``, or a ``timedelta``; more than 0, at most
    100 years."""
    days: float | None = None
    if isinstance(value, timedelta):
        days = value / timedelta(days=1)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        days = float(value)
    elif isinstance(value, str) and (match := _AGE.fullmatch(value)):
        days = float(match[1]) * _UNITS[match[2].lower() or "d"] / 86_400
    if days is None:
        raise RetentionError(f"{value!r} is not an age: give days (30) or '30d', '12h', '45m'.")
    if not 0 < days <= MAX_AGE.days:  # NaN fails too
        raise RetentionError(f"{value!r} is not an age: more than 0 and at most 100 years.")
    return value if isinstance(value, timedelta) else timedelta(days=days)


def state_named(name: Any) -> TaskState | None:
    """The state ``name`` means ("completed", "input-required", "TASK_STATE_FAILED", any
    case), or None."""
    if isinstance(name, TaskState):
        return name
    text = str(name).strip().upper().replace("-", "_")
    if not text.startswith("TASK_STATE_"):
        text = f"TASK_STATE_{text}"
    try:
        state = TaskState(text)
    except ValueError:
        return None
    return None if state is TaskState.UNSPECIFIED else state


def parse_state(name: Any) -> TaskState:
    """A state whose tasks may be deleted (``PURGEABLE_STATES``), named as ``state_named``
    reads it; RetentionError for another state or no state."""
    state = state_named(name)
    if state is None:
        names = ", ".join(sorted(_short(state) for state in PURGEABLE_STATES))
        raise RetentionError(f"{name!r} is not a task state; retention takes {names}.")
    if state not in PURGEABLE_STATES:
        raise RetentionError(
            f"{_short(state)} tasks are never deleted: a job is still owed or running for them."
        )
    return state


def retention_policy(setting: Any = None) -> dict[TaskState, timedelta]:
    """RETENTION (or ``setting``) as state → age; "*" fills every terminal state it does not
    name. RetentionError names the first bad entry."""
    setting = app_settings.RETENTION if setting is None else setting
    if not isinstance(setting, Mapping):
        raise RetentionError(f"RETENTION must be a dict of state to age, not {setting!r}.")
    policy: dict[TaskState, timedelta] = {}
    every: timedelta | None = None
    for name, value in setting.items():
        try:
            age = parse_age(value)
            if name == EVERY_TERMINAL:
                every = age
                continue
            state = parse_state(name)
        except RetentionError as exc:
            raise RetentionError(f"RETENTION[{name!r}]: {exc}") from None
        if state in policy:
            raise RetentionError(f"RETENTION names {_short(state)} twice.")
        policy[state] = age
    for state in TERMINAL_STATES if every is not None else ():
        policy.setdefault(state, every)  # type: ignore[arg-type]
    return policy


def count_expired(
    policy: Mapping[TaskState, timedelta] | None = None, *, now: datetime | None = None
) -> dict[TaskState, tuple[int, int]]:
    """Per state of ``policy`` (RETENTION by default): (tasks a purge would delete now,
    tasks past their age that it keeps: a push delivery still owed, or a job still leased).
    Reads only."""
    policy = retention_policy() if policy is None else policy
    now = now or timezone.now()
    counts = {}
    with connection.cursor() as cursor:
        for state, age in sorted(policy.items()):
            cutoff = now - age
            cursor.execute(_count_sql(), [*_params(state, cutoff, now), state.value, _db(cutoff)])
            expired, deletable = cursor.fetchone()
            counts[state] = (int(deletable or 0), int(expired) - int(deletable or 0))
    return counts


def purge_expired(
    policy: Mapping[TaskState, timedelta] | None = None,
    *,
    batch_size: int | None = None,
    pause: float | None = None,
    now: datetime | None = None,
    progress: Callable[[PurgeBatch], None] | None = None,
) -> PurgeResult:
    """Delete every task older than its state's age in ``policy`` (RETENTION by default)
    with its history, artifacts, events, push configs and deliveries, ``batch_size`` tasks
    (RETENTION_BATCH_SIZE) per transaction, ``pause`` seconds (RETENTION_BATCH_PAUSE) apart.

    Age counts from the task's last status change (``status_timestamp``) to ``now`` (the
    purge's start). Kept whatever their age: tasks owing a push delivery (until it is
    delivered or dead-lettered), tasks whose job still holds its lease, and tasks locked by
    a writer at that moment (the next purge takes them). ``progress`` is called after each
    committed batch.

    Runs outside any transaction: each batch commits on its own (a durable atomic block).
    When the database fails, the batch under way rolls back whole and PurgeError (with what
    was deleted before) is raised; earlier batches stay deleted, and the next purge goes on
    from there. No client sees a half-deleted task: a task goes with its rows in one commit.
    """
    policy = retention_policy() if policy is None else policy
    size = int(app_settings.RETENTION_BATCH_SIZE if batch_size is None else batch_size)
    if not 1 <= size <= MAX_PURGE_BATCH:
        raise RetentionError(f"The batch size must be 1 to {MAX_PURGE_BATCH}, not {size}.")
    pause = float(app_settings.RETENTION_BATCH_PAUSE if pause is None else pause)
    _check_purgeable(policy)
    now = now or timezone.now()
    result = PurgeResult()
    started = time.perf_counter()
    try:
        for state, age in sorted(policy.items()):
            _purge_state(state, now - age, now, size, pause, result, progress)
    except DatabaseError as exc:
        raise PurgeError(result, exc) from exc
    finally:
        result.seconds = time.perf_counter() - started
    return result


def _purge_state(
    state: TaskState,
    cutoff: datetime,
    now: datetime,
    size: int,
    pause: float,
    result: PurgeResult,
    progress: Callable[[PurgeBatch], None] | None,
) -> None:
    """Batches of ``state``'s expired tasks, oldest first, until one comes back short."""
    after: tuple[Any, Any] | None = None
    while True:
        if pause > 0 and result.batches:
            time.sleep(pause)  # room for other writers (and replicas) between batches
        started = time.perf_counter()
        with transaction.atomic(durable=True), connection.cursor() as cursor:
            rows = _select(cursor, state, cutoff, now, size, after)
            deleted = _delete(cursor, rows, state, cutoff, now) if rows else 0
        if rows:
            batch = PurgeBatch(state, deleted, time.perf_counter() - started)
            result.add(batch)
            if progress is not None:
                progress(batch)
        if len(rows) < size:
            return
        # Keyset: the next batch starts after this one's last row (skipped rows stay behind).
        after = (rows[-1][1], rows[-1][0])


def _select(
    cursor: Any, state: TaskState, cutoff: datetime, now: datetime, size: int, after: Any
) -> list[tuple[Any, Any]]:
    """The batch: (id, status_timestamp) of up to ``size`` expired tasks, oldest first."""
    params = _params(state, cutoff, now)
    if after is not None:
        params += list(after)
    sql = _select_sql(after is not None, connection.vendor == "postgresql")
    cursor.execute(sql, [*params, size])
    return cursor.fetchall()


def _delete(cursor: Any, rows: list[Any], state: TaskState, cutoff: datetime, now: datetime) -> int:
    """Delete the batch's tasks that are still expired, then every row of theirs."""
    marks = ", ".join(["%s"] * len(rows))
    task = connection.ops.quote_name(models.Task._meta.db_table)
    cursor.execute(
        f"DELETE FROM {task} WHERE id IN ({marks}) AND {_expired_sql()} RETURNING id",
        [*(row[0] for row in rows), *_params(state, cutoff, now)],
    )
    ids = [row[0] for row in cursor.fetchall()]
    if not ids:
        return 0
    marks = ", ".join(["%s"] * len(ids))
    for model in _CHILDREN:
        table = connection.ops.quote_name(model._meta.db_table)
        cursor.execute(f"DELETE FROM {table} WHERE task_id IN ({marks})", ids)
    return len(ids)


def _expired_sql() -> str:
    """A task row of the state, changed before the cutoff, owing no push delivery, with no
    job holding its lease (parameters: ``_params``)."""
    task = connection.ops.quote_name(models.Task._meta.db_table)
    delivery = connection.ops.quote_name(models.PushDelivery._meta.db_table)
    return (
        f"{task}.state = %s AND {task}.status_timestamp < %s"
        f" AND ({task}.lease_expires_at IS NULL OR {task}.lease_expires_at < %s)"
        f" AND NOT EXISTS (SELECT 1 FROM {delivery} d"
        f" WHERE d.task_id = {task}.id AND d.state = %s)"
    )


def _params(state: TaskState, cutoff: datetime, now: datetime) -> list[Any]:
    return [state.value, _db(cutoff), _db(now), models.PushDelivery.PENDING]


def _db(value: datetime) -> Any:
    return connection.ops.adapt_datetimefield_value(value)


def _select_sql(after: bool, skip_locked: bool) -> str:
    task = connection.ops.quote_name(models.Task._meta.db_table)
    keyset = " AND (status_timestamp, id) > (%s, %s)" if after else ""
    lock = " FOR UPDATE SKIP LOCKED" if skip_locked else ""
    return (
        f"SELECT id, status_timestamp FROM {task}"
        f" WHERE {_expired_sql()}{keyset} ORDER BY status_timestamp, id LIMIT %s{lock}"
    )


def _count_sql() -> str:
    task = connection.ops.quote_name(models.Task._meta.db_table)
    return (
        f"SELECT COUNT(*), SUM(CASE WHEN {_expired_sql()} THEN 1 ELSE 0 END) FROM {task}"
        " WHERE state = %s AND status_timestamp < %s"
    )


def _check_purgeable(policy: Mapping[TaskState, timedelta]) -> None:
    """Refuse, with the reason, an active state, and what would fail every batch's commit."""
    active = sorted(_short(state) for state in set(policy) - PURGEABLE_STATES)
    if active:
        raise RetentionError(f"{', '.join(active)} tasks are never deleted.")
    if connection.vendor == "sqlite" and connection.Database.sqlite_version_info < (3, 35):
        raise NotSupportedError("The purge needs SQLite 3.35 or later (DELETE … RETURNING).")
    own = tuple(_CHILDREN)  # compared with ==: a related model need not be hashable
    foreign = [
        f"{rel.related_model._meta.label}.{rel.field.name}"
        for rel in models.Task._meta.related_objects
        if rel.related_model not in own and getattr(rel.field, "db_constraint", False)
    ]
    if foreign:
        raise RetentionError(
            f"Tasks are referenced by {', '.join(foreign)}: the purge deletes only "
            "a2a_endpoint's rows. Delete those rows first, or make the key db_constraint=False."
        )


def _short(state: TaskState) -> str:
    return state.value.removeprefix("TASK_STATE_").lower()
