"""The admin's task console: the number of tasks in each state, kept by triggers on
PostgreSQL; the indexes its task list pages by; the worker that claimed a task's job.

The list shows each state's number of tasks and pages by the total instead of counting a
million rows on every view (``a2a_endpoint/admin``, docs/admin.md). On PostgreSQL triggers
keep ``a2a_endpoint_task_state_count`` in step with ``a2a_endpoint_task``, in the same
transaction as each change, as migration 0003 does per caller:

- INSERT and DELETE: one statement-level trigger each, grouping the statement's rows by state;
- UPDATE of ``state``: a row-level trigger called only when the state changes (PostgreSQL
  tests the ``WHEN`` without calling it: an UPDATE of the task's other columns, such as
  ``seq`` on each artifact chunk or a lease renewal, costs nothing);
- TRUNCATE: every count goes.

A state's count is spread over ``SLOTS`` rows picked by the backend's process id, as 0003's
are: concurrent writers on different connections update different rows. Two transactions
that each move several tasks (the lost-job sweepers of two workers whose backends share a
slot) may deadlock on those rows; PostgreSQL then aborts one, whose sweep runs again.

Other databases (SQLite) get no triggers: the admin counts by ``GROUP BY`` there. ``manage.py
a2a_recount_tasks`` rebuilds these counts with the per-caller ones. A later migration that
alters the type of ``state`` must drop the UPDATE trigger first and create it again after.

The list is newest first by creation, all tasks' (``a2a_task_created``) or one state's
(``a2a_task_state_created``). Not by status time, which ListTasks orders by: an index in that
order without the owner first would tempt the planner away from the owner's index on a
ListTasks page (a LIMIT query filtered by owner).

The indexes are built ``CONCURRENTLY`` on PostgreSQL (task writes go on meanwhile), so this
migration is not atomic; the counts are created in a transaction of their own, which holds a
lock that makes task writers wait while the tasks already stored are counted (about 0.3 s a
million tasks). If an index build fails midway PostgreSQL leaves it INVALID: drop it and
migrate again.

Depends on 0008_server_processes, the newest migration when it was written (issue 18's other
parts add migrations alongside: the integrator orders them).
"""

from django.db import migrations, models, transaction

TABLE = "a2a_endpoint_task_state_count"
SLOTS = 16

#: One statement each (a function's body holds semicolons).
FORWARDS = [
    "LOCK TABLE a2a_endpoint_task IN SHARE ROW EXCLUSIVE MODE",
    f"""CREATE TABLE {TABLE} (
        state varchar(32) NOT NULL,
        slot smallint NOT NULL,
        tasks bigint NOT NULL,
        PRIMARY KEY (state, slot)
    )""",
    # INSERT and DELETE: the statement's rows (its transition table), counted per state.
    *(
        f"""CREATE FUNCTION {TABLE}_{name}() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO {TABLE} AS c (state, slot, tasks)
        SELECT state, mod(pg_backend_pid(), {SLOTS}), {sign}count(*) FROM {name}
        GROUP BY state ORDER BY state
        ON CONFLICT (state, slot) DO UPDATE SET tasks = c.tasks + excluded.tasks;
        RETURN NULL;
    END $$"""
        for name, sign in (("added", ""), ("removed", "-"))
    ),
    f"""CREATE FUNCTION {TABLE}_moved() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO {TABLE} AS c (state, slot, tasks)
        SELECT state, mod(pg_backend_pid(), {SLOTS}), tasks
        FROM (VALUES (OLD.state, -1), (NEW.state, 1)) AS moved (state, tasks)
        ORDER BY state
        ON CONFLICT (state, slot) DO UPDATE SET tasks = c.tasks + excluded.tasks;
        RETURN NULL;
    END $$""",
    f"""CREATE FUNCTION {TABLE}_cleared() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        DELETE FROM {TABLE};
        RETURN NULL;
    END $$""",
    f"""CREATE TRIGGER {TABLE}_insert AFTER INSERT ON a2a_endpoint_task
        REFERENCING NEW TABLE AS added
        FOR EACH STATEMENT EXECUTE FUNCTION {TABLE}_added()""",
    f"""CREATE TRIGGER {TABLE}_delete AFTER DELETE ON a2a_endpoint_task
        REFERENCING OLD TABLE AS removed
        FOR EACH STATEMENT EXECUTE FUNCTION {TABLE}_removed()""",
    f"""CREATE TRIGGER {TABLE}_update AFTER UPDATE OF state ON a2a_endpoint_task
        FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state)
        EXECUTE FUNCTION {TABLE}_moved()""",
    f"""CREATE TRIGGER {TABLE}_truncate AFTER TRUNCATE ON a2a_endpoint_task
        FOR EACH STATEMENT EXECUTE FUNCTION {TABLE}_cleared()""",
    f"""INSERT INTO {TABLE} (state, slot, tasks)
        SELECT state, 0, count(*) FROM a2a_endpoint_task GROUP BY state""",
]

BACKWARDS = [
    *(
        f"DROP TRIGGER {TABLE}_{event} ON a2a_endpoint_task"
        for event in ("insert", "delete", "update", "truncate")
    ),
    *(f"DROP FUNCTION {TABLE}_{name}()" for name in ("added", "removed", "moved", "cleared")),
    f"DROP TABLE {TABLE}",
]

INDEXES = [
    models.Index(fields=["-created_at", "-id"], name="a2a_task_created"),
    models.Index(fields=["state", "-created_at", "-id"], name="a2a_task_state_created"),
]


def _run(schema_editor, statements):
    if schema_editor.connection.vendor != "postgresql":
        return
    with transaction.atomic(using=schema_editor.connection.alias):
        for statement in statements:
            schema_editor.execute(statement, params=None)


def counts_forwards(apps, schema_editor):
    _run(schema_editor, FORWARDS)


def counts_backwards(apps, schema_editor):
    _run(schema_editor, BACKWARDS)


def _options(schema_editor):
    return {"concurrently": True} if schema_editor.connection.vendor == "postgresql" else {}


def indexes_forwards(apps, schema_editor):
    task = apps.get_model("a2a_endpoint", "Task")
    for index in INDEXES:
        schema_editor.add_index(task, index, **_options(schema_editor))


def indexes_backwards(apps, schema_editor):
    task = apps.get_model("a2a_endpoint", "Task")
    for index in INDEXES:
        schema_editor.remove_index(task, index, **_options(schema_editor))


class Migration(migrations.Migration):
    # CREATE INDEX CONCURRENTLY cannot run inside a transaction.
    atomic = False

    dependencies = [
        ("a2a_endpoint", "0005_push_notifications"),
    ]

    operations = [
        migrations.AddField(
            model_name="task",
            name="job_worker",
            field=models.CharField(
                blank=True,
                db_default="",
                default="",
                help_text=(
                    "host:pid of the process that claimed the last job (out-of-process "
                    "workers; kept after the job ends)."
                ),
                max_length=255,
                verbose_name="job worker",
            ),
        ),
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AddIndex(model_name="task", index=index) for index in INDEXES
            ],
            database_operations=[
                migrations.RunPython(indexes_forwards, indexes_backwards, elidable=False)
            ],
        ),
        migrations.RunPython(counts_forwards, counts_backwards, elidable=False),
    ]
