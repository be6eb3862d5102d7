"""What an agent is given: the incoming message, the task's history, and the cancel signal."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from a2a_endpoint import types


@dataclass(frozen=True)
class RequestContext:
    """The request an agent is working on (read-only)."""

    task_id: str
    context_id: str
    message: types.Message
    history: list[types.Message]
    metadata: dict[str, Any] | None = None
    owner: str = ""
    tenant: str = ""
    cancel_event: threading.Event = field(default_factory=threading.Event, repr=False)
    #: Which run of this message's job this is: 1, or 2 and up when the worker running an
    #: earlier one was lost and the job is retried (``LOST_JOB_POLICY = "retry"``). What
    #: the lost run wrote stays in the task, marked superseded (see docs/agents.md).
    attempt: int = 1

    @property
    def is_retry(self) -> bool:
        """True when an earlier run of this message was lost with its worker."""
        return self.attempt > 1

    @property
    def cancelled(self) -> bool:
        """True once CancelTask was called; stop soon (later updates are refused anyway)."""
        return self.cancel_event.is_set()

    @property
    def text(self) -> str:
        """The text parts of the incoming message, joined by newlines."""
        return "\n".join(part.text for part in self.message.parts if part.text is not None)

    @property
    def is_continuation(self) -> bool:
        """True when the message answers the agent's own input-required question."""
        return any(message.role is types.Role.AGENT for message in self.history)
