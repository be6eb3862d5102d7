"""The task admin, an operator's console: browse tasks (state, owner and tenant filters with
counts, search), inspect one (its timeline, artifacts, job, webhooks and deliveries), cancel
one from its page or several from the list, through the service."""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import urlencode

from asgiref.sync import async_to_sync
from django.contrib import admin, messages
from django.contrib.admin.options import InlineModelAdmin
from django.contrib.admin.utils import flatten_fieldsets, quote, unquote
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import Model, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from a2a_endpoint import models, types
from a2a_endpoint.admin.common import LISTED_IDS, parts_text
from a2a_endpoint.admin.counting import OWNER_PARAM, TaskChangeList, TaskPaginator, counts_of
from a2a_endpoint.admin.filters import OwnerFilter, StateFilter, TenantFilter
from a2a_endpoint.admin.push import PushConfigInline, deliveries_table
from a2a_endpoint.admin.task_page import JobFields, artifacts_of
from a2a_endpoint.admin.timeline import PAGE_PARAM, timeline_page
from a2a_endpoint.errors import TaskNotCancelableError, TaskNotFoundError
from a2a_endpoint.lifecycle import CANCELABLE_STATES, TaskState
from a2a_endpoint.service import get_request_handler

#: What the task's History says of a cancel from the admin.
CANCELED_LOG = "Canceled (CancelTask, through the A2A service)."


def cancel_task(task: models.Task) -> bool:
    """CancelTask for the task's own caller, through the service as a client's call goes
    (A2A §3.1.5): CANCELED in one transaction, the event published after the commit (streams
    and webhooks see it), the job told to stop wherever it runs. False if it was finished.

    The database failing fails the request before anything changed (an admin error page);
    the bus or the broker failing leaves the cancel committed (the service logs it)."""
    try:
        async_to_sync(get_request_handler().cancel_task)(
            types.CancelTaskRequest(id=str(task.pk), tenant=task.tenant),
            types.Caller(owner=task.owner, tenant=task.tenant),
        )
    except (TaskNotCancelableError, TaskNotFoundError):
        return False
    return True


