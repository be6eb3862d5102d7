"""The task list's filters: state with each state's count, and owner and tenant typed in.

Owner and tenant are text inputs, not lists of links: listing every owner would be a
``SELECT DISTINCT`` over the task table. The owner input suggests the first owners by name,
read from PostgreSQL's kept counts (a few index rows) or, on SQLite, the tasks.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.contrib import admin
from django.contrib.admin.views.main import PAGE_VAR, ChangeList
from django.db.models import Model, QuerySet
from django.http import HttpRequest
from django.utils.formats import number_format
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from a2a_endpoint import models, store
from a2a_endpoint.admin.counting import (
    OWNER_PARAM,
    STATE_PARAM,
    TENANT_PARAM,
    clean_text,
    counts_of,
)
from a2a_endpoint.lifecycle import TaskState

#: Owners suggested under the owner input.
OWNER_SUGGESTIONS = 50


class StateFilter(admin.SimpleListFilter):
    """By state, each with its number of tasks (all tasks', or the filtered owner's)."""

    title = _("state")
    parameter_name = STATE_PARAM

    def __init__(
        self, request: HttpRequest, params: dict[str, Any], model: type[Model], admin: Any
    ) -> None:
        super().__init__(request, params, model, admin)
        self.title = gettext("state (counts: %(scope)s)") % {
            "scope": counts_of(request).states.scope
        }

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        counts = counts_of(request).states.counts
        return [
            (value, f"{label} ({number_format(counts.get(value, 0), force_grouping=True)})")
            for value, label in models.STATE_CHOICES
            if value != TaskState.UNSPECIFIED.value
        ]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value():
            return queryset.filter(state=self.value())
        return queryset


class TextInputFilter(admin.ListFilter):
    """A filter whose value is typed in: an exact match on one column."""

    parameter_name = ""
    template = "admin/a2a_endpoint/task/text_filter.html"

    def __init__(
        self, request: HttpRequest, params: dict[str, Any], model: type[Model], admin: Any
    ) -> None:
        super().__init__(request, params, model, admin)
        self.value = ""
        if self.parameter_name in params:
            # Taken even when empty (an input left blank): an unused parameter would be
            # taken for a lookup of its own.
            self.value = clean_text(params.pop(self.parameter_name)[-1])
            if self.value:
                self.used_parameters[self.parameter_name] = self.value

    def has_output(self) -> bool:
        return True

    def expected_parameters(self) -> list[str]:
        return [self.parameter_name]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value:
            return queryset.filter(**{self.parameter_name: self.value})
        return queryset

    def suggestions(self) -> list[str]:
        return []

    def choices(self, changelist: ChangeList) -> Iterator[dict[str, Any]]:
        # One "choice": what the template's form needs. The form keeps the list's other
        # parameters (hidden), as the search form does, and starts again at page 1.
        kept = [
            (name, value)
            for name, values in self.request.GET.lists()
            if name not in (self.parameter_name, PAGE_VAR)
            for value in values
        ]
        clear = changelist.get_query_string(remove=[self.parameter_name, PAGE_VAR])
        yield {
            "parameter": self.parameter_name,
            "value": self.value,
            "hidden": kept,
            "suggestions": self.suggestions(),
            "clear_url": clear if self.value else "",
        }


class OwnerFilter(TextInputFilter):
    title = _("owner")
    parameter_name = OWNER_PARAM

    def suggestions(self) -> list[str]:
        kept = store.kept_owners(OWNER_SUGGESTIONS)
        if kept is not None:
            return kept
        return models.Task.objects.owner_names(OWNER_SUGGESTIONS)


class TenantFilter(TextInputFilter):
    title = _("tenant")
    parameter_name = TENANT_PARAM
