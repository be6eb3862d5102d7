"""``manage.py a2a_push_retry [--task TASK_ID ...] [--all] [--dry-run] [--wait SECONDS]``: send
dead-lettered push deliveries again.

A dead letter is a delivery the sender gave up on (a refusal, or its tries or time ran out).
Once its webhook is fixed, this puts it back to pending with its tries and age counted afresh,
as the admin's "Retry selected dead letters" action does, and wakes the sender of each task.

On the Celery backend that sender is a worker. On the inline backend it is a thread pool of
this process, and shutting the backend down drops the sends that have not started: so the
command waits (up to ``--wait``) until each config's first retried delivery has been tried,
then for the sends under way. What is left pending then (retries after a failed try, events
queued behind it) is sent by the sweep of the server process (``PUSH_SWEEP_INTERVAL``).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db.models import Exists, OuterRef, QuerySet

from a2a_endpoint import models
from a2a_endpoint.execution import runtime
from a2a_endpoint.execution.backends import InlineBackend

_Delivery = models.PushDelivery

#: Dead letters per statement (a bounded IN list, however many there are).
CHUNK = 1000
#: How often the wait for the inline backend's sends looks at the outbox.
POLL_SECONDS = 0.2


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _chunks(ids: list[int]) -> Iterator[list[int]]:
    for start in range(0, len(ids), CHUNK):
        yield ids[start : start + CHUNK]


class Command(BaseCommand):
    help = (
        "Put dead-lettered push deliveries (of the tasks named with --task, or all of them "
        "with --all) back to pending, and wake the sender of each task."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--task",
            action="append",
            dest="tasks",
            default=[],
            metavar="TASK_ID",
            help="A task whose dead letters to retry (repeat for several).",
        )
        parser.add_argument("--all", action="store_true", help="Retry every dead letter.")
        parser.add_argument(
            "--dry-run", action="store_true", help="Only count what would be retried."
        )
        parser.add_argument(
            "--wait",
            type=float,
            default=60.0,
            metavar="SECONDS",
            help="On the inline backend, the longest wait for the first tries (default 60).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        named, every = options["tasks"], options["all"]
        if bool(named) == every:
            raise CommandError("Name the tasks with --task TASK_ID, or use --all (not both).")
        dead = _Delivery.objects.filter(state=_Delivery.DEAD)
        if not every:
            dead = dead.filter(task_id__in=self._known_tasks(named))
        rows = list(dead.order_by("pk").values_list("pk", "task_id"))
        delivery_ids = [pk for pk, _ in rows]
        tasks_of = {task_id for _, task_id in rows}
        counts = f"{_plural(len(rows), 'dead letter')} of {_plural(len(tasks_of), 'task')}"
        if options["dry_run"]:
            self.stdout.write(f"Would retry {counts}.")
            return
        if not rows:
            self.stdout.write("No dead letters to retry.")
            return
        task_ids = self._retry(delivery_ids)
        self.stdout.write(self.style.SUCCESS(f"Retrying {counts}."))
        try:
            waited = self._wake(task_ids, float(options["wait"]), delivery_ids)
        finally:
            runtime.reset()  # the inline backend's sends under way finish first
        if waited:
            self._report(delivery_ids)

    def _known_tasks(self, tasks: list[str]) -> list[uuid.UUID]:
        """The named tasks as ids; a malformed id is an error, an unknown one a warning."""
        ids = []
        for task in tasks:
            try:
                ids.append(uuid.UUID(task))
            except ValueError:
                raise CommandError(f"Not a task id: {task!r}") from None
        known = set(models.Task.objects.filter(pk__in=ids).values_list("pk", flat=True))
        for missing in (task for task in ids if task not in known):
            self.stderr.write(f"No task {missing}.")
        return ids

    def _retry(self, delivery_ids: list[int]) -> list[str]:
        """Back to pending through the store (as the admin's action); the tasks they are of."""
        store = runtime.get_store()
        task_ids: set[str] = set()
        for chunk in _chunks(delivery_ids):
            task_ids.update(store.retry_dead_push_deliveries(delivery_ids=chunk))
        return sorted(task_ids)

    def _wake(self, task_ids: list[str], wait: float, delivery_ids: list[int]) -> bool:
        """Wake each task's sender; on the inline backend (this process), wait until each
        config's first retried delivery was tried. Whether it waited to the end."""
        backend = runtime.get_backend()
        for task_id in task_ids:
            backend.push(task_id)
        if not isinstance(backend, InlineBackend) or wait <= 0:
            return False  # a worker sends them (Celery), or the caller chose not to wait
        deadline = time.monotonic() + wait
        while any(_untried(chunk).exists() for chunk in _chunks(delivery_ids)):
            if time.monotonic() >= deadline:
                self.stderr.write(
                    f"Not all tried within {wait:g}s: what is left pending is sent by the "
                    "server's sweep."
                )
                return False
            time.sleep(POLL_SECONDS)
        return True

    def _report(self, delivery_ids: list[int]) -> None:
        states = dict.fromkeys((_Delivery.DELIVERED, _Delivery.PENDING, _Delivery.DEAD), 0)
        for chunk in _chunks(delivery_ids):
            for state in _Delivery.objects.filter(pk__in=chunk).values_list("state", flat=True):
                states[state] += 1
        self.stdout.write(
            f"{states[_Delivery.DELIVERED]} delivered, {states[_Delivery.PENDING]} still "
            f"pending (retried later), {states[_Delivery.DEAD]} dead again."
        )


def _untried(delivery_ids: list[int]) -> QuerySet[models.PushDelivery]:
    """The retried deliveries a sender has still to try: each one first in its config's queue
    (nothing earlier pending) and not tried since. The ones behind a failing delivery wait
    for its retries, so they are not waited for."""
    earlier = _Delivery.objects.filter(
        config_id=OuterRef("config_id"), state=_Delivery.PENDING, seq__lt=OuterRef("seq")
    )
    return _Delivery.objects.filter(
        pk__in=delivery_ids, state=_Delivery.PENDING, attempts=0
    ).exclude(Exists(earlier))
