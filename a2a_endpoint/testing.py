"""Public test helpers for projects using a2a_endpoint: request builders, echo agent, SSE parser."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

import msgspec

from a2a_endpoint.execution import AgentExecutor, RequestContext, TaskUpdater

__all__ = ["EchoAgent", "jsonrpc_request", "parse_sse", "user_message"]


def user_message(text: str, **fields: Any) -> dict[str, Any]:
    """A ProtoJSON user Message with one text part and a fresh messageId."""
    return {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"text": text}],
        **fields,
    }


def jsonrpc_request(method: str, params: Any = None, id: Any = 1) -> dict[str, Any]:
    """A JSON-RPC 2.0 request object (``params`` omitted when None)."""
    request: dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None:
        request["params"] = params
    return request


def parse_sse(chunks: Iterable[bytes]) -> list[dict[str, Any]]:
    """The events of an SSE body: ``{"id": ..., "event": ..., "data": <decoded JSON>}``."""
    events: list[dict[str, Any]] = []
    for block in b"".join(chunks).split(b"\n\n"):
        event: dict[str, Any] = {}
        for line in block.split(b"\n"):
            name, _, value = line.partition(b": ")
            if name == b"data":
                event["data"] = msgspec.json.decode(value)
            elif name in (b"id", b"event"):
                event[name.decode()] = value.decode()
        if "data" in event:
            events.append(event)
    return events


class EchoAgent(AgentExecutor):
    """Completes each task with an artifact holding the user's text."""

    skills = [{"id": "echo", "name": "Echo", "description": "Echoes your text.", "tags": ["demo"]}]

    def execute(self, context: RequestContext, updater: TaskUpdater) -> None:
        updater.start_work()
        updater.add_artifact(context.text or "(no text)", name="echo", last_chunk=True)
        updater.complete()
