"""DemoAgent: serves every demo from one endpoint, picking one per task by skill id."""

from __future__ import annotations

from typing import Any, ClassVar

from a2a_endpoint import types
from a2a_endpoint.execution import AgentExecutor, RequestContext, TaskUpdater
from project.agents.demos import EchoDemo, FailDemo, LongJobDemo, MultiTurnDemo, message_text

DEMOS: dict[str, type[AgentExecutor]] = {
    demo.skills[0]["id"]: demo for demo in (EchoDemo, LongJobDemo, MultiTurnDemo, FailDemo)
}
DEFAULT_SKILL = "echo"


def requested_skill(message: types.Message) -> str:
    """The skill id a message asks for: metadata ``skill``, else a leading ``/skill``, else echo.

    An unknown id in metadata is returned as is (the task is then rejected); an unknown
    ``/word`` is ordinary text, so it is echoed.
    """
    skill = (message.metadata or {}).get("skill")
    if isinstance(skill, str) and skill:
        return skill
    command = message_text(message).strip().partition(" ")[0]
    if command.startswith("/") and command[1:] in DEMOS:
        return command[1:]
    return DEFAULT_SKILL


class DemoAgent(AgentExecutor):
    """Routes each task to one demo (echo, long_job, multi_turn, fail) by skill id.

    Clients choose with ``message.metadata["skill"]``, e.g. ``{"skill": "long_job"}``, or
    by starting the text with ``/long_job``; anything else is echoed. The message that
    started the task decides, so the answers of a multi-turn task reach the same demo.
    """

    skills: ClassVar[list[dict[str, Any]]] = [
        skill for demo in DEMOS.values() for skill in demo.skills
    ]

    def execute(self, context: RequestContext, updater: TaskUpdater) -> None:
        first = next(m for m in context.history if m.role is types.Role.USER)
        skill = requested_skill(first)
        demo = DEMOS.get(skill)
        if demo is None:
            known = ", ".join(DEMOS)
            updater.reject(f"Unknown skill {skill!r}. This agent's skills: {known}.")
            return
        demo().execute(context, updater)
