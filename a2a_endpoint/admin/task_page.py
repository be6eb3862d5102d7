"""What a task's admin page shows beside its columns: its artifacts assembled, and its job
(lease, worker, hand-off) in words."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib import admin
from django.utils import timezone
from django.utils.formats import localize
from django.utils.timezone import localtime
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from a2a_endpoint import models
from a2a_endpoint.admin.common import EMPTY, parts_text

ARTIFACTS_SHOWN = 20
ARTIFACT_CHARS = 5_000


@dataclass(frozen=True)
class ArtifactView:
    """One artifact as stored: its chunks already merged (append / lastChunk at write time)."""

    artifact_id: str
    name: str
    description: str
    complete: bool
    attempt: int
    text: str  # the parts as text, cut at ARTIFACT_CHARS
    chars: int


def artifacts_of(task: models.Task) -> tuple[list[ArtifactView], bool]:
    """The task's first ``ARTIFACTS_SHOWN`` artifacts, and whether it has more."""
    rows = list(task.artifacts.order_by("position")[: ARTIFACTS_SHOWN + 1])
    views = []
    for row in rows[:ARTIFACTS_SHOWN]:
        text = parts_text(row.parts)
        views.append(
            ArtifactView(
                artifact_id=row.artifact_id,
                name=row.name,
                description=row.description,
                complete=row.complete,
                attempt=row.attempt,
                text=text if len(text) <= ARTIFACT_CHARS else text[:ARTIFACT_CHARS] + "…",
                chars=len(text),
            )
        )
    return views, len(rows) > ARTIFACTS_SHOWN


def _when(moment: object) -> str:
    return localize(localtime(moment))  # type: ignore[arg-type]


class JobFields:
    """Read-only fields of the task admin that put the job's columns in words."""

    @admin.display(description=gettext_lazy("job worker"))
    def worker(self, obj: models.Task) -> str:
        if obj.job_worker:
            return obj.job_worker
        if obj.job_id:  # claimed before the worker was recorded (migration 0006)
            return _("not recorded")
        return EMPTY

    @admin.display(description=gettext_lazy("job lease"))
    def lease(self, obj: models.Task) -> str:
        if obj.lease_expires_at is None:
            if obj.job_id:
                return _("released: the job ended")
            return _("none: no worker holds the task (jobs run in-process are not leased)")
        left = (obj.lease_expires_at - timezone.now()).total_seconds()
        values = {"seconds": abs(round(left)), "at": _when(obj.lease_expires_at)}
        if left >= 0:
            return _("held: expires in %(seconds)d s (%(at)s) unless the job renews it") % values
        return (
            _(
                "lapsed %(seconds)d s ago (%(at)s): the job is lost; the sweeper retries or "
                "fails the task"
            )
            % values
        )

    @admin.display(description=gettext_lazy("job hand-off"))
    def handoff(self, obj: models.Task) -> str:
        if obj.handoff_deadline is None:
            return _("no job owed")
        owed = _("owed: a worker must claim it by %(at)s") % {"at": _when(obj.handoff_deadline)}
        if not obj.handoffs:
            return owed
        return owed + " " + _("(handed again %(count)d times)") % {"count": obj.handoffs}
