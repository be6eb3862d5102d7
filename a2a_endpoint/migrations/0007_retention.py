"""The purge's index (a2a_endpoint/store/retention.py): each settled state's tasks by age,
across callers, for ``manage.py a2a_purge`` and its Celery beat task.

No existing index serves that scan: the ListTasks indexes all start with the owner. The
index is partial (terminal and interrupted states): new and running tasks, the rows written
most, never enter it.

On PostgreSQL it is built ``CONCURRENTLY``, so this migration is not atomic: by the time
retention is turned on the task table may hold millions of rows, and a plain ``CREATE
INDEX`` would block every task write while it is built (about a second a million rows).
If the build fails midway PostgreSQL leaves an INVALID index behind: ``DROP INDEX
a2a_task_state_age`` and migrate again.
"""

from django.db import migrations, models

INDEX = models.Index(
    condition=models.Q(
        (
            "state__in",
            [
                "TASK_STATE_AUTH_REQUIRED",
                "TASK_STATE_CANCELED",
                "TASK_STATE_COMPLETED",
                "TASK_STATE_FAILED",
                "TASK_STATE_INPUT_REQUIRED",
                "TASK_STATE_REJECTED",
            ],
        )
    ),
    fields=["state", "status_timestamp", "id"],
    name="a2a_task_state_age",
)


def _options(schema_editor):
    return {"concurrently": True} if schema_editor.connection.vendor == "postgresql" else {}


def forwards(apps, schema_editor):
    task = apps.get_model("a2a_endpoint", "Task")
    schema_editor.add_index(task, INDEX, **_options(schema_editor))


def backwards(apps, schema_editor):
    task = apps.get_model("a2a_endpoint", "Task")
    schema_editor.remove_index(task, INDEX, **_options(schema_editor))


class Migration(migrations.Migration):
    # CREATE INDEX CONCURRENTLY cannot run inside a transaction.
    atomic = False

    dependencies = [
        ("a2a_endpoint", "0006_admin_console"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.AddIndex(model_name="task", index=INDEX)],
            database_operations=[migrations.RunPython(forwards, backwards, elidable=False)],
        ),
    ]
