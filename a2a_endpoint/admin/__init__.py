"""Django admin for tasks, an operator's console: the task list (state, owner and tenant
filters, each state's count, never a count of the whole table), a task's page (one timeline
of its history and events, its artifacts, its job, a Cancel task button), and push
notifications (webhook configs and the deliveries owed to them). See docs/admin.md.

Tasks change only through the A2A service, so nothing here edits them; the writes are
"Cancel task" (the page's button, and "Cancel selected tasks" on the list), which go through
the same service call as CancelTask, and "Retry selected dead letters", which goes through
the store as ``a2a_push_retry`` does. A push config's token and credentials are the client's
secrets: every page shows them masked.

One module per concern: ``tasks`` (the task admin), ``counting`` (the list's counts and
paginator), ``filters`` (the list's filters), ``timeline`` and ``task_page`` (what a task's
page shows), ``push`` (webhook configs and deliveries) and ``common`` (what their pages
share). The templates are under ``templates/admin/a2a_endpoint/task/``. Importing this
package registers the admins.
"""

from a2a_endpoint.admin.common import masked, parts_text
from a2a_endpoint.admin.counting import PAGED_ROWS, TaskPaginator
from a2a_endpoint.admin.push import (
    TASK_PAGE_DELIVERIES,
    PushDeliveryAdmin,
    PushNotificationConfigAdmin,
    deliveries_table,
)
from a2a_endpoint.admin.tasks import TaskAdmin, cancel_task
from a2a_endpoint.admin.timeline import timeline_page

__all__ = [
    "PAGED_ROWS",
    "TASK_PAGE_DELIVERIES",
    "PushDeliveryAdmin",
    "PushNotificationConfigAdmin",
    "TaskAdmin",
    "TaskPaginator",
    "cancel_task",
    "deliveries_table",
    "masked",
    "parts_text",
    "timeline_page",
]
