"""Builders and deadline-bound waits shared by the service and execution tests."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any

import msgspec
from django.conf import settings
from django.test import override_settings

from a2a_endpoint import models, types
from a2a_endpoint.lifecycle import TaskState
from a2a_endpoint.store import TaskStore
from a2a_endpoint.testing import user_message

DEADLINE = 10.0


def a2a_settings(**overrides: Any) -> override_settings:
    """``A2A_ENDPOINT`` with some keys replaced (the runtime rebuilds itself on the change)."""
    return override_settings(A2A_ENDPOINT={**settings.A2A_ENDPOINT, **overrides})


async def wait_for(
    predicate: Callable[[], bool | Awaitable[bool]], *, timeout: float = DEADLINE
) -> None:
    """Poll ``predicate`` until it holds; fail when ``timeout`` passes first."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        outcome = predicate()
        if inspect.isawaitable(outcome):
            outcome = await outcome
        if outcome:
            return
        assert loop.time() < deadline, "condition not reached before the deadline"
        await asyncio.sleep(0.02)


async def poll_task(rpc: Any, task_id: str, *states: str, **params: Any) -> dict[str, Any]:
    """GetTask until the task is in one of ``states`` (deadline-bound); return it."""
    seen: dict[str, Any] = {}

    async def reached() -> bool:
        seen["task"] = await rpc.result("GetTask", {"id": task_id, **params})
        return seen["task"]["status"]["state"] in states

    await wait_for(reached)
    return seen["task"]


def agent_message(text: str) -> types.Message:
    return types.Message(
        message_id=f"agent-{text}", role=types.Role.AGENT, parts=[types.Part(text=text)]
    )


def stored_task(
    *,
    owner: str = "anonymous",
    tenant: str = "",
    context_id: str = "ctx",
    state: TaskState = TaskState.COMPLETED,
    history: int = 1,
    artifacts: Sequence[str] = (),
    status_timestamp: datetime | None = None,
    store: TaskStore | None = None,
) -> str:
    """A task written straight through the store (no agent): ``history`` messages, then
    ``artifacts`` (one text part each), then ``state``. Returns its id. Synchronous."""
    store = store or TaskStore()
    first = msgspec.convert(user_message("hello 0"), types.Message)
    record = store.create_task(owner=owner, tenant=tenant, context_id=context_id, message=first)
    for n in range(1, history):
        store.update_status(record.id, TaskState.WORKING, agent_message(f"step {n}"))
    for n, text in enumerate(artifacts):
        artifact = types.Artifact(artifact_id=f"a{n}", name=text, parts=[types.Part(text=text)])
        store.add_artifact(record.id, artifact, append=False, last_chunk=True)
    if state is not TaskState.SUBMITTED:
        store.update_status(record.id, state)
    if status_timestamp is not None:
        models.Task.objects.filter(pk=record.id).update(status_timestamp=status_timestamp)
    return record.id
