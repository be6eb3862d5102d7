"""Query sets for the task tables: ownership scoping and ListTasks keyset paging."""

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


class MessageQuerySet(models.QuerySet):
    def chronological(self) -> MessageQuerySet:
        return self.order_by("task_id", "position")
