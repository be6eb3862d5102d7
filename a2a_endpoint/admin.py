"""Django admin for tasks: read-only views of a task, its history, artifacts and events.

Tasks change only through the A2A service, so nothing here edits them; the one write is the
"Cancel selected tasks" action, which goes through the same service call as CancelTask.
"""

from __future__ import annotations

import json
from typing import Any

from asgiref.sync import async_to_sync
from django.contrib import admin, messages
from django.db.models import Model, QuerySet
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from a2a_endpoint import models, types
from a2a_endpoint.errors import TaskNotCancelableError, TaskNotFoundError
from a2a_endpoint.service import get_request_handler

PAYLOAD_PREVIEW_CHARS = 2000
LISTED_IDS = 5


def _part_text(part: dict[str, Any]) -> str:
    if "text" in part:
        return str(part["text"])
    name = part.get("filename") or part.get("mediaType") or "file"
    if "url" in part:
        return f"[{name}: {part['url']}]"
    if "raw" in part:  # base64 in ProtoJSON: about 3 bytes per 4 characters
        return f"[{name}: {len(part['raw']) * 3 // 4} bytes]"
    if "data" in part:
        return f"[data: {json.dumps(part['data'], ensure_ascii=False)}]"
    return "[empty part]"


def parts_text(parts: list[dict[str, Any]] | None) -> str:
    """ProtoJSON parts as text: text parts as they are, files and data as a short label."""
    return "\n".join(_part_text(part) for part in parts or [])


def _json_preview(value: Any) -> SafeString:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    if len(text) > PAYLOAD_PREVIEW_CHARS:
        text = text[:PAYLOAD_PREVIEW_CHARS] + "…"
    return format_html('<code style="white-space: pre-wrap">{}</code>', text)


class ReadOnlyInline(admin.TabularInline):
    """An inline that only shows rows: no add, change or delete."""

    extra = 0
    max_num = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


class MessageInline(ReadOnlyInline):
    model = models.Message
    verbose_name_plural = _("history")
    fields = readonly_fields = ["position", "role", "message_id", "text"]

    @admin.display(description=_("text"))
    def text(self, obj: models.Message) -> str:
        return parts_text(obj.payload.get("parts"))


class ArtifactInline(ReadOnlyInline):
    model = models.Artifact
    fields = readonly_fields = ["position", "artifact_id", "name", "complete", "content"]

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
    ]
    inlines = [MessageInline, ArtifactInline, TaskEventInline]
    actions = ["cancel_tasks"]

    @admin.display(description=_("status message"))
    def status_text(self, obj: models.Task) -> str:
        return parts_text((obj.status_message or {}).get("parts"))

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # tasks are created by SendMessage only

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