@admin.register(models.Task)
class TaskAdmin(JobFields, admin.ModelAdmin):
    """Browse tasks, inspect one, cancel some: the list never counts the whole table and
    the page reads a bounded window of a task's rows (docs/admin.md)."""

    # Every column from the task row (no join); the context id is on the page and searched.
    list_display = ["id", "state", "owner_link", "tenant", "status_timestamp", "created_at"]
    list_filter = [StateFilter, OwnerFilter, TenantFilter, "created_at"]
    # No "Show counts" (facets: a COUNT per choice over the table) and no count of the whole
    # table beside the filtered one; the paginator counts (admin/counting.py).
    show_facets = admin.ShowFacets.NEVER
    show_full_result_count = False
    # Newest first, the order an index serves (a2a_task_created, a2a_task_state_created);
    # no sorting by other columns (each would sort the table).
    ordering = ["-created_at", "-id"]
    sortable_by = ["created_at"]
    # "id" is an icontains search: a whole or partial task id matches (on PostgreSQL the uuid
    # is compared as text; on SQLite Django strips the hyphens the column does not store).
    search_fields = ["context_id", "id"]
    search_help_text = _(
        "Search by a whole task id (an index lookup), a whole context id, or a part of either "
        "(these two read every task)."
    )
    fieldsets = [
        (
            None,
            {
                "fields": [
                    "id",
                    "context_id",
                    ("owner", "tenant"),
                    ("state", "status_timestamp"),
                    "status_text",
                    "metadata",
                    ("seq", "history_size"),
                    ("created_at", "updated_at"),
                ]
            },
        ),
        (
            _("Job"),
            {
                "fields": [
                    ("job_id", "worker"),
                    ("job_attempts", "job_position"),
                    "lease",
                    "handoff",
                ]
            },
        ),
    ]
    readonly_fields = flatten_fieldsets(fieldsets)
    inlines = [PushConfigInline]
    actions = ["cancel_tasks"]

    @admin.display(description=_("owner"))
    def owner_link(self, obj: models.Task) -> SafeString:
        # Filters the list by this owner.
        return format_html('<a href="?{}">{}</a>', urlencode({OWNER_PARAM: obj.owner}), obj.owner)

    @admin.display(description=_("status message"))
    def status_text(self, obj: models.Task) -> str:
        return parts_text((obj.status_message or {}).get("parts"))

    # --- the list ---------------------------------------------------------------------------

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[TaskChangeList]:
        return TaskChangeList

    def get_paginator(
        self, request: HttpRequest, queryset: QuerySet[Any], per_page: int, *args: Any, **kw: Any
    ) -> Paginator:
        return TaskPaginator(queryset, per_page, total=counts_of(request).total())

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Any], search_term: str
    ) -> tuple[QuerySet[Any], bool]:
        term = search_term.strip()
        try:
            whole = uuid.UUID(term)
        except ValueError:  # a part of an id: icontains (a scan of the table)
            return super().get_search_results(request, queryset, search_term)
        # A whole id: the task of that id (its primary key), else the tasks of that context.
        if models.Task.objects.filter(pk=whole).exists():
            return queryset.filter(pk=whole), False
        return queryset.filter(context_id__in={term, str(whole)}), False

    # --- the page ---------------------------------------------------------------------------

    def get_inlines(self, request: HttpRequest, obj: Model | None) -> list[type[InlineModelAdmin]]:
        # The webhooks only on a task that has some: most tasks have none.
        if obj is None or not models.PushNotificationConfig.objects.filter(task_id=obj.pk).exists():
            return []
        return list(self.inlines)

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: models.Task | None = None,
    ) -> HttpResponse:
        if obj is not None:
            artifacts, more_artifacts = artifacts_of(obj)
            context.update(
                timeline=timeline_page(obj, request.GET.get(PAGE_PARAM, "")),
                timeline_param=PAGE_PARAM,
                artifacts=artifacts,
                more_artifacts=more_artifacts,
                push_deliveries=deliveries_table(obj),
                cancel=self._cancel_button(request, obj),
            )
        return super().render_change_form(request, context, add, change, form_url, obj)

    def _cancel_button(self, request: HttpRequest, task: models.Task) -> dict[str, Any]:
        if not self.has_cancel_permission(request):
            return {}
        state = TaskState(task.state)
        return {
            "url": reverse("admin:a2a_endpoint_task_cancel", args=[quote(task.pk)]),
            "possible": state in CANCELABLE_STATES,
            "state": task.get_state_display(),
        }

    # --- permissions ------------------------------------------------------------------------

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # tasks are created by SendMessage only

    def get_deleted_objects(
        self, objs: Any, request: HttpRequest
    ) -> tuple[list[Any], dict[Any, int], set[Any], list[Any]]:
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        # A task's webhooks and deliveries go with it: their admins are read-only (none is
        # deleted on its own), which must not keep the task from being deleted.
        cascaded = {
            str(model._meta.verbose_name)
            for model in (models.PushNotificationConfig, models.PushDelivery)
        }
        perms_needed = {name for name in perms_needed if str(name) not in cascaded}
        return deleted, counts, perms_needed, protected

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False  # the change page is a read-only view (delete stays for cleanup)

    def has_cancel_permission(self, request: HttpRequest) -> bool:
        opts = self.opts
        return request.user.has_perm(f"{opts.app_label}.change_{opts.model_name}")

    # --- cancel -----------------------------------------------------------------------------

    def get_urls(self) -> list[URLPattern]:
        cancel = path(
            "<path:object_id>/cancel/",
            self.admin_site.admin_view(self.cancel_view),
            name="a2a_endpoint_task_cancel",
        )
        return [cancel, *super().get_urls()]

    def cancel_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """The page's Cancel task button (POST, CSRF-checked by ``admin_view``)."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not self.has_cancel_permission(request):
            raise PermissionDenied
        task = self.get_object(request, unquote(object_id))
        if task is None:
            return self._get_obj_does_not_exist_redirect(request, self.opts, object_id)
        if cancel_task(task):
            self.log_change(request, task, CANCELED_LOG)
            message = _("Canceled task %(id)s.") % {"id": task.pk}
            self.message_user(request, message, messages.SUCCESS)
        else:
            task.refresh_from_db(fields=["state"])
            message = _(
                "Task %(id)s was not canceled: it is %(state)s, and a finished task cannot "
                "be canceled."
            ) % {"id": task.pk, "state": task.get_state_display().lower()}
            self.message_user(request, message, messages.WARNING)
        return HttpResponseRedirect(
            reverse("admin:a2a_endpoint_task_change", args=[quote(task.pk)])
        )

    @admin.action(description=_("Cancel selected tasks"), permissions=["cancel"])
    def cancel_tasks(self, request: HttpRequest, queryset: QuerySet[models.Task]) -> None:
        canceled, refused = 0, []
        for task in list(queryset.only("id", "owner", "tenant")):
            if cancel_task(task):
                self.log_change(request, task, CANCELED_LOG)
                canceled += 1
            else:
                refused.append(str(task.id))
        self._report_cancel(request, canceled, refused)

    def _report_cancel(self, request: HttpRequest, canceled: int, refused: list[str]) -> None:
        if canceled:
            message = ngettext("Canceled %(count)d task.", "Canceled %(count)d tasks.", canceled)
            self.message_user(request, message % {"count": canceled}, messages.SUCCESS)
        if refused:
            ids = ", ".join(refused[:LISTED_IDS]) + (", …" if len(refused) > LISTED_IDS else "")
            message = ngettext(
                "%(count)d task was not cancelable (it is already finished): %(ids)s",
                "%(count)d tasks were not cancelable (they are already finished): %(ids)s",
                len(refused),
            )
            self.message_user(
                request, message % {"count": len(refused), "ids": ids}, messages.WARNING
            )
