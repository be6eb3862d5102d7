"""What every operation does first: find the caller's tenant, run its ORM work off the loop."""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async

from a2a_endpoint import types
from a2a_endpoint.errors import TaskNotFoundError


def _db(func: Any) -> Any:
    """ORM work of a request/response call, off the event loop.

    Thread-sensitive, as Django runs sync code for a request: in the caller's thread when
    there is one (so it shares its connection and transaction, e.g. the admin's action).
    Streams use ``in_thread`` instead: they must not hold a thread while they are open.
    """
    return sync_to_async(func, thread_sensitive=True)


def _tenant(params: Any, caller: types.Caller) -> str:
    """The tenant a request works in: the one it names, else the caller's own (A2A §12).

    A tenant the caller was not granted is answered like a missing task, whatever the
    method: nothing tells a caller that a tenant, or a task in it, exists (A2A §13.1).
    """
    tenant = params.tenant or caller.tenant
    if not caller.may_use(tenant):
        raise TaskNotFoundError()
    return tenant
