"""The written-out statements of the store (PostgreSQL and the portable ones) and the
row-to-model helpers they need: what the ORM would build per call, built once."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, NamedTuple

import msgspec
from django.db import connection
from django.db.models import Field, Model

from a2a_endpoint import models, types
from a2a_endpoint.store.counts import TASK_COUNT_TABLE
from a2a_endpoint.store.records import _status_of, _to_builtins

_MESSAGE = msgspec.json.Decoder(types.Message)
_MESSAGES = msgspec.json.Decoder(list[types.Message])
_ARTIFACTS = msgspec.json.Decoder(list[types.Artifact])


def _with_lists(
    *,
    id: str,
    context_id: str,
    status: types.TaskStatus,
    metadata: dict[str, Any] | None,
    history_json: str | None,
    artifacts_json: str | None,
) -> types.Task:
    """A Task whose history and artifacts come as JSON arrays from ``_lists_sql`` (or NULL)."""
    return types.Task(
        id=id,
        context_id=context_id,
        status=status,
        artifacts=_ARTIFACTS.decode(artifacts_json) if artifacts_json else [],
        history=_MESSAGES.decode(history_json) if history_json else [],
        metadata=metadata,
    )


def _row_task(
    task_id: uuid.UUID,
    context_id: str,
    state: str,
    status_message: str | None,
    status_timestamp: datetime,
    metadata: str | None,
    history_json: str | None,
    artifacts_json: str | None,
) -> types.Task:
    """A Task from the columns of ``_TASK_COLUMNS`` and ``_lists_sql``, read by a raw cursor
    (jsonb as text, decoded here by msgspec)."""
    message = _MESSAGE.decode(status_message) if status_message else None
    return _with_lists(
        id=str(task_id),
        context_id=context_id,
        status=_status_of(state, message, status_timestamp),
        metadata=msgspec.json.decode(metadata) if metadata is not None else None,
        history_json=history_json,
        artifacts_json=artifacts_json,
    )


#: What ``_row_task`` reads of a task row ``t``, before its history and artifacts.
_TASK_COLUMNS = "t.id, t.context_id, t.state, t.status_message, t.status_timestamp, t.metadata"


class _ListFilters(NamedTuple):
    """Which of ListTasks' optional filters a request sets (each adds one ``%s``)."""

    context: bool
    state: bool
    after: bool

    def where(self, task: str) -> str:
        """Conditions on task row ``task``: owner, tenant, then the filters set, in order."""
        conditions = [f"{task}.owner = %s", f"{task}.tenant = %s"]
        if self.context:
            conditions.append(f"{task}.context_id = %s")
        if self.state:
            conditions.append(f"{task}.state = %s")
        if self.after:
            conditions.append(f"{task}.status_timestamp >= %s")
        return " AND ".join(conditions)


_NO_FILTERS = _ListFilters(context=False, state=False, after=False)


@functools.cache
def _lists_sql(task: str) -> tuple[str, str]:
    """PostgreSQL subqueries of the task row ``task`` (an alias or the quoted table name):
    its newest ``%s`` messages (NULL: all) and its artifacts, each a JSON array (NULL: none).

    The history window is read against the row's own ``history_size`` (messages appended
    since are not in it), as ``_history_by_task`` does; ``GREATEST`` ignores the NULL of an
    unbounded window. ``''`` name/description and ``[]`` extensions are the columns'
    defaults, omitted on the wire as ``_artifact`` values are.
    """
    message = models.Message._meta.db_table
    artifact = models.Artifact._meta.db_table
    history = f"""(SELECT json_agg(m.payload ORDER BY m.position)::text FROM {message} m
        WHERE m.task_id = {task}.id AND m.position < {task}.history_size
          AND m.position >= GREATEST({task}.history_size - %s, 0))"""
    artifacts = f"""(SELECT json_agg(json_build_object(
            'artifactId', a.artifact_id, 'name', a.name, 'description', a.description,
            'parts', a.parts, 'metadata', a.metadata, 'extensions', a.extensions)
        ORDER BY a.position)::text FROM {artifact} a WHERE a.task_id = {task}.id)"""
    return history, artifacts


