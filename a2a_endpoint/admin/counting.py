"""How many tasks the admin's task list shows, never by counting the whole task table.

PostgreSQL keeps the number of tasks per state and per caller (migrations 0003 and 0006):
the list reads those where its filters allow (no filter, a state, an owner), else reads the
first page (a list that fits on it is counted so) or counts the matching tasks up to
``PAGED_ROWS`` and no further. SQLite (the embedded default, small databases) counts by
``GROUP BY``. The list pages through at most ``PAGED_ROWS`` tasks, so
no page reads far into an index; filters and search reach the others.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from django.contrib.admin.views.main import (
    ALL_VAR,
    IS_FACETS_VAR,
    IS_POPUP_VAR,
    ORDER_VAR,
    PAGE_VAR,
    SEARCH_VAR,
    TO_FIELD_VAR,
    ChangeList,
)
from django.core.paginator import Paginator
from django.db import connection
from django.http import HttpRequest
from django.utils.formats import number_format
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from a2a_endpoint import models, store

#: The most tasks the list pages through (100 pages of 100): deeper pages would read that
#: far into an index (OFFSET); the total is still shown whole.
PAGED_ROWS = 10_000

#: An owner with more tasks than this gets the state counts of all tasks, not its own: its
#: own are a GROUP BY over its index entries (bench/admin_queries.py: 7 ms for 724 tasks,
#: 665 ms for 400,000).
OWNER_STATE_COUNT_LIMIT = 20_000

STATE_PARAM = "state__exact"
OWNER_PARAM = "owner__exact"
TENANT_PARAM = "tenant__exact"

#: Query parameters of the list that are not filters.
_NOT_FILTERS = {ALL_VAR, IS_FACETS_VAR, IS_POPUP_VAR, ORDER_VAR, PAGE_VAR, TO_FIELD_VAR}
_COUNTED = {STATE_PARAM, OWNER_PARAM, TENANT_PARAM}


def clean_text(value: str) -> str:
    """A typed filter value as it is matched (the owner and tenant inputs)."""
    return value.strip()


@dataclass(frozen=True)
class ListQuery:
    """The list's filters as the counts see them."""

    state: str = ""
    owner: str = ""
    tenant: str = ""
    #: A search or another filter (dates): no kept count follows it.
    narrowed: bool = False

    @classmethod
    def of(cls, request: HttpRequest) -> ListQuery:
        params = request.GET
        others = set(params) - _COUNTED - _NOT_FILTERS - {SEARCH_VAR}
        return cls(
            state=params.get(STATE_PARAM, ""),
            owner=clean_text(params.get(OWNER_PARAM, "")),
            tenant=clean_text(params.get(TENANT_PARAM, "")),
            narrowed=bool(others) or bool(params.get(SEARCH_VAR, "").strip()),
        )


@dataclass(frozen=True)
class StateCounts:
    """Each state's number of tasks, among the tasks of ``owner`` and ``tenant`` ("": all)."""

    counts: dict[str, int] = field(default_factory=dict)
    owner: str = ""
    tenant: str = ""

    @property
    def scope(self) -> str:
        """What they count, for the state filter's title."""
        if self.owner and self.tenant:
            return _("owner %(owner)s, tenant %(tenant)s") % vars(self)
        if self.owner:
            return _("owner %(owner)s") % vars(self)
        if self.tenant:
            return _("tenant %(tenant)s") % vars(self)
        return _("all tasks")


def _counts_kept() -> bool:
    return connection.vendor == "postgresql" and store.task_counts_kept()


