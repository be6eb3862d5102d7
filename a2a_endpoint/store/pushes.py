"""Push notifications in the store: the config methods (scoped to the task's owner) and the
sender's side of the outbox (lease a config, take its next owed event, record the try)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from a2a_endpoint import models, types
from a2a_endpoint.conf import app_settings
from a2a_endpoint.errors import TaskNotFoundError
from a2a_endpoint.store.cursor import _make_config_cursor, _read_config_cursor
from a2a_endpoint.store.outbox import (
    config_to_wire,
    lease_owed_configs,
    next_owed_row,
    release_config,
    renew_lease,
    save_push_config,
)

#: ListTaskPushNotificationConfigs: a page when pageSize is 0 (unset), and the largest one.
CONFIG_PAGE_SIZE = 100

_Delivery = models.PushDelivery


@dataclass(frozen=True, slots=True)
class OwedDelivery:
    """The next event a webhook is owed, with what sending it needs (secrets included:
    never log this object)."""

    pk: int
    config_pk: int
    config_id: str
    task_id: str
    seq: int
    attempts: int
    next_attempt_at: datetime
    give_up_at: datetime
    url: str
    token: str
    auth_scheme: str
    auth_credentials: str
    body: bytes | None  # the StreamResponse as JSON; None if its event is gone

    def __repr__(self) -> str:  # no secrets in a traceback's locals or a log line
        return f"OwedDelivery(task={self.task_id}, seq={self.seq}, config={self.config_id!r})"


@dataclass(frozen=True, slots=True)
class Attempt:
    """How a try ended: ``state`` is the delivery's state after it."""

    state: str
    status: int | None = None
    error: str = ""
    retry_at: datetime | None = None


