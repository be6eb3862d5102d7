"""The push outbox's writes that go with a task's own: a config saved with the message that
names it, and one delivery row per config of the task for each event, in the event's
transaction (a transactional outbox: an event is owed to every webhook once it commits)."""

from __future__ import annotations

import uuid
from datetime import timedelta

from django.db import connection
from django.utils import timezone

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
    """Store ``config`` for ``task`` (locked by the caller): a new id when it has none, and
    the config of the same id replaced (its owed deliveries go to the new URL)."""
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
    if not app_settings.PUSH_NOTIFICATIONS:
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