@functools.cache
def _snapshot_sql() -> str:
    """PostgreSQL: a visible task with its history window (``%s``), artifacts and seq."""
    history, artifacts = _lists_sql("t")
    return f"""
        SELECT {_TASK_COLUMNS}, {history}, {artifacts}, t.seq
        FROM {models.Task._meta.db_table} t
        WHERE t.id = %s AND t.owner = %s AND t.tenant = %s
    """


@functools.cache
def _list_sql(filters: _ListFilters, counted: bool, cursor: bool, artifacts: bool) -> str:
    """PostgreSQL: a ListTasks page, newest first, with each task's lists and the total,
    cut where its tasks would pass the byte budget (the first task always comes).

    Parameters: the history window, the filters twice (the total, then the page), the
    cursor's ``(timestamp, timestamp, id)`` when ``cursor``, the row limit and the budget.
    The total is an uncorrelated scalar subquery: PostgreSQL evaluates it once (an InitPlan)
    and repeats it on every row. The keyset bound is ``TaskQuerySet.after_cursor``'s: the
    plain ``<=`` lets the owner index start its scan at the cursor.
    """
    table = connection.ops.quote_name(models.Task._meta.db_table)
    history, artifact_list = _lists_sql("t")
    keyset = (
        " AND t.status_timestamp <= %s AND (t.status_timestamp < %s OR t.id < %s)" if cursor else ""
    )
    # The page (innermost), each row's size and the sizes up to it (middle: each list is
    # built once), and the rows that fit the byte budget (outer; always the first row).
    return f"""
        SELECT id, context_id, state, status_message, status_timestamp, metadata,
            h, a, total, fetched
        FROM (
            SELECT page.*, COUNT(*) OVER () AS fetched,
                SUM({_ROW_BYTES}) OVER (ORDER BY status_timestamp DESC, id DESC
                    ROWS UNBOUNDED PRECEDING) AS upto,
                ROW_NUMBER() OVER (ORDER BY status_timestamp DESC, id DESC) AS n
            FROM (
                SELECT {_TASK_COLUMNS}, {history} AS h,
                    {artifact_list if artifacts else "NULL"} AS a,
                    ({_count_sql(filters, counted)}) AS total
                FROM {table} t
                WHERE {filters.where("t")}{keyset}
                ORDER BY t.status_timestamp DESC, t.id DESC
                LIMIT %s
            ) page
        ) sized
        WHERE n = 1 OR upto <= %s
        ORDER BY status_timestamp DESC, id DESC
    """


#: What a ListTasks row adds to the answer, about: its lists, status message and metadata
#: as JSON, and a margin for the rest of the task (id, context, state, timestamp, keys).
_ROW_BYTES = (
    "COALESCE(octet_length(h), 0) + COALESCE(octet_length(a), 0)"
    " + COALESCE(octet_length(status_message::text), 0)"
    " + COALESCE(octet_length(metadata::text), 0) + 256"
)


@functools.cache
def _count_sql(filters: _ListFilters, counted: bool) -> str:
    """PostgreSQL: ListTasks' ``totalSize`` (in the page's statement, or alone for a page
    past the last task). Parameters: owner, tenant and the filters set.

    Without filters, and where the database keeps the counts (``counted``), it is the sum of
    the caller's rows in the table that triggers keep (migration 0003): at most 16 rows,
    where ``COUNT(*)`` reads an index entry per task. Filtered totals are counted.
    """
    if counted and filters == _NO_FILTERS:
        table = connection.ops.quote_name(TASK_COUNT_TABLE)
        return f"SELECT COALESCE(SUM(c.tasks), 0)::bigint FROM {table} c WHERE {filters.where('c')}"
    table = connection.ops.quote_name(models.Task._meta.db_table)
    return f"SELECT COUNT(*) FROM {table} c WHERE {filters.where('c')}"


#: What a status change writes of the task row.
_STATUS_CHANGES = (
    "state",
    "status_message",
    "status_timestamp",
    "seq",
    "history_size",
    "handoff_deadline",
    "handoffs",
    "updated_at",
)

#: What a later chunk of an artifact may change.
_ARTIFACT_CHANGES = (
    "parts",
    "name",
    "description",
    "metadata",
    "extensions",
    "complete",
    "attempt",
    "updated_at",
)

