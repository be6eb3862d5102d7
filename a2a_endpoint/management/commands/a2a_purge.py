"""``manage.py a2a_purge [--older-than AGE] [--state STATE ...] [--dry-run] [--batch-size N]``:
delete the tasks that outlived their state's age (``RETENTION``, docs/retention.md).

Without ``--older-than`` the ages are RETENTION's; ``--older-than`` replaces them with one age
for every terminal state (or the states named with ``--state``). With neither an age nor
RETENTION there is nothing to do: the command says so and exits 0, so a scheduled run of a
deployment that keeps every task is not an error. The Celery beat task
``a2a_endpoint.purge_expired_tasks`` runs the same purge with RETENTION's ages.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from a2a_endpoint import store
from a2a_endpoint.lifecycle import TERMINAL_STATES, TaskState


def _short(state: TaskState) -> str:
    return state.value.removeprefix("TASK_STATE_").lower()


def _age(age: timedelta) -> str:
    """30 days, 12 hours, 45 minutes, 90 seconds: the largest whole unit."""
    seconds = int(age.total_seconds())
    for unit, size in (("day", 86_400), ("hour", 3_600), ("minute", 60)):
        if seconds % size == 0:
            count = seconds // size
            return f"{count} {unit}{'' if count == 1 else 's'}"
    return f"{age.total_seconds():g} seconds"


def _when(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def _tasks(count: int, kind: str = "") -> str:
    return f"{count:,} {kind}{' ' if kind else ''}task{'' if count == 1 else 's'}"


def _rule(state: TaskState, age: timedelta, now: datetime) -> str:
    """completed, older than 30 days (changed before 2026-11-02 09:00 UTC)"""
    return f"{_short(state)}, older than {_age(age)} (changed before {_when(now - age)})"


class Command(BaseCommand):
    help = (
        "Delete tasks older than their state's age (RETENTION, or --older-than) with their "
        "history, artifacts, events and push configs, in short batches."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--older-than",
            metavar="AGE",
            help="One age for every terminal state (or those of --state), replacing "
            "RETENTION's: days (30) or 30d, 12h, 45m.",
        )
        parser.add_argument(
            "--state",
            action="append",
            dest="states",
            default=[],
            metavar="STATE",
            help="Only this state (completed, failed, canceled, rejected, input_required, "
            "auth_required); repeat for several.",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="Count what would go; delete nothing."
        )
        parser.add_argument(
            "--batch-size",
            type=int,
            metavar="N",
            help="Tasks per transaction (default: RETENTION_BATCH_SIZE).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        size = options["batch_size"]
        if size is not None and not 1 <= size <= store.MAX_PURGE_BATCH:
            raise CommandError(f"--batch-size must be 1 to {store.MAX_PURGE_BATCH}, not {size}.")
        policy = self._policy(options["older_than"], options["states"])
        if not policy:
            self.stdout.write(
                "RETENTION is empty: every task is kept. Give --older-than AGE to purge anyway."
            )
            return
        now = timezone.now()
        if options["dry_run"]:
            self._dry_run(policy, now)
        else:
            self._purge(policy, now, size, int(options["verbosity"]))

    def _policy(self, older_than: str | None, names: list[str]) -> dict[TaskState, timedelta]:
        """State → age from the arguments and RETENTION; CommandError says what is wrong."""
        try:
            states = [store.parse_state(name) for name in names]
            if older_than is not None:
                age = store.parse_age(older_than)
                return dict.fromkeys(states or sorted(TERMINAL_STATES), age)
            policy = store.retention_policy()
        except store.RetentionError as exc:
            raise CommandError(str(exc)) from None
        missing = [_short(state) for state in states if state not in policy]
        if missing:
            raise CommandError(
                f"RETENTION gives no age for {', '.join(missing)}: add it there, or give "
                "--older-than AGE."
            )
        return {state: policy[state] for state in states} if states else policy

    def _dry_run(self, policy: dict[TaskState, timedelta], now: datetime) -> None:
        counts = store.count_expired(policy, now=now)
        for state, (deletable, held) in counts.items():
            kept = f"; {held:,} kept (push deliveries owed or a job leased)" if held else ""
            rule = _rule(state, policy[state], now)
            self.stdout.write(f"  {rule}: {_tasks(deletable)} would go{kept}")
        total = sum(deletable for deletable, _ in counts.values())
        self.stdout.write(f"Dry run: {_tasks(total)} would be deleted; nothing was.")

    def _purge(
        self, policy: dict[TaskState, timedelta], now: datetime, size: int | None, verbosity: int
    ) -> None:
        def progress(batch: store.PurgeBatch) -> None:
            if verbosity >= 2:
                deleted = _tasks(batch.deleted, _short(batch.state))
                self.stdout.write(f"  batch: {deleted} deleted in {batch.seconds * 1000:.0f} ms")

        try:
            result = store.purge_expired(policy, batch_size=size, now=now, progress=progress)
        except store.PurgeError as exc:
            raise CommandError(f"The purge stopped: {exc}. Run it again to continue.") from exc
        for state, age in sorted(policy.items()):
            deleted = _tasks(result.deleted.get(state, 0))
            self.stdout.write(f"  {_rule(state, age, now)}: {deleted} deleted")
        self.stdout.write(
            self.style.SUCCESS(
                f"Deleted {_tasks(result.total)} in {result.batches} batch"
                f"{'' if result.batches == 1 else 'es'}, {result.seconds:.2f} s "
                f"(longest batch {result.longest_batch * 1000:.0f} ms)."
            )
        )