class TaskPushes:
    """The push-notification part of :class:`~a2a_endpoint.store.TaskStore`."""

    _visible: Any  # TaskReads'

    # --- the four config methods (A2A §3.1.7-3.1.10) --------------------------------------

    def create_push_config(
        self, task_id: str, owner: str, tenant: str, config: types.TaskPushNotificationConfig
    ) -> types.TaskPushNotificationConfig:
        """Store ``config`` for the caller's task (any state: a finished task's config is
        kept, and simply has no more events to deliver)."""
        with transaction.atomic():
            task = self._visible(task_id, owner, tenant, lock=True)
            return save_push_config(task, config)

    def get_push_config(
        self, task_id: str, owner: str, tenant: str, config_id: str
    ) -> types.TaskPushNotificationConfig:
        task = self._visible(task_id, owner, tenant)
        row = models.PushNotificationConfig.objects.filter(task=task, config_id=config_id).first()
        if row is None:  # A2A §3.1.8: a missing config is reported as TaskNotFoundError
            raise TaskNotFoundError(
                "Push notification config not found", taskId=task_id, configId=config_id
            )
        return config_to_wire(row, task.tenant)

    def list_push_configs(
        self, task_id: str, owner: str, tenant: str, page_size: int, page_token: str
    ) -> types.ListTaskPushNotificationConfigsResponse:
        """One page of the task's configs, oldest first (keyset: the row id)."""
        task = self._visible(task_id, owner, tenant)
        size = min(page_size or CONFIG_PAGE_SIZE, CONFIG_PAGE_SIZE)
        rows = models.PushNotificationConfig.objects.filter(task=task).order_by("id")
        if page_token:
            rows = rows.filter(id__gt=_read_config_cursor(page_token, task.id))
        page = list(rows[: size + 1])
        more = len(page) > size
        page = page[:size]
        return types.ListTaskPushNotificationConfigsResponse(
            configs=[config_to_wire(row, task.tenant) for row in page],
            next_page_token=_make_config_cursor(task.id, page[-1].id) if more else "",
        )

    def delete_push_config(self, task_id: str, owner: str, tenant: str, config_id: str) -> None:
        """Remove the config and what it is still owed (idempotent: a missing config is
        not an error, a missing task is)."""
        task = self._visible(task_id, owner, tenant)
        models.PushNotificationConfig.objects.filter(task=task, config_id=config_id).delete()

    # --- the sender's side (a2a_endpoint.push.sender) ---------------------------------------

    def lease_owed_push_configs(self, task_id: str, seconds: float) -> list[int]:
        """Lease every config of ``task_id`` that is owed an event and that no sender holds:
        the right to send to it, one sender at a time, so its events go out in order. A lease
        that lapsed (its sender died) is free."""
        now = timezone.now()
        return lease_owed_configs(uuid.UUID(task_id), now + timedelta(seconds=seconds), now)

    def renew_push_lease(self, config_pk: int, seconds: float) -> None:
        renew_lease(config_pk, timezone.now() + timedelta(seconds=seconds))

    def release_push_config(self, config_pk: int, *, unless_owed: bool = False) -> bool:
        """End the sender's lease; ``unless_owed``: not while an event is due to the config
        (one owed after the sender's last look: it must go on). Whether it was released."""
        return release_config(config_pk, timezone.now() if unless_owed else None)

    def next_owed_delivery(self, config_pk: int) -> OwedDelivery | None:
        """The config's pending delivery of the lowest event number (A2A events in order),
        in one statement with its config and its event."""
        row = next_owed_row(config_pk)
        if row is None:
            return None
        pk, task_id, seq, attempts, next_at, give_up, config_id, url, *secrets, payload = row
        token, scheme, credentials = secrets
        return OwedDelivery(
            pk=pk,
            config_pk=config_pk,
            config_id=config_id,
            task_id=task_id,
            seq=seq,
            attempts=attempts,
            next_attempt_at=next_at,
            give_up_at=give_up,
            url=url,
            token=token,
            auth_scheme=scheme,
            auth_credentials=credentials,
            body=payload.encode() if isinstance(payload, str) else None,
        )

    def record_push_attempt(self, delivery_pk: int, attempt: Attempt, *, tried: bool) -> None:
        """Write how a try ended (``tried``: a request was made, so it counts)."""
        changes: dict[str, Any] = {
            "state": attempt.state,
            "last_status": attempt.status,
            "last_error": attempt.error[:500],
        }
        if tried:
            changes["attempts"] = F("attempts") + 1
        if attempt.state == _Delivery.DELIVERED:
            changes["delivered_at"] = timezone.now()
        if attempt.retry_at is not None:
            changes["next_attempt_at"] = attempt.retry_at
        _Delivery.objects.filter(pk=delivery_pk, state=_Delivery.PENDING).update(**changes)

    def push_tasks_overdue(self, seconds: float, limit: int = 500) -> list[str]:
        """Tasks owing an event due ``seconds`` ago that no sender holds: their sender was
        lost (a killed worker, a broker that refused the job). The sweepers send them."""
        now = timezone.now()
        free = Q(config__sending_until__isnull=True) | Q(config__sending_until__lt=now)
        rows = (
            _Delivery.objects.filter(
                free,
                state=_Delivery.PENDING,
                next_attempt_at__lte=now - timedelta(seconds=seconds),
            )
            .order_by("task_id")
            .values_list("task_id", flat=True)
            .distinct()[:limit]
        )
        return [str(task_id) for task_id in rows]

    def retry_dead_push_deliveries(
        self, *, task_ids: list[str] | None = None, delivery_ids: list[int] | None = None
    ) -> list[str]:
        """Dead letters back to pending, with their tries and age counted afresh; the tasks
        they belong to (for the caller to hand to the sender)."""
        rows = _Delivery.objects.filter(state=_Delivery.DEAD)
        if task_ids is not None:
            rows = rows.filter(task_id__in=task_ids)
        if delivery_ids is not None:
            rows = rows.filter(pk__in=delivery_ids)
        now = timezone.now()
        with transaction.atomic():
            tasks = sorted({str(t) for t in rows.values_list("task_id", flat=True)})
            rows.update(
                state=_Delivery.PENDING,
                attempts=0,
                next_attempt_at=now,
                give_up_at=now + timedelta(seconds=float(app_settings.PUSH_MAX_AGE)),
                last_error="",
            )
        return tasks