#: The metadata key of what the store writes about a retried job: on the status message
#: that announces the retry, and on each artifact of the lost run it supersedes.
RETRY_KEY = "a2aEndpointRetry"


def _artifact_update(
    task: models.Task, artifact: types.Artifact, *, append: bool, last_chunk: bool
) -> dict[str, Any]:
    """The ``artifactUpdate`` StreamResponse of a chunk of ``artifact``."""
    update = types.TaskArtifactUpdateEvent(
        task_id=str(task.id),
        context_id=task.context_id,
        artifact=artifact,
        append=append,
        last_chunk=last_chunk,
    )
    return {"artifactUpdate": _to_builtins(update)}


def _insert(instance: Model) -> None:
    """``instance.save()`` of a new row as one written-out INSERT.

    Each value goes through its field's ``pre_save`` (``auto_now_add`` and ``auto_now`` are
    set) and ``get_db_prep_save``, as the ORM's INSERT does, but without building the query,
    reading back an auto primary key (the store never uses an event's or a message's id), or
    sending model signals. The hot writes of a job and of SendMessage go through here and
    ``_save_fields``; ``tests/test_store_writes.py`` checks their rows equal the ORM's.
    """
    sql, fields = _insert_sql(type(instance))
    with connection.cursor() as cursor:
        cursor.execute(sql, _db_values(instance, fields, add=True))
    instance._state.adding = False
    instance._state.db = connection.alias


def _save_fields(instance: Model, *names: str) -> None:
    """``instance.save(update_fields=names)`` as one written-out UPDATE (see ``_insert``)."""
    sql, fields = _update_sql(type(instance), names)
    key = instance._meta.pk.get_db_prep_value(instance.pk, connection)
    with connection.cursor() as cursor:
        cursor.execute(sql, [*_db_values(instance, fields, add=False), key])


def _db_values(instance: Model, fields: list[Field], *, add: bool) -> list[Any]:
    """``fields`` of ``instance`` as the ORM's INSERT (``add``) or UPDATE sends them."""
    return [field.get_db_prep_save(field.pre_save(instance, add), connection) for field in fields]


@functools.cache
def _insert_sql(model: type[Model]) -> tuple[str, list[Field]]:
    """The INSERT of every concrete column of ``model`` but an auto primary key."""
    meta = model._meta
    fields = [f for f in meta.concrete_fields if not (f.primary_key and f.db_returning)]
    quote = connection.ops.quote_name
    columns = ", ".join(quote(field.column) for field in fields)
    marks = ", ".join("%s" for _ in fields)
    return f"INSERT INTO {quote(meta.db_table)} ({columns}) VALUES ({marks})", fields


@functools.cache
def _update_sql(model: type[Model], names: tuple[str, ...]) -> tuple[str, list[Field]]:
    """The UPDATE of the fields ``names`` of one ``model`` row, by primary key."""
    meta = model._meta
    fields = [meta.get_field(name) for name in names]
    quote = connection.ops.quote_name
    columns = ", ".join(f"{quote(field.column)} = %s" for field in fields)
    return f"UPDATE {quote(meta.db_table)} SET {columns} WHERE {quote(meta.pk.column)} = %s", fields


def _artifact_row(task: models.Task, artifact_id: str) -> tuple[models.Artifact | None, int]:
    """The task's artifact ``artifact_id`` (None: a new one) and the position a new one
    takes, the task's number of artifacts: on PostgreSQL one written-out statement (the
    ORM's two queries took most of a chunk's CPU to build; ``tests/test_store_writes.py``
    compares the two)."""
    if connection.vendor != "postgresql":
        row = task.artifacts.filter(artifact_id=artifact_id).first()
        return row, (task.artifacts.count() if row is None else 0)
    with connection.cursor() as cursor:
        cursor.execute(_artifact_sql(), [task.pk, task.pk, artifact_id])
        count, *row = cursor.fetchone()
    if row[0] is None:  # the artifact's primary key: no such artifact yet
        return None, count
    return _model_from_row(models.Artifact, row), count


