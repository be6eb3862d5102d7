"""Query sets: task ownership scoping and ListTasks keyset paging; memory-bus heartbeats; the
admin's counts by state and timeline windows."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import models

from a2a_endpoint.lifecycle import ACTIVE_STATES


class TaskQuerySet(models.QuerySet):
    def visible_to(self, owner: str, tenant: str) -> TaskQuerySet:
        """Tasks belong to their caller (A2A §13.1): every read starts here."""
        return self.filter(owner=owner, tenant=tenant)

    def matching(
        self,
        *,
        context_id: str = "",
        state: str = "",
        status_after: datetime | None = None,
    ) -> TaskQuerySet:
        qs = self
        if context_id:
            qs = qs.filter(context_id=context_id)
        if state:
            qs = qs.filter(state=state)
        if status_after is not None:
            qs = qs.filter(status_timestamp__gte=status_after)
        return qs

    def newest_first(self) -> TaskQuerySet:
        return self.order_by("-status_timestamp", "-id")

    def after_cursor(self, timestamp: datetime, task_id: Any) -> TaskQuerySet:
        """Keyset continuation of ``newest_first``: strictly after (timestamp, id).

        The plain ``<=`` bound lets the (owner, tenant, -status_timestamp, -id) index start
        the scan at the cursor; the OR alone would be a filter over every earlier row.
        """
        return self.filter(status_timestamp__lte=timestamp).filter(
            models.Q(status_timestamp__lt=timestamp) | models.Q(id__lt=task_id)
        )

    def active(self) -> TaskQuerySet:
        return self.filter(state__in=[state.value for state in ACTIVE_STATES])

    def count_by_state(self) -> dict[str, int]:
        """Each state's number of these tasks, by one GROUP BY: for small databases, or one
        caller's tasks (PostgreSQL keeps the whole table's: ``store.kept_state_counts``)."""
        rows = self.order_by().values_list("state").annotate(tasks=models.Count("pk"))
        return {state: tasks for state, tasks in rows}

    def owner_names(self, limit: int) -> list[str]:
        """The first ``limit`` owners of these tasks, by name (small databases: PostgreSQL
        reads them from its kept counts, ``store.kept_owners``)."""
        names = self.order_by("owner").values_list("owner", flat=True).distinct()
        return list(names[:limit])


class _NumberedQuerySet(models.QuerySet):
    """Rows of a task numbered in the order they were written (events by ``seq``, history by
    ``position``), read in keyset windows: each window is an index range, however long the
    task (the admin's timeline pages through them)."""

    number_field = ""

    def before(self, task_id: Any, number: int, limit: int) -> _NumberedQuerySet:
        """The ``limit`` rows numbered below ``number``, newest first."""
        field = self.number_field
        rows = self.filter(task_id=task_id, **{f"{field}__lt": number})
        return rows.order_by(f"-{field}")[:limit]

    def after(self, task_id: Any, number: int, limit: int) -> _NumberedQuerySet:
        """The ``limit`` rows numbered above ``number``, oldest first."""
        field = self.number_field
        rows = self.filter(task_id=task_id, **{f"{field}__gt": number})
        return rows.order_by(field)[:limit]


class MessageQuerySet(_NumberedQuerySet):
    number_field = "position"

    def chronological(self) -> MessageQuerySet:
        return self.order_by("task_id", "position")


class TaskEventQuerySet(_NumberedQuerySet):
    number_field = "seq"


class ServerProcessQuerySet(models.QuerySet):
    """The heartbeats of processes serving with the in-memory event bus."""

    def beat(self, process_id: Any, seen_at: datetime, **identity: Any) -> None:
        """Record that the process is alive now (its row is created at its first beat)."""
        if not self.filter(id=process_id).update(seen_at=seen_at):
            self.update_or_create(id=process_id, defaults={"seen_at": seen_at, **identity})

    def live(self, since: datetime) -> ServerProcessQuerySet:
        """Processes whose last heartbeat is not older than ``since``."""
        return self.filter(seen_at__gte=since)

    def silent(self, before: datetime) -> ServerProcessQuerySet:
        """Processes not heard of since before ``before`` (gone without saying so)."""
        return self.filter(seen_at__lt=before)

    def other_than(self, process_id: Any) -> ServerProcessQuerySet:
        return self.exclude(id=process_id)

    def forget(self, process_ids: list[Any]) -> int:
        """Delete the rows of processes known to be gone; how many there were."""
        return self.filter(id__in=process_ids).delete()[0]
