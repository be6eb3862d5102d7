"""PostgreSQL: each caller's number of tasks, kept by triggers, for ListTasks' ``totalSize``.

``totalSize`` is the number of the caller's tasks that match, before paging. Counted with
``COUNT(*)`` it costs a scan of every matching index entry: 76 ms at 750,000 tasks against
5 ms at 10,000. Without filters it is now a sum over at most ``SLOTS`` rows of
``a2a_endpoint_task_count``, which triggers keep in step with ``a2a_endpoint_task`` in the
same transaction as each change (so a statement reading both sees one snapshot):

- INSERT and DELETE: one statement-level trigger each, grouping the statement's rows by
  caller (a bulk load of a million rows is one upsert per caller);
- UPDATE of ``owner`` or ``tenant`` (never done by the app): a row-level trigger, called only
  when one of them changes;
- TRUNCATE: every count goes.

A caller's count is spread over ``SLOTS`` rows picked by the backend's process id, so
concurrent SendMessages of one caller (every anonymous client is one caller) on different
connections update different rows instead of queuing on one row lock until they commit. A
statement touching several callers upserts their rows in one sorted statement.

Other databases (SQLite) get nothing here: their ListTasks counts (store/reads.py). So does a
test database built without migrations, which store/counts.py detects. ``manage.py
a2a_recount_tasks`` checks and rebuilds the counts (after triggers were bypassed).

A later migration that changes the type of ``owner`` or ``tenant`` must drop the UPDATE
trigger first and create it again after: PostgreSQL refuses to alter a column that a
trigger's ``WHEN`` names, which keeps the trigger free for every other UPDATE.
"""

from django.db import migrations

TABLE = "a2a_endpoint_task_count"
SLOTS = 16

#: One statement each (a function's body holds semicolons). The lock makes writers wait until
#: this migration commits, so the counts start from the rows as they are; reads go on.
FORWARDS = [
    "LOCK TABLE a2a_endpoint_task IN SHARE ROW EXCLUSIVE MODE",
    f"""CREATE TABLE {TABLE} (
        owner varchar(255) NOT NULL,
        tenant varchar(255) NOT NULL,
        slot smallint NOT NULL,
        tasks bigint NOT NULL,
        PRIMARY KEY (owner, tenant, slot)
    )""",
    # INSERT and DELETE: the statement's rows (its transition table), counted per caller.
    *(
        f"""CREATE FUNCTION {TABLE}_{name}() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO {TABLE} AS c (owner, tenant, slot, tasks)
        SELECT owner, tenant, mod(pg_backend_pid(), {SLOTS}), {sign}count(*) FROM {name}
        GROUP BY owner, tenant ORDER BY owner, tenant
        ON CONFLICT (owner, tenant, slot) DO UPDATE SET tasks = c.tasks + excluded.tasks;
        RETURN NULL;
    END $$"""
        for name, sign in (("added", ""), ("removed", "-"))
    ),
    f"""CREATE FUNCTION {TABLE}_moved() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO {TABLE} AS c (owner, tenant, slot, tasks)
        SELECT owner, tenant, mod(pg_backend_pid(), {SLOTS}), tasks
        FROM (VALUES (OLD.owner, OLD.tenant, -1), (NEW.owner, NEW.tenant, 1))
            AS moved (owner, tenant, tasks)
        ORDER BY owner, tenant
        ON CONFLICT (owner, tenant, slot) DO UPDATE SET tasks = c.tasks + excluded.tasks;
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
    f"""CREATE TRIGGER {TABLE}_update AFTER UPDATE OF owner, tenant ON a2a_endpoint_task
        FOR EACH ROW
        WHEN (OLD.owner IS DISTINCT FROM NEW.owner OR OLD.tenant IS DISTINCT FROM NEW.tenant)
        EXECUTE FUNCTION {TABLE}_moved()""",
    f"""CREATE TRIGGER {TABLE}_truncate AFTER TRUNCATE ON a2a_endpoint_task
        FOR EACH STATEMENT EXECUTE FUNCTION {TABLE}_cleared()""",
    f"""INSERT INTO {TABLE} (owner, tenant, slot, tasks)
        SELECT owner, tenant, 0, count(*) FROM a2a_endpoint_task GROUP BY owner, tenant""",
]

BACKWARDS = [
    *(
        f"DROP TRIGGER {TABLE}_{event} ON a2a_endpoint_task"
        for event in ("insert", "delete", "update", "truncate")
    ),
    *(f"DROP FUNCTION {TABLE}_{name}()" for name in ("added", "removed", "moved", "cleared")),
    f"DROP TABLE {TABLE}",
]


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for statement in FORWARDS:
            schema_editor.execute(statement, params=None)


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for statement in BACKWARDS:
            schema_editor.execute(statement, params=None)


class Migration(migrations.Migration):

    dependencies = [
        ('a2a_endpoint', '0002_job_leases'),
    ]

    operations = [
        migrations.RunPython(forwards, backwards, elidable=False),
    ]
