"""The push outbox's writes that go with a task's own: a config saved with the message that
names it, and one delivery row per config of the task for each event, in the event's
transaction (a transactional outbox: an event is owed to every webhook once it commits)."""

from __future__ import annotations

import functools
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import connection
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from a2a_endpoint import models, types
from a2a_endpoint.conf import app_settings


def config_to_wire(
    row: models.PushNotificationConfig, tenant: str
) -> types.TaskPushNotificationConfig:
    authentication = None
    if row.auth_scheme:
        authentication = types.AuthenticationInfo(
            scheme=row.auth_scheme, credentials=row.auth_credentials
        )
    return types.TaskPushNotificationConfig(
        tenant=tenant,
        id=row.config_id,
        task_id=str(row.task_id),
        url=row.url,
        token=row.token,
        authentication=authentication,
    )


def save_push_config(
    task: models.Task, config: types.TaskPushNotificationConfig
) -> types.TaskPushNotificationConfig:
    """Store ``config`` for ``task`` (locked by the caller, or being inserted): a new id when
    it has none, and the config of the same id replaced (its owed deliveries go to the new
    URL). Marks the task ``push_configured``: its events are owed to its configs from now."""
    if not task.push_configured:
        task.push_configured = True
        if not task._state.adding:
            models.Task.objects.filter(pk=task.pk).update(push_configured=True)
    authentication = config.authentication
    row, _created = models.PushNotificationConfig.objects.update_or_create(
        task=task,
        config_id=config.id or str(uuid.uuid4()),
        defaults={
            "url": config.url,
            "token": config.token,
            "auth_scheme": authentication.scheme if authentication else "",
            "auth_credentials": authentication.credentials if authentication else "",
        },
    )
    return config_to_wire(row, task.tenant)


def _insert_sql() -> str:
    delivery = models.PushDelivery._meta.db_table
    config = models.PushNotificationConfig._meta.db_table
    return (
        f"INSERT INTO {delivery} (config_id, task_id, seq, state, attempts, next_attempt_at,"
        " give_up_at, last_error, created_at)"
        f" SELECT c.id, c.task_id, %s, %s, 0, %s, %s, '', %s FROM {config} c"
        " WHERE c.task_id = %s"
    )


def owe_deliveries(task: models.Task) -> int:
    """Owe event ``task.seq`` to each webhook of the task; how many rows that wrote.

    One statement whatever the number of configs, and a cheap one (an index lookup) for
    the many tasks that have none.
    """
    if not task.push_configured or not app_settings.PUSH_NOTIFICATIONS:
        return 0
    now = timezone.now()
    give_up = now + timedelta(seconds=float(app_settings.PUSH_MAX_AGE))
    # Raw SQL: the values as the ORM would send them (SQLite keeps uuids and times as text).
    at = connection.ops.adapt_datetimefield_value
    task_pk = models.Task._meta.pk.get_db_prep_value(task.pk, connection)  # type: ignore[union-attr]
    with connection.cursor() as cursor:
        cursor.execute(
            _insert_sql(),
            [task.seq, models.PushDelivery.PENDING, at(now), at(give_up), at(now), task_pk],
        )
        return max(cursor.rowcount, 0)


# --- the sender's statements (store.pushes): written out, as a delivery is a handful of them
# and the ORM's building of each cost more than running it (bench.push).


def _tables() -> tuple[str, str, str]:
    quote = connection.ops.quote_name
    return (
        quote(models.PushDelivery._meta.db_table),
        quote(models.PushNotificationConfig._meta.db_table),
        quote(models.TaskEvent._meta.db_table),
    )


@functools.cache
def _next_sql(vendor: str) -> str:
    """The config's pending delivery of the lowest event number, with its config and its
    event's payload as JSON text (sent as it is). Parameters: state, config pk."""
    delivery, config, event = _tables()
    payload = "e.payload::text" if vendor == "postgresql" else "e.payload"
    return (
        f"SELECT d.id, d.task_id, d.seq, d.attempts, d.next_attempt_at, d.give_up_at,"
        f" c.config_id, c.url, c.token, c.auth_scheme, c.auth_credentials, {payload}"
        f" FROM {delivery} d JOIN {config} c ON c.id = d.config_id"
        f" LEFT JOIN {event} e ON e.task_id = d.task_id AND e.seq = d.seq"
        " WHERE d.state = %s AND d.config_id = %s ORDER BY d.seq LIMIT 1"
    )


def next_owed_row(config_pk: int) -> tuple[Any, ...] | None:
    """The row of ``_next_sql`` with its uuid and times as Python values, or None."""
    with connection.cursor() as cursor:
        cursor.execute(_next_sql(connection.vendor), [models.PushDelivery.PENDING, config_pk])
        row = cursor.fetchone()
    if row is None:
        return None
    pk, task_id, seq, attempts, next_at, give_up, *rest = row
    return (pk, str(_uuid(task_id)), seq, attempts, _aware(next_at), _aware(give_up), *rest)


def lease_owed_configs(task_pk: uuid.UUID, until: datetime, now: datetime) -> list[int]:
    """Lease every free config of the task that is owed an event; their pks. One statement
    (where a look for owed configs, then a lease per config, took one each)."""
    delivery, config, _event = _tables()
    at = connection.ops.adapt_datetimefield_value
    task = models.Task._meta.pk.get_db_prep_value(task_pk, connection)  # type: ignore[union-attr]
    sql = (
        f"UPDATE {config} SET sending_until = %s WHERE task_id = %s"
        " AND (sending_until IS NULL OR sending_until < %s)"
        f" AND EXISTS (SELECT 1 FROM {delivery} d WHERE d.config_id = {config}.id"
        " AND d.state = %s) RETURNING id"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [at(until), task, at(now), models.PushDelivery.PENDING])
        return sorted(row[0] for row in cursor.fetchall())


def release_config(config_pk: int, idle_at: datetime | None) -> bool:
    """End the config's sender lease; with ``idle_at``, only if no delivery is due by then
    (one owed since the sender's last look keeps it: the sender goes on). Released or not."""
    delivery, config, _event = _tables()
    sql = f"UPDATE {config} SET sending_until = NULL WHERE id = %s"
    params: list[Any] = [config_pk]
    if idle_at is not None:
        sql += (
            f" AND NOT EXISTS (SELECT 1 FROM {delivery} d WHERE d.config_id = %s"
            " AND d.state = %s AND d.next_attempt_at <= %s)"
        )
        at = connection.ops.adapt_datetimefield_value
        params += [config_pk, models.PushDelivery.PENDING, at(idle_at)]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount == 1


def renew_lease(config_pk: int, until: datetime) -> None:
    """Move the config's sender lease (held by the caller) on to ``until``."""
    _delivery, config, _event = _tables()
    at = connection.ops.adapt_datetimefield_value
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {config} SET sending_until = %s WHERE id = %s", [at(until), config_pk]
        )


def _uuid(value: Any) -> uuid.UUID:
    return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))


def _aware(value: Any) -> datetime:
    """A datetime column read by a raw cursor: SQLite gives naive UTC text."""
    if isinstance(value, str):
        value = parse_datetime(value)
    assert isinstance(value, datetime)
    return value if timezone.is_aware(value) else value.replace(tzinfo=UTC)
