"""Task reads: snapshots, events, records, ListTasks (statements written out on PostgreSQL,
the ORM elsewhere)."""

from __future__ import annotations

import functools
import operator
import uuid
from datetime import datetime
from typing import Any

import msgspec
from django.db import connection, transaction
from django.db.models import Q

from a2a_endpoint import models, types
from a2a_endpoint.conf import app_settings
from a2a_endpoint.errors import (
    TaskNotFoundError,
)
from a2a_endpoint.lifecycle import TaskState
from a2a_endpoint.store.counts import task_counts_kept
from a2a_endpoint.store.cursor import _make_cursor, _read_cursor
from a2a_endpoint.store.records import (
    DEFAULT_PAGE_SIZE,
    Publisher,
    StoredEvent,
    TaskRecord,
    _artifact,
    _history_window,
    _parse_uuid,
    _record,
    _status,
    _within_budget,
)
from a2a_endpoint.store.sql import (
    _count_sql,
    _list_sql,
    _ListFilters,
    _lock_row,
    _message_tasks_sql,
    _row_task,
    _snapshot_sql,
)


class TaskReads:
    """The reads of :class:`~a2a_endpoint.store.TaskStore`."""

    publisher: Publisher | None

    def get_task(
        self, task_id: str, owner: str, tenant: str, *, history_length: int | None = None
    ) -> types.Task:
        if connection.vendor == "postgresql":
            return self._snapshot_in_one_query(task_id, owner, tenant, history_length)[0]
        task = self._visible(task_id, owner, tenant)
        return self.snapshots([task], history_length=history_length, include_artifacts=True)[0]

    def snapshot(
        self, task_id: str, owner: str, tenant: str, *, history_length: int | None = None
    ) -> tuple[types.Task, int]:
        """The task and the seq of the last event it includes, read as one consistent view.

        A stream sends this first and then only events with a greater seq (A2A §3.1.6), so
        the task row, history and artifacts must come from the same database snapshot: on
        PostgreSQL one statement (which sees one snapshot), elsewhere one transaction.
        """
        if connection.vendor == "postgresql":
            return self._snapshot_in_one_query(task_id, owner, tenant, history_length)
        with transaction.atomic():  # SQLite: one transaction is one snapshot
            task = self._visible(task_id, owner, tenant)
            snapshot = self.snapshots(
                [task], history_length=history_length, include_artifacts=True
            )[0]
        return snapshot, task.seq

    def events_after(self, task_id: str, after: int, upto: int | None = None) -> list[StoredEvent]:
        """Logged events with ``after < seq <= upto``, in order (gap filling and resume)."""
        rows = models.TaskEvent.objects.filter(task_id=_parse_uuid(task_id), seq__gt=after)
        if upto is not None:
            rows = rows.filter(seq__lte=upto)
        return [
            StoredEvent(
                task_id=str(row.task_id),
                seq=row.seq,
                state=TaskState(row.state),
                payload=row.payload,
            )
            for row in rows.order_by("seq")
        ]

    def get_record(self, task_id: str, owner: str, tenant: str) -> TaskRecord:
        return _record(self._visible(task_id, owner, tenant))

    def load(self, task_id: str) -> TaskRecord | None:
        task = models.Task.objects.filter(pk=_parse_uuid(task_id)).first()
        return _record(task) if task else None

    def history(self, task_id: str) -> list[types.Message]:
        rows = models.Message.objects.filter(task_id=_parse_uuid(task_id)).order_by("position")
        return [msgspec.convert(row.payload, types.Message) for row in rows]

    def direct_reply(self, task_id: str) -> types.Message | None:
        """The Message a task was answered with instead of task updates, if it was."""
        payload = (
            models.TaskEvent.objects.filter(task_id=_parse_uuid(task_id), kind="message")
            .values_list("payload", flat=True)
            .first()
        )
        return msgspec.convert(payload["message"], types.Message) if payload else None

    def task_for_message(self, owner: str, tenant: str, message_id: str) -> str | None:
        """The task a user message already started, so a retried send is not run twice."""
        # Two index lookups, messages first: as one join, a planner without fresh statistics
        # walked all of the caller's tasks (21 ms at 7,000 tasks) to find none.
        with connection.cursor() as cursor:
            cursor.execute(_message_tasks_sql(), [message_id, types.Role.USER.value])
            candidates = [task_id for (task_id,) in cursor.fetchall()]
        if not candidates:
            return None  # a new message: the usual case, one query
        row = (
            models.Task.objects.visible_to(owner, tenant)
            .filter(pk__in=candidates)
            .values_list("id", flat=True)
            .first()
        )
        return str(row) if row else None

    def snapshots(
        self,
        tasks: list[models.Task],
        *,
        history_length: int | None,
        include_artifacts: bool,
    ) -> list[types.Task]:
        """Whole Task values for ``tasks`` in two more queries at most, whatever their number."""
        history = self._history_by_task(tasks, history_length)
        artifacts = self._artifacts_by_task(tasks) if include_artifacts else {}
        return [
            types.Task(
                id=str(task.id),
                context_id=task.context_id,
                status=_status(task),
                artifacts=artifacts.get(task.id, []),
                history=history.get(task.id, []),
                metadata=task.metadata,
            )
            for task in tasks
        ]

    def list_tasks(
        self, owner: str, tenant: str, request: types.ListTasksRequest
    ) -> types.ListTasksResponse:
        page_size = request.page_size or DEFAULT_PAGE_SIZE
        state = request.status.value if request.status is not TaskState.UNSPECIFIED else ""
        cursor = _read_cursor(request.page_token) if request.page_token else None
        include_artifacts = bool(request.include_artifacts)
        if connection.vendor == "postgresql":
            return self._list_in_one_query(
                owner, tenant, request, state, cursor, page_size, include_artifacts
            )
        matching = models.Task.objects.visible_to(owner, tenant).matching(
            context_id=request.context_id,
            state=state,
            status_after=request.status_timestamp_after,
        )
        page = matching.newest_first()
        if cursor is not None:
            page = page.after_cursor(*cursor)
        rows = list(page[: page_size + 1])
        tasks = _within_budget(
            self.snapshots(
                rows[:page_size],
                history_length=request.history_length,
                include_artifacts=include_artifacts,
            )
        )
        next_page_token = ""
        if len(rows) > len(tasks):  # more to come (or cut by the budget)
            last = rows[len(tasks) - 1]
            next_page_token = _make_cursor(last.status_timestamp, last.id)
        return types.ListTasksResponse(
            tasks=tasks,
            next_page_token=next_page_token,
            page_size=page_size,
            total_size=matching.count(),
        )

    # --- writes -------------------------------------------------------------------------

    def _snapshot_in_one_query(
        self, task_id: str, owner: str, tenant: str, history_length: int | None
    ) -> tuple[types.Task, int]:
        """``get_task`` on PostgreSQL: the row, its history window and its artifacts in one
        statement, the lists aggregated to JSON text and decoded by msgspec.

        The hot read of the API (GetTask, a stream's first snapshot, a SendMessage's reply):
        one round trip and no ORM query building, instead of three of each. The same values
        as ``snapshots`` (tests/test_store_snapshot.py compares the two).
        """
        with connection.cursor() as cursor:
            key = _parse_uuid(task_id)
            cursor.execute(_snapshot_sql(), [history_length, key, owner, tenant])
            row = cursor.fetchone()
        if row is None:
            # A task that exists but belongs to someone else is "not found" too (A2A §3.3.2).
            raise TaskNotFoundError(taskId=task_id)
        *columns, seq = row
        return _row_task(*columns), seq

    def _list_in_one_query(
        self,
        owner: str,
        tenant: str,
        request: types.ListTasksRequest,
        state: str,
        cursor: tuple[datetime, uuid.UUID] | None,
        page_size: int,
        include_artifacts: bool,
    ) -> types.ListTasksResponse:
        """``list_tasks`` on PostgreSQL: the page, each task's lists and ``totalSize`` in one
        statement, which also makes the total and the page one snapshot.

        ListTasks is a hot read like GetTask: one round trip and no ORM query building
        (``tests/test_store_snapshot.py`` compares every page with the ORM path's).
        """
        # In _ListFilters' order; a filter not set is None.
        optional = (request.context_id or None, state or None, request.status_timestamp_after)
        filters = _ListFilters(*(value is not None for value in optional))
        where = [owner, tenant, *(value for value in optional if value is not None)]
        keyset = [cursor[0], cursor[0], cursor[1]] if cursor is not None else []
        budget = int(app_settings.MAX_RESPONSE_BYTES)
        params = [request.history_length, *where, *where, *keyset, page_size + 1, budget]
        counted = task_counts_kept()
        with connection.cursor() as db:
            db.execute(_list_sql(filters, counted, cursor is not None, include_artifacts), params)
            rows = db.fetchall()
            if rows:
                total, fetched = rows[0][-2:]
            elif cursor is None:
                total = fetched = 0  # no page without a cursor: nothing matches
            else:  # a page past the end still reports the total
                db.execute(_count_sql(filters, counted), where)
                total, fetched = db.fetchone()[0], 0
        tasks = [_row_task(*row[:-2]) for row in rows[:page_size]]
        next_page_token = ""
        if len(rows) > page_size or len(rows) < fetched:  # more to come (or cut by the budget)
            task_id, _, _, _, timestamp, *_ = rows[len(tasks) - 1]
            next_page_token = _make_cursor(timestamp, task_id)
        return types.ListTasksResponse(
            tasks=tasks, next_page_token=next_page_token, page_size=page_size, total_size=total
        )

    def _visible(self, task_id: str, owner: str, tenant: str, *, lock: bool = False) -> models.Task:
        if lock and connection.vendor == "postgresql":
            task = _lock_row(_parse_uuid(task_id), owner, tenant)
        else:
            queryset = models.Task.objects.visible_to(owner, tenant)
            if lock:
                queryset = queryset.select_for_update()
            task = queryset.filter(pk=_parse_uuid(task_id)).first()
        if task is None:
            # A task that exists but belongs to someone else is "not found" too (A2A §3.3.2).
            raise TaskNotFoundError(taskId=task_id)
        return task

    def _history_by_task(
        self, tasks: list[models.Task], history_length: int | None
    ) -> dict[Any, list[types.Message]]:
        if history_length == 0 or not tasks:
            return {}
        # One query for all tasks, each bounded to its window of the rows just read: the
        # newest ``history_length`` messages at most (A2A §3.2.4), none appended since.
        windows = [
            Q(task_id=task.id, position__gte=start, position__lt=task.history_size)
            for task in tasks
            if (start := _history_window(task, history_length)) < task.history_size
        ]
        if not windows:
            return {}
        window = functools.reduce(operator.or_, windows)
        result: dict[Any, list[types.Message]] = {}
        for row in models.Message.objects.filter(window).order_by("task_id", "position"):
            result.setdefault(row.task_id, []).append(msgspec.convert(row.payload, types.Message))
        return result

    def _artifacts_by_task(self, tasks: list[models.Task]) -> dict[Any, list[types.Artifact]]:
        if not tasks:
            return {}
        rows = models.Artifact.objects.filter(task_id__in=[task.id for task in tasks])
        result: dict[Any, list[types.Artifact]] = {}
        for row in rows.order_by("task_id", "position"):
            result.setdefault(row.task_id, []).append(_artifact(row))
        return result


# Django reads jsonb as text on PostgreSQL (JSONField decodes it): msgspec decodes it here.
