"""PostgreSQL's kept task counts (migration 0003's table and triggers, per caller; migration
0006's, per state): whether a database keeps them, what they say, which are wrong, a recount."""

from __future__ import annotations

from typing import Any

from django.db import connection, transaction

#: PostgreSQL: each caller's number of tasks, kept by the triggers of migration 0003.
TASK_COUNT_TABLE = "a2a_endpoint_task_count"

#: (connection alias, database name) → whether that database keeps the counts; with a
#: third item, the table of the counts by state (migration 0006).
_counts_found: dict[tuple[str, ...], bool] = {}


def task_counts_kept() -> bool:
    """Whether the PostgreSQL database of ``connection`` keeps the task counts.

    Migration 0003 creates the table and its triggers together. A database built without
    migrations (pytest-django's ``--nomigrations``) has neither, and ListTasks counts there.
    Looked up once per database and process; a migration run clears what was found.
    """
    return _table_found(TASK_COUNT_TABLE)


def _table_found(table: str, *key_suffix: str) -> bool:
    """Whether ``table`` exists in the database of ``connection``, looked up once per
    database and process (``_counts_found``, keyed by alias, name and ``key_suffix``)."""
    key = (connection.alias, str(connection.settings_dict["NAME"]), *key_suffix)
    found = _counts_found.get(key)
    if found is None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [table])
            found = _counts_found[key] = bool(cursor.fetchone()[0])
    return found


def forget_task_counts(**kwargs: Any) -> None:
    """Look the task counts up again (a ``post_migrate`` receiver: apps.py)."""
    _counts_found.clear()


#: Each caller whose kept count differs from its number of tasks: (owner, tenant, kept,
#: counted). One statement: both sides are read in one snapshot.
_WRONG_COUNTS_SQL = f"""
    SELECT owner, tenant, COALESCE(k.tasks, 0), COALESCE(c.tasks, 0)
    FROM (SELECT owner, tenant, SUM(tasks)::bigint AS tasks FROM {TASK_COUNT_TABLE}
          GROUP BY owner, tenant) k
    FULL JOIN (SELECT owner, tenant, COUNT(*) AS tasks FROM a2a_endpoint_task
               GROUP BY owner, tenant) c USING (owner, tenant)
    WHERE COALESCE(k.tasks, 0) <> COALESCE(c.tasks, 0)
    ORDER BY owner, tenant
"""


def wrong_task_counts() -> list[tuple[str, str, int, int]]:
    """PostgreSQL: each caller whose kept task count is wrong, as (owner, tenant, kept,
    counted). Triggers keep the counts, so this is empty unless they were bypassed (a
    replica applying changes with ``session_replication_role = replica``, triggers disabled
    by hand, a restore of one table without the other)."""
    with connection.cursor() as cursor:
        cursor.execute(_WRONG_COUNTS_SQL)
        return [(owner, tenant, int(kept), counted) for owner, tenant, kept, counted in cursor]


def recount_tasks() -> list[tuple[str, str, int, int]]:
    """PostgreSQL: count every caller's tasks again and keep those counts (one row each).

    Writers of tasks wait while it runs (about 0.4 s a million tasks), readers do not.
    Returns what ``wrong_task_counts`` found, in the same transaction.
    """
    table = connection.ops.quote_name(TASK_COUNT_TABLE)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("LOCK TABLE a2a_endpoint_task IN SHARE ROW EXCLUSIVE MODE")
        wrong = wrong_task_counts()
        cursor.execute(f"DELETE FROM {table}")
        cursor.execute(
            f"INSERT INTO {table} (owner, tenant, slot, tasks) "
            "SELECT owner, tenant, 0, COUNT(*) FROM a2a_endpoint_task GROUP BY owner, tenant"
        )
        # The counts by state too (migration 0006), under the same lock: whatever bypassed
        # the triggers of one bypassed the other's.
        if task_state_counts_kept():
            states = connection.ops.quote_name(TASK_STATE_COUNT_TABLE)
            cursor.execute(f"DELETE FROM {states}")
            cursor.execute(
                f"INSERT INTO {states} (state, slot, tasks) "
                "SELECT state, 0, COUNT(*) FROM a2a_endpoint_task GROUP BY state"
            )
    return wrong


#: PostgreSQL: the number of tasks in each state, kept by the triggers of migration 0006
#: (the admin's task list shows them, and pages by them instead of counting).
TASK_STATE_COUNT_TABLE = "a2a_endpoint_task_state_count"


def task_state_counts_kept() -> bool:
    """Whether the PostgreSQL database of ``connection`` keeps the counts by state
    (migration 0006); looked up once per database and process, as ``task_counts_kept``."""
    return _table_found(TASK_STATE_COUNT_TABLE, TASK_STATE_COUNT_TABLE)


def _kept(sql: str, params: list[Any]) -> list[tuple[Any, ...]] | None:
    """Rows of ``sql`` over the kept counts; None where they are not kept (not PostgreSQL,
    or a database built without migrations)."""
    if connection.vendor != "postgresql" or not task_counts_kept():
        return None
    if TASK_STATE_COUNT_TABLE in sql and not task_state_counts_kept():
        return None
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def kept_state_counts() -> dict[str, int] | None:
    """PostgreSQL: the number of tasks in each state (states without tasks left out), read
    from at most 16 rows a state; None where the counts are not kept."""
    rows = _kept(
        f"SELECT state, SUM(tasks) FROM {TASK_STATE_COUNT_TABLE} GROUP BY state "
        "HAVING SUM(tasks) <> 0",
        [],
    )
    return None if rows is None else {state: int(total) for state, total in rows}


def kept_caller_count(owner: str, tenant: str | None = None) -> int | None:
    """PostgreSQL: the number of tasks of ``owner`` (in ``tenant``, or in all its tenants
    when None), from the counts kept per caller; None where they are not kept."""
    where, params = "owner = %s", [owner]
    if tenant is not None:
        where, params = "owner = %s AND tenant = %s", [owner, tenant]
    rows = _kept(f"SELECT COALESCE(SUM(tasks), 0) FROM {TASK_COUNT_TABLE} WHERE {where}", params)
    return None if rows is None else int(rows[0][0])


def kept_owners(limit: int) -> list[str] | None:
    """PostgreSQL: the first ``limit`` owners with tasks, by name, from the counts kept per
    caller (the table's key is ordered by owner: no scan of the tasks); None where they are
    not kept."""
    rows = _kept(
        f"SELECT owner FROM {TASK_COUNT_TABLE} GROUP BY owner HAVING SUM(tasks) > 0 "
        "ORDER BY owner LIMIT %s",
        [limit],
    )
    return None if rows is None else [owner for (owner,) in rows]
