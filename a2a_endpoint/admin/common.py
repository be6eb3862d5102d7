"""What the admin's pages share: read-only inlines, parts as text, masked secrets, counts in
messages, links to a task."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin
from django.db.models import Model
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import ngettext

LISTED_IDS = 5
EMPTY = "-"  # the admin's default empty_value_display


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


def masked(secret: str) -> str:
    """A secret as its length only: no admin page shows a push config's token or credentials."""
    if not secret:
        return EMPTY
    count = len(secret)
    label = ngettext("•••• (%(count)d character)", "•••• (%(count)d characters)", count)
    return label % {"count": count}


def counted(singular: str, plural: str, count: int) -> str:
    """``count`` with its noun, e.g. "3 tasks" (the messages name two counts)."""
    return ngettext(singular, plural, count) % {"count": count}


def _task_link(task_id: Any) -> SafeString:
    url = reverse("admin:a2a_endpoint_task_change", args=[task_id])
    return format_html('<a href="{}">{}</a>', url, task_id)


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
