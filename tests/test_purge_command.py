"""``manage.py a2a_purge``: which ages it uses (RETENTION, --older-than, --state), what it
prints, its dry run, and the errors it reports instead of a traceback."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from datetime import timedelta
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import OperationalError, connection
from django.utils import timezone

from a2a_endpoint import models, store
from a2a_endpoint.lifecycle import TaskState
from tests.service.builders import a2a_settings, stored_task

pytestmark = pytest.mark.django_db
REPO_ROOT = Path(__file__).resolve().parents[1]


def aged(days: float, state: TaskState = TaskState.COMPLETED) -> str:
    return stored_task(state=state, status_timestamp=timezone.now() - timedelta(days=days))


def purge(*args: str) -> str:
    out = StringIO()
    call_command("a2a_purge", *args, stdout=out)
    return out.getvalue()


def left() -> set[str]:
    return {str(pk) for pk in models.Task.objects.values_list("pk", flat=True)}


@pytest.fixture
def tasks() -> dict[str, str]:
    return {
        "old_completed": aged(40),
        "old_failed": aged(40, TaskState.FAILED),
        "older_canceled": aged(100, TaskState.CANCELED),
        "young_completed": aged(5),
        "old_working": aged(400, TaskState.WORKING),
        "old_input": aged(400, TaskState.INPUT_REQUIRED),
    }


def test_without_retention_or_an_age_it_says_so_and_deletes_nothing(tasks):
    out = purge()
    assert "RETENTION is empty: every task is kept" in out
    assert left() == set(tasks.values())


def test_retention_gives_the_ages(tasks):
    with a2a_settings(RETENTION={"failed": "30d", "canceled": "90d"}):
        out = purge()
    assert left() == set(tasks.values()) - {tasks["old_failed"], tasks["older_canceled"]}
    assert re.search(r"canceled, older than 90 days \(changed before .* UTC\): 1 task deleted", out)
    assert "failed, older than 30 days" in out
    assert "completed" not in out
    assert re.search(r"Deleted 2 tasks in 2 batches, [0-9.]+ s \(longest batch \d+ ms\)\.", out)


def test_older_than_replaces_retention_for_every_terminal_state(tasks):
    with a2a_settings(RETENTION={"failed": "1000d", "input_required": "1d"}):
        out = purge("--older-than", "30d")
    expected = {"old_completed", "old_failed", "older_canceled"}
    assert left() == {task for name, task in tasks.items() if name not in expected}
    for state in ("canceled", "completed", "failed", "rejected"):
        assert f"{state}, older than 30 days" in out
    assert "input_required" not in out  # named by RETENTION, not an age of --older-than's


def test_state_narrows_older_than(tasks):
    out = purge("--older-than", "50d", "--state", "canceled", "--state", "input-required")
    assert left() == set(tasks.values()) - {tasks["older_canceled"], tasks["old_input"]}
    assert "input_required, older than 50 days" in out


def test_state_narrows_retention(tasks):
    with a2a_settings(RETENTION={"*": "30d"}):
        purge("--state", "TASK_STATE_FAILED")
    assert left() == set(tasks.values()) - {tasks["old_failed"]}


def test_a_state_without_an_age_is_an_error(tasks):
    with (
        a2a_settings(RETENTION={"completed": "30d"}),
        pytest.raises(
            CommandError, match="RETENTION gives no age for failed: add it there, or give"
        ),
    ):
        purge("--state", "failed")
    assert left() == set(tasks.values())


def test_dry_run_counts_per_state_and_deletes_nothing(tasks):
    models.Task.objects.filter(pk=tasks["old_completed"]).update(
        lease_expires_at=timezone.now() + timedelta(minutes=5)
    )
    out = purge("--older-than", "30d", "--dry-run")
    assert left() == set(tasks.values())
    assert re.search(r"completed, older than 30 days .*: 0 tasks would go; 1 kept", out)
    assert re.search(r"canceled, older than 30 days .*: 1 task would go\n", out)
    assert "Dry run: 2 tasks would be deleted; nothing was." in out


def test_batch_size_and_verbose_batches():
    for days in range(40, 47):
        aged(days)
    out = StringIO()
    call_command("a2a_purge", "--older-than", "30", "--batch-size", "3", verbosity=2, stdout=out)
    batches = re.findall(r"batch: (\d+) completed tasks? deleted in \d+ ms", out.getvalue())
    assert batches == ["3", "3", "1"]
    assert "Deleted 7 tasks in 3 batches" in out.getvalue()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--older-than", "soon"], "'soon' is not an age"),
        (["--older-than", "0d"], "more than 0"),
        (["--older-than", "30d", "--state", "working"], "working tasks are never deleted"),
        (["--older-than", "30d", "--state", "done"], "'done' is not a task state"),
        (["--older-than", "30d", "--batch-size", "0"], "--batch-size must be 1 to 10000"),
        (["--older-than", "30d", "--batch-size", "many"], "invalid int value: 'many'"),
    ],
)
def test_bad_arguments_are_clear_errors_and_change_nothing(tasks, args, message):
    with pytest.raises(CommandError, match=re.escape(message)):
        purge(*args)
    assert left() == set(tasks.values())


def test_a_database_failure_is_a_command_error_saying_to_run_it_again(tasks):
    def fail_on_artifacts(execute, sql, params, many, context):
        if sql.startswith('DELETE FROM "a2a_endpoint_artifact"'):
            raise OperationalError("server closed the connection unexpectedly")
        return execute(sql, params, many, context)

    with (
        connection.execute_wrapper(fail_on_artifacts),
        pytest.raises(
            CommandError, match=r"The purge stopped: server closed .* Run it again to continue\."
        ),
    ):
        purge("--older-than", "30d")
    assert left() == set(tasks.values())  # the batch under way was rolled back whole
    assert store.wrong_task_counts() == []


def test_the_command_runs_on_the_demo_sqlite_database(tmp_path):
    """The same statements on SQLite (the embedded default): RETURNING, keyset, dates."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"DATABASE_URL", "REDIS_URL"} and not key.startswith("A2A_")
    }
    env.update(DJANGO_SETTINGS_MODULE="project.settings", A2A_DEMO_DB=str(tmp_path / "db.sqlite3"))

    def manage(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    manage("migrate", "--verbosity", "0")
    manage(
        "shell",
        "-c",
        "from datetime import timedelta\n"
        "from django.utils import timezone\n"
        "from tests.service.builders import stored_task\n"
        "for days in (1, 40, 41, 42, 43):\n"
        "    stored_task(history=2, artifacts=['a'],"
        " status_timestamp=timezone.now() - timedelta(days=days))\n",
    )
    out = manage("a2a_purge", "--older-than", "30d", "--batch-size", "3")
    assert "completed, older than 30 days" in out
    assert "Deleted 4 tasks in 2 batches" in out
    counts = manage(
        "shell",
        "-c",
        "from a2a_endpoint import models\n"
        "print([m.objects.count() for m in (models.Task, models.Message, models.Artifact)])",
    )
    assert counts.strip().splitlines()[-1] == "[1, 2, 1]"
