"""The push notification admin: webhook configs (secrets masked) and the outbox of deliveries,
with "Retry selected dead letters"; the task page's webhook inline and delivery table."""

from __future__ import annotations

import functools
from urllib.parse import urlencode

from django.contrib import admin, messages
from django.contrib.admin.utils import display_for_value
from django.db import transaction
from django.db.models import Model, QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from a2a_endpoint import models
from a2a_endpoint.admin.common import EMPTY, ReadOnlyInline, _task_link, counted, masked
from a2a_endpoint.execution import runtime

TASK_PAGE_DELIVERIES = 50


class MaskedSecrets:
    """A push config's token and credentials as read-only fields that show their length only."""

    @admin.display(description=_("token"))
    def token_masked(self, obj: models.PushNotificationConfig) -> str:
        return masked(obj.token)

    @admin.display(description=_("credentials"))
    def credentials_masked(self, obj: models.PushNotificationConfig) -> str:
        return masked(obj.auth_credentials)


class PushConfigInline(MaskedSecrets, ReadOnlyInline):
    model = models.PushNotificationConfig
    fields = readonly_fields = [
        "config_id",
        "url",
        "auth_scheme",
        "token_masked",
        "credentials_masked",
        "created_at",
    ]


_DELIVERY_COLUMNS = [
    "seq",
    "config_id",
    "state",
    "attempts",
    "last_status",
    "last_error",
    "next_attempt_at",
    "delivered_at",
]


def _delivery_label(column: str) -> str:
    if column == "config_id":  # the client's name of the config, not the row's key
        return str(models.PushNotificationConfig._meta.get_field("config_id").verbose_name)
    return str(models.PushDelivery._meta.get_field(column).verbose_name)


def _delivery_cells(delivery: models.PushDelivery) -> SafeString:
    values = {
        "config_id": delivery.config.config_id,
        "state": delivery.get_state_display(),
    }
    cells = (
        (display_for_value(values.get(column, getattr(delivery, column)), EMPTY),)
        for column in _DELIVERY_COLUMNS
    )
    return format_html_join("", "<td>{}</td>", cells)


def deliveries_table(task: models.Task) -> SafeString:
    """The task's latest push deliveries as a table, and a link to all of them when more.

    Not an inline: an inline formset cannot take a sliced queryset, and a task may owe
    thousands of deliveries (one per event and webhook).
    """
    newest_first = task.push_deliveries.select_related("config").order_by("-seq", "-config_id")
    latest = list(newest_first[:TASK_PAGE_DELIVERIES])
    if not latest:
        return format_html("{}", _("No push deliveries."))
    head = format_html_join("", "<th>{}</th>", ((_delivery_label(c),) for c in _DELIVERY_COLUMNS))
    rows = format_html_join("", "<tr>{}</tr>", ((_delivery_cells(d),) for d in latest))
    table = format_html("<table><thead><tr>{}</tr></thead><tbody>{}</tbody></table>", head, rows)
    total = len(latest)
    if total == TASK_PAGE_DELIVERIES:  # a full page: there may be more
        total = task.push_deliveries.count()
    if total == len(latest):
        return table
    url = reverse("admin:a2a_endpoint_pushdelivery_changelist")
    url += "?" + urlencode({"q": str(task.pk)})
    more = _("The latest %(shown)d of %(total)d:") % {
        "shown": len(latest),
        "total": total,
    }
    return format_html('<p>{} <a href="{}">{}</a></p>{}', more, url, _("see all"), table)


class ReadOnlyAdmin(admin.ModelAdmin):
    """A list and a detail page that only show rows: the sender and the A2A service write
    them, and deleting a config is the client's call (DeleteTaskPushNotificationConfig)."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    @admin.display(description=_("task"), ordering="task_id")
    def task_link(self, obj: models.PushDelivery | models.PushNotificationConfig) -> SafeString:
        return _task_link(obj.task_id)


@admin.register(models.PushDelivery)
class PushDeliveryAdmin(ReadOnlyAdmin):
    """The push outbox: what each webhook got, is owed or gave up on; dead letters retried."""

    list_display = [
        "task_link",
        "seq",
        "config__config_id",
        "state",
        "attempts",
        "last_status",
        "last_error",
        "next_attempt_at",
        "delivered_at",
    ]
    list_filter = ["state"]
    list_select_related = ["config"]
    search_fields = ["task__id"]  # icontains, as on the task list: a whole or partial id
    search_help_text = _("Search by a task id (whole or part).")
    ordering = ["-created_at", "-id"]
    fields = readonly_fields = [
        "task",
        "config",
        "seq",
        "state",
        "attempts",
        "last_status",
        "last_error",
        "next_attempt_at",
        "give_up_at",
        "created_at",
        "delivered_at",
    ]
    actions = ["retry_dead_letters"]

    def has_retry_permission(self, request: HttpRequest) -> bool:
        opts = self.opts
        return request.user.has_perm(f"{opts.app_label}.change_{opts.model_name}")

    @admin.action(description=_("Retry selected dead letters"), permissions=["retry"])
    def retry_dead_letters(
        self, request: HttpRequest, queryset: QuerySet[models.PushDelivery]
    ) -> None:
        # Through the store, as `manage.py a2a_push_retry` does: tries and age start afresh.
        dead = list(queryset.filter(state=models.PushDelivery.DEAD).values_list("pk", flat=True))
        task_ids = runtime.get_store().retry_dead_push_deliveries(delivery_ids=dead) if dead else []
        backend = runtime.get_backend()
        for task_id in task_ids:
            # After the commit (a project with ATOMIC_REQUESTS): the sender must find them
            # pending. Outside a transaction this runs at once.
            transaction.on_commit(functools.partial(backend.push, task_id), robust=True)
        skipped = queryset.count() - len(dead)
        self._report_retry(request, len(dead), len(task_ids), skipped)

    def _report_retry(self, request: HttpRequest, retried: int, tasks: int, skipped: int) -> None:
        if retried:
            message = _("Retrying %(deliveries)s of %(tasks)s.") % {
                "deliveries": counted("%(count)d dead letter", "%(count)d dead letters", retried),
                "tasks": counted("%(count)d task", "%(count)d tasks", tasks),
            }
            self.message_user(request, message, messages.SUCCESS)
        if skipped:
            message = ngettext(
                "%(count)d selected delivery was not a dead letter: left as it is.",
                "%(count)d selected deliveries were not dead letters: left as they are.",
                skipped,
            )
            self.message_user(request, message % {"count": skipped}, messages.WARNING)


@admin.register(models.PushNotificationConfig)
class PushNotificationConfigAdmin(MaskedSecrets, ReadOnlyAdmin):
    """The webhooks of tasks. Their token and credentials are shown masked, on no list."""

    list_display = ["config_id", "task_link", "url", "auth_scheme", "created_at"]
    search_fields = ["config_id", "task__id"]
    search_help_text = _("Search by config id, or by a task id (whole or part).")
    ordering = ["-created_at", "-id"]
    # The raw secrets are in no form, whatever `fields` becomes: only their masked display.
    exclude = ["token", "auth_credentials"]
    fields = readonly_fields = [
        "config_id",
        "task",
        "url",
        "auth_scheme",
        "token_masked",
        "credentials_masked",
        "sending_until",
        "created_at",
        "updated_at",
    ]