def _history_rows(key: uuid.UUID) -> list[tuple[int, str, Any]]:
    """(position, role, payload) of every message of a task, oldest first: a job's claim
    reads them under the row lock, written out as the other hot statements are."""
    sql, decode = _history_sql()
    key = models.Task._meta.pk.get_db_prep_value(key, connection)
    with connection.cursor() as cursor:
        cursor.execute(sql, [key])
        rows = cursor.fetchall()
    return [(position, role, decode(payload, None, connection)) for position, role, payload in rows]


@functools.cache
def _history_sql() -> tuple[str, Callable[..., Any]]:
    """The statement of ``_history_rows`` and the payload column's ``from_db_value``."""
    table = connection.ops.quote_name(models.Message._meta.db_table)
    sql = f"SELECT position, role, payload FROM {table} WHERE task_id = %s ORDER BY position"
    return sql, models.Message._meta.get_field("payload").from_db_value


@functools.cache
def _message_tasks_sql() -> str:
    """The tasks of the messages with a messageId and role: ``task_for_message``'s first
    look, on every SendMessage (the ORM built it in four times the time it ran)."""
    quote = connection.ops.quote_name
    table = quote(models.Message._meta.db_table)
    return f"SELECT task_id FROM {table} WHERE message_id = %s AND role = %s"


@functools.cache
def _release_sql() -> str:
    """``release_job``: the job's lease ends (whoever holds the task now keeps theirs)."""
    table = connection.ops.quote_name(models.Task._meta.db_table)
    return f"UPDATE {table} SET lease_expires_at = NULL WHERE id = %s AND job_id = %s"


@functools.cache
def _artifact_sql() -> str:
    """The count of a task's artifacts and every column of one of them (NULLs if none)."""
    table = connection.ops.quote_name(models.Artifact._meta.db_table)
    return (
        f"SELECT n.total, {_model_columns(models.Artifact, 'a')} FROM (SELECT COUNT(*) AS "
        f"total FROM {table} WHERE task_id = %s) n "
        f"LEFT JOIN {table} a ON a.task_id = %s AND a.artifact_id = %s"
    )


def _lock_row(key: uuid.UUID, owner: str | None = None, tenant: str = "") -> models.Task | None:
    """PostgreSQL: ``select_for_update().filter(pk=key).first()`` (and ``visible_to`` when
    ``owner`` is given) as one written-out statement, the row made a model as the ORM does.

    Each write of a job locks its task row first (an echo job four times): building that
    query with the ORM took about twice the CPU of running it. ``tests/test_store_snapshot.py``
    checks that every field equals the ORM's read and that the row is really locked.
    """
    params: list[Any] = [key] if owner is None else [key, owner, tenant]
    with connection.cursor() as cursor:
        cursor.execute(_lock_sql(owner is not None), params)
        row = cursor.fetchone()
    return None if row is None else _model_from_row(models.Task, row)


@functools.cache
def _lock_sql(visible: bool) -> str:
    """The locking read of every column of a task row."""
    owner = " AND owner = %s AND tenant = %s" if visible else ""
    table = connection.ops.quote_name(models.Task._meta.db_table)
    return f"SELECT {_model_columns(models.Task)} FROM {table} WHERE id = %s{owner} FOR UPDATE"


def _model_columns(model: type[Model], alias: str = "") -> str:
    """Every concrete column of ``model``, in the order ``_model_from_row`` reads them."""
    prefix = f"{alias}." if alias else ""
    return ", ".join(f"{prefix}{connection.ops.quote_name(f.column)}" for f in _readers(model)[0])


def _model_from_row(model: type[Model], row: Sequence[Any]) -> Model:
    """A ``model`` instance from a row of ``_model_columns``, as the ORM makes one: each
    column through its ``from_db_value`` (the JSON fields decode their text)."""
    _, decoders, names = _readers(model)
    values = [
        value if decode is None else decode(value, None, connection)
        for decode, value in zip(decoders, row, strict=True)
    ]
    return model.from_db(connection.alias, names, values)


@functools.cache
def _readers(model: type[Model]) -> tuple[list[Field], list[Any], list[str]]:
    """``model``'s concrete fields, each one's ``from_db_value`` (None: the value is used
    as read) and attname."""
    fields = list(model._meta.concrete_fields)
    decoders = [getattr(field, "from_db_value", None) for field in fields]
    return fields, decoders, [field.attname for field in fields]
