"""Django admin for tasks: read-only views of a task, its history, artifacts and events, and
of push notifications (webhook configs and the deliveries owed to them).

Tasks change only through the A2A service, so nothing here edits them; the writes are the
"Cancel selected tasks" action, which goes through the same service call as CancelTask, and
"Retry selected dead letters", which goes through the store as ``a2a_push_retry`` does. A push
config's token and credentials are the client's secrets: every page shows them masked.

One module per concern: ``tasks`` (the task admin), ``push`` (webhook configs and deliveries)
and ``common`` (what their pages share). Importing this package registers them all.
"""

from a2a_endpoint.admin.common import masked, parts_text
from a2a_endpoint.admin.push import (
    TASK_PAGE_DELIVERIES,
    PushDeliveryAdmin,
    PushNotificationConfigAdmin,
    deliveries_table,
)
from a2a_endpoint.admin.tasks import TaskAdmin

__all__ = [
    "TASK_PAGE_DELIVERIES",
    "PushDeliveryAdmin",
    "PushNotificationConfigAdmin",
    "TaskAdmin",
    "deliveries_table",
    "masked",
    "parts_text",
]
