"""What the database can hold, checked at the edge: text without U+0000, and identifiers no
longer than the columns they are stored in or compared with.

PostgreSQL refuses both (``text`` and ``jsonb`` cannot hold U+0000; ``varchar(255)`` no more
than 255 characters), and its refusal would reach the client as -32603 from deep inside a
write. The binding checks a request's params here first and answers -32602 naming the field.
A NUL is refused rather than stored altered: the client would read back another string than
it sent. Binary content travels in ``raw`` parts (base64) and never needs one.
"""

from __future__ import annotations

import functools
from typing import Any

from django.db.models import Model

from a2a_endpoint import models

NUL = "\x00"

#: ProtoJSON paths of request strings that have a column of their own (stored, or compared
#: with one), and the model field whose ``max_length`` bounds them.
IDENTIFIER_COLUMNS: dict[tuple[str, ...], tuple[type[Model], str]] = {
    ("tenant",): (models.Task, "tenant"),
    ("contextId",): (models.Task, "context_id"),  # ListTasks' filter
    ("message", "messageId"): (models.Message, "message_id"),
    ("message", "contextId"): (models.Task, "context_id"),
}


@functools.cache
def column_length(model: type[Model], field: str) -> int:
    length = model._meta.get_field(field).max_length
    assert length is not None, f"{model.__name__}.{field} has no max_length"
    return length


def violation(params: Any) -> tuple[str, str] | None:
    """The first field of ``params`` (decoded JSON) the database could not hold, as
    (ProtoJSON path, what is wrong), or None."""
    for path, (model, field) in IDENTIFIER_COLUMNS.items():
        value = _at(params, path)
        if isinstance(value, str) and len(value) > (limit := column_length(model, field)):
            return ".".join(path), f"At most {limit} characters ({len(value)} given)"
    where = nul_path(params)
    if where is not None:
        return where, "Text cannot contain U+0000 (NUL); send binary content in a raw part"
    return None


def _at(params: Any, path: tuple[str, ...]) -> Any:
    for name in path:
        if not isinstance(params, dict):
            return None
        params = params.get(name)
    return params


def nul_path(value: Any) -> str | None:
    """The path of the first string or object key in ``value`` holding U+0000, or None.

    Iterative (a deep value cannot exhaust the stack); the walk is linear in the size of a
    body that MAX_REQUEST_BYTES already bounds.
    """
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        node, path = stack.pop()
        if isinstance(node, str):
            if NUL in node:
                return path
        elif isinstance(node, dict):
            for key, child in node.items():
                child_path = f"{path}.{key}" if path else str(key)
                if NUL in key:
                    return child_path
                stack.append((child, child_path))
        elif isinstance(node, list):
            stack.extend((child, f"{path}[{index}]") for index, child in enumerate(node))
    return None
