"""A task's timeline on its admin page: history messages and stored events in one list,
paged by keyset (a page reads at most two index ranges, however long the task).

Events are numbered by ``seq`` and messages by ``position``, each in the order it was
written; the two are merged by time, each keeping its own order. A message and the event
written with it share a transaction, the message first: at equal times it comes first.

A page is cut at a boundary: the numbers of events and messages before it. The query
parameter ``timeline`` names one: ``before.E.M`` (the page ending there) or ``after.E.M``
(the page starting there); without it, the newest page.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils.timezone import localtime
from django.utils.translation import gettext as _

from a2a_endpoint import models
from a2a_endpoint.admin.common import parts_text

PAGE_PARAM = "timeline"
PAGE_SIZE = 50
SUMMARY_CHARS = 200
PAYLOAD_CHARS = 20_000

_BOUNDARY = re.compile(r"^(before|after)\.(\d{1,18})\.(\d{1,18})$")
_STATE_LABELS = dict(models.STATE_CHOICES)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _state(value: Any) -> str:
    return _STATE_LABELS.get(value, str(value or ""))


def _message_text(message: dict[str, Any] | None) -> str:
    return parts_text((message or {}).get("parts"))


def _status_summary(body: dict[str, Any]) -> str:
    status = body.get("status") or {}
    text = _message_text(status.get("message"))
    return f"→ {_state(status.get('state'))}" + (f": {text}" if text else "")


def _artifact_summary(body: dict[str, Any]) -> str:
    artifact = body.get("artifact") or {}
    name = artifact.get("name") or artifact.get("artifactId", "")
    flags = [
        label
        for key, label in (("append", _("appended")), ("lastChunk", _("last chunk")))
        if body.get(key)
    ]
    head = f"{name} ({', '.join(flags)})" if flags else name
    return f"{head}: {parts_text(artifact.get('parts'))}"


def _task_summary(body: dict[str, Any]) -> str:
    history = body.get("history") or []
    first = _message_text(history[0]) if history else ""
    created = _("created, %(state)s") % {"state": _state((body.get("status") or {}).get("state"))}
    return f"{created}: {first}" if first else created


_SUMMARIES = {
    "statusUpdate": _status_summary,
    "artifactUpdate": _artifact_summary,
    "task": _task_summary,
    "message": _message_text,
}


def event_summary(kind: str, payload: dict[str, Any]) -> str:
    """One line saying what a stored StreamResponse did."""
    summary = _SUMMARIES.get(kind)
    body = payload.get(kind)
    text = summary(body) if summary is not None and isinstance(body, dict) else kind
    return _cut(" ".join(text.split()), SUMMARY_CHARS)


@dataclass(frozen=True)
class Entry:
    """One line of the timeline."""

    source: str  # "event" or "message"
    number: int  # the event's seq, the message's position
    kind: str  # the event's kind ("statusUpdate"…), the message's role ("user"…)
    created_at: datetime
    state: str  # the task's state after the event; "" for a message
    summary: str
    payload: str  # indented JSON, cut at PAYLOAD_CHARS
    payload_chars: int

    @property
    def time(self) -> str:
        """When it was written, to the millisecond, in the current time zone."""
        return localtime(self.created_at).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _payload(value: Any) -> tuple[str, int]:
    text = json.dumps(value, ensure_ascii=False, indent=2)
    return _cut(text, PAYLOAD_CHARS), len(text)


def _event_entry(event: models.TaskEvent) -> Entry:
    payload, chars = _payload(event.payload)
    summary = event_summary(event.kind, event.payload)
    return Entry(
        source="event",
        number=event.seq,
        kind=event.kind,
        created_at=event.created_at,
        state=_state(event.state),
        summary=summary,
        payload=payload,
        payload_chars=chars,
    )


def _message_entry(message: models.Message) -> Entry:
    payload, chars = _payload(message.payload)
    role = message.role.removeprefix("ROLE_").lower()
    summary = _cut(" ".join(_message_text(message.payload).split()), SUMMARY_CHARS)
    return Entry(
        source="message",
        number=message.position,
        kind=role,
        created_at=message.created_at,
        state="",
        summary=summary,
        payload=payload,
        payload_chars=chars,
    )


Row = models.TaskEvent | models.Message


def _key(row: Row) -> tuple[datetime, int]:
    # At equal times the message first: it was written before the event of its transaction.
    return (row.created_at, 1 if isinstance(row, models.TaskEvent) else 0)


def _merge(events: list[Row], messages: list[Row], *, newest_first: bool) -> list[Row]:
    """Both lists (each in its own order, the page's direction) merged by time."""
    merged: list[Row] = []
    e = m = 0
    while e < len(events) or m < len(messages):
        if m == len(messages):
            take_event = True
        elif e == len(events):
            take_event = False
        else:
            take_event = (_key(events[e]) > _key(messages[m])) == newest_first
        if take_event:
            merged.append(events[e])
            e += 1
        else:
            merged.append(messages[m])
            m += 1
    return merged


@dataclass(frozen=True)
class TimelinePage:
    """The entries of one page (oldest first) and where the pages around it start."""

    entries: list[Entry]
    first: int  # number of the first entry on the page, from 1
    total: int
    older: str  # the ``timeline`` parameter of the page before, "" if none
    newer: str
    oldest: str
    newest: str

    @property
    def last(self) -> int:
        return self.first + len(self.entries) - 1


def _parse(value: str, task: models.Task) -> tuple[str, int, int]:
    found = _BOUNDARY.match(value or "")
    if found is None:  # none, or not one of ours: the newest page
        return "before", task.seq, task.history_size
    return found[1], int(found[2]), int(found[3])


def timeline_page(task: models.Task, boundary: str = "", size: int = PAGE_SIZE) -> TimelinePage:
    """The page of ``task``'s timeline at ``boundary`` (the ``timeline`` parameter)."""
    direction, events, messages = _parse(boundary, task)
    if direction == "before":
        event_rows = models.TaskEvent.objects.before(task.pk, events + 1, size)
        message_rows = models.Message.objects.before(task.pk, messages, size)
    else:
        event_rows = models.TaskEvent.objects.after(task.pk, events, size)
        message_rows = models.Message.objects.after(task.pk, messages - 1, size)
    merged = _merge(list(event_rows), list(message_rows), newest_first=direction == "before")
    # Oldest first; not sorted by time: each source keeps its own order (clocks may differ).
    taken = merged[:size][::-1] if direction == "before" else merged[:size]
    entries = [
        _event_entry(row) if isinstance(row, models.TaskEvent) else _message_entry(row)
        for row in taken
    ]
    seqs = [entry.number for entry in entries if entry.source == "event"]
    positions = [entry.number for entry in entries if entry.source == "message"]
    # The page's bounds: how many events and messages come before it, and up to its end.
    low = (min(seqs) - 1 if seqs else events, min(positions) if positions else messages)
    high = (max(seqs) if seqs else events, max(positions) + 1 if positions else messages)
    has_older = low[0] > 0 or low[1] > 0
    has_newer = high[0] < task.seq or high[1] < task.history_size
    return TimelinePage(
        entries=entries,
        first=low[0] + low[1] + 1,
        total=task.seq + task.history_size,
        older=f"before.{low[0]}.{low[1]}" if has_older else "",
        newer=f"after.{high[0]}.{high[1]}" if has_newer else "",
        oldest="after.0.0" if has_older else "",
        newest=f"before.{task.seq}.{task.history_size}" if has_newer else "",
    )