class TaskCounts:
    """The counts one view of the task list needs, each read at most once."""

    def __init__(self, query: ListQuery) -> None:
        self.query = query

    @cached_property
    def states(self) -> StateCounts:
        """Each state's tasks: the owner's and tenant's filtered to where that is cheap,
        else all tasks (kept on PostgreSQL, one GROUP BY elsewhere)."""
        own = self._own_states()
        if own is not None:
            return own
        kept = store.kept_state_counts()
        return StateCounts(kept if kept is not None else models.Task.objects.count_by_state())

    def _own_states(self) -> StateCounts | None:
        query = self.query
        if not (query.owner or query.tenant):
            return None
        if _counts_kept():
            if not query.owner:
                return None  # a tenant alone: no index narrows it down, so no GROUP BY
            total = store.kept_caller_count(query.owner, query.tenant or None)
            if total is not None and total > OWNER_STATE_COUNT_LIMIT:
                return None
        tasks = models.Task.objects.all()
        if query.owner:
            tasks = tasks.filter(owner=query.owner)
        if query.tenant:
            tasks = tasks.filter(tenant=query.tenant)
        return StateCounts(tasks.count_by_state(), query.owner, query.tenant)

    def total(self) -> int | None:
        """The exact number of tasks the list shows, when known without counting them."""
        query = self.query
        if query.narrowed:
            return None
        if query.owner and not query.state:
            caller = store.kept_caller_count(query.owner, query.tenant or None)
            if caller is not None:
                return caller
        states = self.states
        if (states.owner, states.tenant) != (query.owner, query.tenant):
            return None  # the counts are of all tasks, the list of some
        if query.state:
            return states.counts.get(query.state, 0)
        return sum(states.counts.values())


class TaskChangeList(ChangeList):
    """Django's change list, showing the rows its paginator read to count them, if any."""

    def get_results(self, request: HttpRequest) -> None:
        super().get_results(request)
        rows = getattr(self.paginator, "first_rows", None)
        if rows is not None and not self.multi_page:
            self.result_list = rows


_REQUEST_ATTRIBUTE = "_a2a_task_counts"


def counts_of(request: HttpRequest) -> TaskCounts:
    """The counts of this view of the list (the state filter and the paginator share them)."""
    counts = getattr(request, _REQUEST_ATTRIBUTE, None)
    if counts is None:
        counts = TaskCounts(ListQuery.of(request))
        setattr(request, _REQUEST_ATTRIBUTE, counts)
    return counts


class TaskPaginator(Paginator):
    """Pages of the task list, counted from the kept counts (``total``) or up to
    ``PAGED_ROWS`` matching tasks, and no deeper than ``PAGED_ROWS`` tasks."""

    def __init__(self, object_list: Any, per_page: int, *, total: int | None) -> None:
        super().__init__(object_list, per_page)
        self.total = total
        #: The whole list, when it fits on one page and was read to count it.
        self.first_rows: list[Any] | None = None

    @cached_property
    def count(self) -> int:
        if self.total is not None:
            return self.total
        # A list that fits on one page is counted by reading it, and shown from what was read
        # (TaskChangeList): one statement, not a count and a page (each a scan of the table
        # when the filter is a search for a part of an id).
        rows = list(self.object_list[: self.per_page + 1])
        if len(rows) <= self.per_page:
            self.first_rows = rows
            return len(rows)
        # A count that stops: COUNT(*) over a LIMIT subquery.
        return self.object_list.order_by()[: PAGED_ROWS + 1].count()

    @property
    def exact(self) -> bool:
        """Whether ``count`` is the number of matching tasks (else: more than PAGED_ROWS)."""
        return self.total is not None or self.count <= PAGED_ROWS

    @cached_property
    def num_pages(self) -> int:
        if self.count == 0 and not self.allow_empty_first_page:
            return 0
        paged = min(self.count, PAGED_ROWS)
        return max(1, math.ceil(max(1, paged - self.orphans) / self.per_page))

    @property
    def label(self) -> str:
        """The count as the list shows it: exact, or "more than 10,000 tasks"."""
        if not self.exact:
            return _("more than %(count)s tasks") % {
                "count": number_format(PAGED_ROWS, force_grouping=True)
            }
        label = ngettext("%(count)s task", "%(count)s tasks", self.count) % {
            "count": number_format(self.count, force_grouping=True)
        }
        if self.count > PAGED_ROWS:
            label += _("; the first %(paged)s are paged: filter or search to reach the others") % {
                "paged": number_format(PAGED_ROWS, force_grouping=True)
            }
        return label
