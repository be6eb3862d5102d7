"""``manage.py a2a_recount_tasks [--check]``: check or rebuild the kept task counts.

On PostgreSQL, triggers keep each caller's number of tasks, which ListTasks reports as
``totalSize`` when it has no filters (migration 0003, docs/deployment.md, "Task counts").
They cannot drift through the app, the admin or SQL run with triggers enabled; a replica
applying changes with ``session_replication_role = replica``, or triggers disabled by hand,
bypasses them.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection

from a2a_endpoint import store


class Command(BaseCommand):
    help = (
        "Check (--check) or rebuild each caller's kept task count, which ListTasks reports "
        "as totalSize on PostgreSQL."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--check",
            action="store_true",
            help="Only report wrong counts; exit with status 1 if there are any.",
        )

    def handle(self, *args: Any, check: bool = False, **options: Any) -> None:
        if connection.vendor != "postgresql":
            self.stdout.write("Only PostgreSQL keeps task counts: ListTasks counts tasks here.")
            return
        store.forget_task_counts()
        if not store.task_counts_kept():
            raise CommandError("This database has no task counts: run `manage.py migrate`.")
        wrong = store.wrong_task_counts() if check else store.recount_tasks()
        for owner, tenant, kept, counted in wrong:
            caller = f"{owner} (tenant {tenant!r})" if tenant else owner
            self.stdout.write(f"{caller}: kept {kept}, counted {counted}")
        if check:
            if wrong:
                plural = "s" if len(wrong) > 1 else ""
                raise CommandError(f"{len(wrong)} wrong task count{plural}.", returncode=1)
            self.stdout.write(self.style.SUCCESS("Every task count is right."))
        else:
            fixed = {0: "none was wrong", 1: "1 was wrong"}.get(
                len(wrong), f"{len(wrong)} were wrong"
            )
            self.stdout.write(self.style.SUCCESS(f"Recounted the tasks; {fixed}."))
