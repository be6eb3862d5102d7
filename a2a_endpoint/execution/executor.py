"""The agent contract: one class whose ``execute`` (sync or async) reports through an updater."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from a2a_endpoint.execution.context import RequestContext
    from a2a_endpoint.execution.updater import TaskUpdater


class AgentError(Exception):
    """Raise it to fail the task with this message shown to the client as the status message.

    Any other exception fails the task too, with a generic message: its text may hold
    internals the client must not see, so it only goes to the log.
    """


class AgentExecutor(ABC):
    """Subclass it and name the class in ``A2A_ENDPOINT["AGENT"]``.

    ``execute`` may be a plain method (it runs in a worker thread and uses the updater's
    plain methods) or ``async def`` (it runs on an event loop and awaits the updater's
    ``a``-prefixed methods). See docs/agents.md.
    """

    #: Skills advertised in the agent card: AgentSkill objects in ProtoJSON (camelCase keys).
    skills: ClassVar[list[dict[str, Any]]] = []

    @abstractmethod
    def execute(self, context: RequestContext, updater: TaskUpdater) -> Any:
        """Do the work for ``context.message``; report progress and results via ``updater``."""
