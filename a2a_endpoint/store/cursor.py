"""Page tokens: opaque, signed keyset cursors (ListTasks: status timestamp and task id;
ListTaskPushNotificationConfigs: the task and the last config row)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from django.core import signing

from a2a_endpoint.errors import (
    InvalidParamsError,
)

_CURSOR_SALT = "a2a_endpoint.list_tasks.cursor"


def _make_cursor(status_timestamp: datetime, task_id: uuid.UUID) -> str:
    """An opaque, signed keyset cursor: the sort key of the last task on the page."""
    return signing.dumps(
        [status_timestamp.astimezone(UTC).isoformat(), str(task_id)], salt=_CURSOR_SALT
    )


def _read_cursor(token: str) -> tuple[datetime, uuid.UUID]:
    try:
        timestamp, task_id = signing.loads(token, salt=_CURSOR_SALT)
        return datetime.fromisoformat(timestamp), uuid.UUID(task_id)
    except (signing.BadSignature, ValueError, TypeError):
        raise InvalidParamsError(
            "Invalid page token", field="pageToken", description="The page token is not valid"
        ) from None


_CONFIG_CURSOR_SALT = "a2a_endpoint.list_push_configs.cursor"


def _make_config_cursor(task_id: uuid.UUID, row_id: int) -> str:
    """A ListTaskPushNotificationConfigs page token: the last row of the page, for its task."""
    return signing.dumps([str(task_id), row_id], salt=_CONFIG_CURSOR_SALT)


def _read_config_cursor(token: str, task_id: uuid.UUID) -> int:
    try:
        token_task, row_id = signing.loads(token, salt=_CONFIG_CURSOR_SALT)
        if uuid.UUID(token_task) != task_id or not isinstance(row_id, int):
            raise ValueError(token)
        return row_id
    except (signing.BadSignature, ValueError, TypeError):
        raise InvalidParamsError(
            "Invalid page token", field="pageToken", description="The page token is not valid"
        ) from None
