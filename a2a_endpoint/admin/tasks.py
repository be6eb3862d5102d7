"""The task admin: browse tasks (filters, search), inspect one (history, artifacts, events,
webhooks and deliveries), cancel some through the service."""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync
from django.contrib import admin, messages
from django.contrib.admin.options import InlineModelAdmin
from django.db.models import Model, QuerySet
from django.http import HttpRequest
from django.utils.safestring import SafeString
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from a2a_endpoint import models, types
from a2a_endpoint.admin.common import (
    LISTED_IDS,
    ReadOnlyInline,
    _json_preview,
    parts_text,
)
from a2a_endpoint.admin.push import PushConfigInline, deliveries_table
from a2a_endpoint.errors import TaskNotCancelableError, TaskNotFoundError
from a2a_endpoint.service import get_request_handler


class MessageInline(ReadOnlyInline):
    model = models.Message
    verbose_name_plural = _("history")
    fields = readonly_fields = ["position", "role", "message_id", "text"]

    @admin.display(description=_("text"))
    def text(self, obj: models.Message) -> str:
        return parts_text(obj.payload.get("parts"))


class ArtifactInline(ReadOnlyInline):
    model = models.Artifact
    fields = readonly_fields = [
        "position",
        "artifact_id",
        "name",
        "complete",
        "content",
    ]

    @admin.display(description=_("parts"))
    def content(self, obj: models.Artifact) -> str:
        return parts_text(obj.parts)


class TaskEventInline(ReadOnlyInline):
    model = models.TaskEvent
    verbose_name_plural = _("events")
    fields = readonly_fields = ["seq", "kind", "created_at", "payload_preview"]

    @admin.display(description=_("stream response"))
    def payload_preview(self, obj: models.TaskEvent) -> SafeString:
        return _json_preview(obj.payload)


@admin.register(models.Task)
class TaskAdmin(admin.ModelAdmin):
    """Browse tasks (filters, search by context id or task id), inspect one, cancel some."""

    list_display = [
        "id",
        "context_id",
        "owner",
        "state",
        "status_timestamp",
        "created_at",
        "updated_at",
    ]
    list_filter = ["state", "created_at", "updated_at"]
    # "id" is an icontains search: a whole or partial task id matches (on PostgreSQL the uuid
    # is compared as text; on SQLite Django strips the hyphens the column does not store).
    search_fields = ["context_id", "id"]
    search_help_text = _("Search by context id, or by a task id (whole or part).")
    ordering = ["-created_at", "-id"]
    date_hierarchy = "created_at"
    fields = readonly_fields = [
        "id",
        "context_id",
        "owner",
        "tenant",
        "state",
        "status_text",
        "status_timestamp",
        "metadata",
        "seq",
        "history_size",
        "created_at",
        "updated_at",
        "recent_push_deliveries",
    ]
    inlines = [MessageInline, ArtifactInline, TaskEventInline, PushConfigInline]
    actions = ["cancel_tasks"]

    @admin.display(description=_("status message"))
    def status_text(self, obj: models.Task) -> str:
        return parts_text((obj.status_message or {}).get("parts"))

    @admin.display(description=_("push deliveries"))
    def recent_push_deliveries(self, obj: models.Task) -> SafeString:
        return deliveries_table(obj)

    def get_inlines(self, request: HttpRequest, obj: Model | None) -> list[type[InlineModelAdmin]]:
        # The webhooks only on a task that has some: most tasks have none.
        if obj is None or not models.PushNotificationConfig.objects.filter(task_id=obj.pk).exists():
            return [inline for inline in self.inlines if inline is not PushConfigInline]
        return list(self.inlines)

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

    @admin.action(description=_("Cancel selected tasks"), permissions=["cancel"])
    def cancel_tasks(self, request: HttpRequest, queryset: QuerySet[models.Task]) -> None:
        # The same service call as CancelTask (A2A §3.1.5): the task becomes CANCELED in one
        # transaction and its job, wherever it runs, is told to stop.
        cancel = async_to_sync(get_request_handler().cancel_task)
        canceled, refused = 0, []
        for task in list(queryset.only("id", "owner", "tenant")):
            try:
                cancel(
                    types.CancelTaskRequest(id=str(task.id), tenant=task.tenant),
                    types.Caller(owner=task.owner, tenant=task.tenant),
                )
            except (TaskNotCancelableError, TaskNotFoundError):
                refused.append(str(task.id))
            else:
                canceled += 1
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
