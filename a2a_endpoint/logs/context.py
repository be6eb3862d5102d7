"""The log context: request id, method, task id, caller, job id and attempt, in contextvars.

A field set here shows on every log record made in the same context (asyncio task, thread,
``sync_to_async`` call), whatever logger makes it. :func:`scope` sets fields for a block and
puts every field back on exit, so nothing set while serving one request reaches the next.
"""

from __future__ import annotations

import contextlib
import contextvars
import re
import uuid
from collections.abc import Iterator
from typing import Any

#: The context fields, in the order a text line shows them.
FIELDS = (
    "request_id",
    "method",
    "task_id",
    "caller",
    "tenant",
    "job_id",
    "attempt",
    "origin_request_id",
)

VARS: dict[str, contextvars.ContextVar[Any]] = {
    name: contextvars.ContextVar(f"a2a_endpoint.logs.{name}", default=None) for name in FIELDS
}
# A client's X-Request-ID is used when it is this (the ids of proxies and tracers: UUIDs,
# hex, "Root=1-…"); anything else could forge or flood log lines, and is replaced.
_SANE_ID = re.compile(r"[A-Za-z0-9._:+=@/-]{1,128}")
# Task ids named by a client's params: printable ASCII without spaces, bounded.
_SANE_TASK_ID = re.compile(r"[\x21-\x7e]{1,128}")


def current() -> dict[str, Any]:
    """The context fields set now (None ones left out)."""
    return {name: value for name, var in VARS.items() if (value := var.get()) is not None}


def _checked(fields: dict[str, Any]) -> dict[str, Any]:
    unknown = set(fields) - set(FIELDS)
    if unknown:
        raise TypeError(f"Unknown log context fields: {', '.join(sorted(unknown))}")
    return fields


@contextlib.contextmanager
def scope(*, fresh: bool = False, **fields: Any) -> Iterator[None]:
    """Set ``fields`` for the block (``fresh``: clear the others first).

    On exit every field is what it was before the block, also the fields that code inside
    set with :func:`update`. Enter and leave it in one context (not across a ``yield``
    of a generator that another task may close).
    """
    _checked(fields)
    tokens = [
        (var, var.set(fields.get(name) if fresh or name in fields else var.get()))
        for name, var in VARS.items()
    ]
    try:
        yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)


def update(**fields: Any) -> None:
    """Set ``fields`` until the enclosing :func:`scope` ends (the caller, once known)."""
    for name, value in _checked(fields).items():
        VARS[name].set(value)


def job_context(**fields: Any) -> contextvars.Context:
    """A copy of the current context for a job started from here: its log fields are
    ``fields`` only, plus ``origin_request_id``, the request that started it (if any).

    Other libraries' context variables (a tracer's span) are kept; the request's log fields
    are not, so the job's lines never pass for the request's.
    """
    fields = {"origin_request_id": VARS["request_id"].get(), **_checked(fields)}
    context = contextvars.copy_context()
    for name, var in VARS.items():
        context.run(var.set, fields.get(name))
    return context


def new_id() -> str:
    """A new id (uuid4 hex): for a request without a sane one, an inline job."""
    return uuid.uuid4().hex


def incoming_request_id(value: str | None) -> str:
    """A client's (or proxy's) request id when it is sane, else a new one (uuid4 hex)."""
    if value and _SANE_ID.fullmatch(value):
        return value
    return new_id()


def error_id() -> str:
    """The id an internal error reports (``google.rpc.RequestInfo``): the request's, so a
    client's report finds the log line with the traceback; a new one outside a request."""
    return VARS["request_id"].get() or new_id()


def _task_id_of(params: Any) -> str | None:
    if not isinstance(params, dict):
        return None
    message = params.get("message")
    candidates = (
        params.get("taskId"),  # before ``id``: the push config methods' ``id`` is the config's
        message.get("taskId") if isinstance(message, dict) else None,
        params.get("id"),  # GetTask, CancelTask, SubscribeToTask: the task's own id
    )
    for value in candidates:
        if isinstance(value, str) and _SANE_TASK_ID.fullmatch(value):
            return value
    return None


def call_fields(method: str, params: Any) -> dict[str, Any]:
    """The fields of one JSON-RPC call: its method, and the task its params name (or None:
    a call that names none must not keep the previous call's)."""
    return {"method": method, "task_id": _task_id_of(params)}


def clean(value: Any, limit: int = 64) -> str:
    """Client text fit for a log line: printable ASCII, at most ``limit`` characters."""
    text = value if isinstance(value, str) else repr(value)
    printable = "".join(c if " " <= c <= "~" else "?" for c in text[:limit])
    return printable + "..." if len(text) > limit else printable
