"""TaskUpdater: how an agent reports status, artifacts and answers; each is stored and published.

Every method has an ``a``-prefixed async twin for ``async def execute`` agents (Django's
naming for async ORM methods). Once the task is terminal (completed, failed, canceled...)
every further update raises :class:`~a2a_endpoint.errors.TaskStateError`.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from a2a_endpoint import types
from a2a_endpoint.execution.context import RequestContext
from a2a_endpoint.lifecycle import TaskState
from a2a_endpoint.store import StoredEvent, TaskStore, in_thread

Content = str | types.Message | Sequence[types.Part]


def _parts(content: str | Sequence[types.Part]) -> list[types.Part]:
    if isinstance(content, str):
        return [types.Part(text=content)]
    return list(content)


class TaskUpdater:
    """Writes an agent's updates to its task (see docs/agents.md)."""

    def __init__(self, store: TaskStore, context: RequestContext) -> None:
        self.store = store
        self.context = context
        self.task_id = context.task_id
        self.context_id = context.context_id
        #: True once this run put the task in a terminal or interrupted state.
        self.settled = False
        #: The last state this run wrote (None: none yet), for the job's finish log line.
        self.state: TaskState | None = None

    @property
    def cancelled(self) -> bool:
        return self.context.cancelled

    def new_message(
        self, content: str | Sequence[types.Part], *, metadata: dict[str, Any] | None = None
    ) -> types.Message:
        """An agent message in this task's context, with a fresh messageId."""
        return types.Message(
            message_id=str(uuid.uuid4()),
            context_id=self.context_id,
            task_id=self.task_id,
            role=types.Role.AGENT,
            parts=_parts(content),
            metadata=metadata,
        )

    def _message(self, content: Content | None) -> types.Message | None:
        if content is None or isinstance(content, types.Message):
            return content
        return self.new_message(content)

    def update_status(self, state: TaskState, content: Content | None = None) -> StoredEvent:
        event = self.store.update_status(self.task_id, state, self._message(content))
        self.settled = state.is_settled
        self.state = state
        return event

    def start_work(self, content: Content | None = None) -> StoredEvent:
        """TASK_STATE_WORKING, optionally with a progress message."""
        return self.update_status(TaskState.WORKING, content)

    def complete(self, content: Content | None = None) -> StoredEvent:
        return self.update_status(TaskState.COMPLETED, content)

    def fail(self, content: Content | None = None) -> StoredEvent:
        return self.update_status(TaskState.FAILED, content)

    def reject(self, content: Content | None = None) -> StoredEvent:
        return self.update_status(TaskState.REJECTED, content)

    def require_input(self, content: Content) -> StoredEvent:
        """Ask the client a question; the task waits in TASK_STATE_INPUT_REQUIRED."""
        return self.update_status(TaskState.INPUT_REQUIRED, content)

    def require_auth(self, content: Content) -> StoredEvent:
        return self.update_status(TaskState.AUTH_REQUIRED, content)

    def reply(self, content: Content) -> StoredEvent:
        """Answer with a single Message instead of a task (A2A §3.1.1 message-only reply)."""
        message = self._message(content)
        assert message is not None
        event = self.store.reply(self.task_id, message)
        self.settled = True
        self.state = TaskState.COMPLETED  # store.reply: a direct answer completes the task
        return event

    def add_artifact(
        self,
        content: str | Sequence[types.Part],
        *,
        artifact_id: str | None = None,
        name: str = "",
        description: str = "",
        append: bool = False,
        last_chunk: bool = False,
        metadata: dict[str, Any] | None = None,
    ) -> str:
        """Add (or, with ``append``, extend) an artifact; returns its artifactId."""
        artifact = types.Artifact(
            artifact_id=artifact_id or str(uuid.uuid4()),
            name=name,
            description=description,
            parts=_parts(content),
            metadata=metadata,
        )
        self.store.add_artifact(self.task_id, artifact, append=append, last_chunk=last_chunk)
        return artifact.artifact_id

    # Async twins: the ORM is synchronous, so each runs in a worker thread.
    async def aupdate_status(self, state: TaskState, content: Content | None = None) -> StoredEvent:
        return await in_thread(self.update_status)(state, content)

    async def astart_work(self, content: Content | None = None) -> StoredEvent:
        return await self.aupdate_status(TaskState.WORKING, content)

    async def acomplete(self, content: Content | None = None) -> StoredEvent:
        return await self.aupdate_status(TaskState.COMPLETED, content)

    async def afail(self, content: Content | None = None) -> StoredEvent:
        return await self.aupdate_status(TaskState.FAILED, content)

    async def areject(self, content: Content | None = None) -> StoredEvent:
        return await self.aupdate_status(TaskState.REJECTED, content)

    async def arequire_input(self, content: Content) -> StoredEvent:
        return await self.aupdate_status(TaskState.INPUT_REQUIRED, content)

    async def arequire_auth(self, content: Content) -> StoredEvent:
        return await self.aupdate_status(TaskState.AUTH_REQUIRED, content)

    async def areply(self, content: Content) -> StoredEvent:
        return await in_thread(self.reply)(content)

    async def aadd_artifact(self, content: str | Sequence[types.Part], **kwargs: Any) -> str:
        return await in_thread(self.add_artifact)(content, **kwargs)
