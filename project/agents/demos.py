"""Four small demo agents, one per skill: copy one as the start of your own agent.

Each is a synchronous ``AgentExecutor`` (it runs in a worker thread, so blocking calls are
fine) and works on its own as ``A2A_ENDPOINT["AGENT"]``; ``DemoAgent`` serves them all.
"""

from __future__ import annotations

import os
import uuid
from typing import Any, ClassVar

from a2a_endpoint import types
from a2a_endpoint.execution import AgentError, AgentExecutor, RequestContext, TaskUpdater


def message_text(message: types.Message) -> str:
    """The text parts of a message, joined by newlines."""
    return "\n".join(part.text for part in message.parts if part.text is not None)


def without_command(text: str, skill_id: str) -> str:
    """``text`` without a leading ``/skill_id`` (how clients without metadata pick a demo)."""
    command, _, rest = text.strip().partition(" ")
    return rest.strip() if command == f"/{skill_id}" else text


class EchoDemo(AgentExecutor):
    """Completes the task with an artifact holding the user's text."""

    skill: ClassVar[dict[str, Any]] = {
        "id": "echo",
        "name": "Echo",
        "description": "Completes the task with an artifact holding your text.",
        "tags": ["demo", "artifact"],
        "examples": ["hello", "/echo hello"],
    }
    skills = [skill]

    def execute(self, context: RequestContext, updater: TaskUpdater) -> None:
        text = without_command(context.text, "echo") or "(no text)"
        updater.start_work()
        updater.add_artifact(text, name="echo", last_chunk=True)
        updater.complete()


class LongJobDemo(AgentExecutor):
    """Works for about ten seconds: progress updates, a report built in chunks, cancellation.

    Each step is a TASK_STATE_WORKING status update whose message reads "Step 3/10 (30%)" and
    carries ``{"progress": 30}`` in its metadata, and adds one chunk to the ``report``
    artifact (``append``; ``lastChunk`` on the last one). CancelTask stops it at once.
    """

    skill: ClassVar[dict[str, Any]] = {
        "id": "long_job",
        "name": "Long job",
        "description": (
            "Works for about ten seconds, reporting progress in status updates and building a "
            "'report' artifact in chunks. Cancel it with CancelTask."
        ),
        "tags": ["demo", "progress", "cancel"],
        "examples": ["/long_job"],
    }
    skills = [skill]

    steps: ClassVar[int] = 10
    #: Seconds per step: DEMO_LONG_JOB_STEP_SECONDS in the environment, or set the attribute.
    step_seconds: ClassVar[float] = float(os.environ.get("DEMO_LONG_JOB_STEP_SECONDS", "1"))

    def execute(self, context: RequestContext, updater: TaskUpdater) -> None:
        updater.start_work(f"Starting a job of {self.steps} steps.")
        report_id = str(uuid.uuid4())
        for step in range(1, self.steps + 1):
            # Wait on the cancel signal, not time.sleep: CancelTask wakes it at once. The task
            # is CANCELED already, so just return (any further update would be refused).
            if context.cancel_event.wait(self.step_seconds):
                return
            updater.add_artifact(
                f"Step {step}: done.\n",
                artifact_id=report_id,
                name="report",
                append=step > 1,
                last_chunk=step == self.steps,
            )
            percent = step * 100 // self.steps
            progress = updater.new_message(
                f"Step {step}/{self.steps} ({percent}%)", metadata={"progress": percent}
            )
            updater.start_work(progress)
        updater.complete("The report is ready.")


class MultiTurnDemo(AgentExecutor):
    """Asks two questions (TASK_STATE_INPUT_REQUIRED twice), then greets with the answers.

    The client answers by sending a message with the task's ``taskId``; every turn runs
    ``execute`` again with the whole history, so the answers are read from there.
    """

    skill: ClassVar[dict[str, Any]] = {
        "id": "multi_turn",
        "name": "Multi-turn",
        "description": (
            "Asks for your name, then your favourite colour (input-required twice; answer with "
            "the task's taskId), then greets you."
        ),
        "tags": ["demo", "input-required"],
        "examples": ["/multi_turn"],
    }
    skills = [skill]

    def execute(self, context: RequestContext, updater: TaskUpdater) -> None:
        if not context.is_continuation:
            updater.require_input("What is your name?")
            return
        # The first user message started the task; the ones after it are the answers.
        user_messages = [m for m in context.history if m.role is types.Role.USER]
        answers = [message_text(m).strip() for m in user_messages[1:]]
        name = answers[0] or "stranger"
        if len(answers) == 1:
            updater.require_input(f"Nice to meet you, {name}. What is your favourite colour?")
        else:
            colour = answers[1] or "No colour"
            updater.complete(f"Hello {name}! {colour} is a fine colour.")


class FailDemo(AgentExecutor):
    """Always fails: an ``AgentError`` becomes TASK_STATE_FAILED with its text for the client.

    Any other exception fails the task too, but the client only sees a generic message.
    """

    skill: ClassVar[dict[str, Any]] = {
        "id": "fail",
        "name": "Fail",
        "description": "Always fails, to show how a client sees an agent error.",
        "tags": ["demo", "error"],
        "examples": ["/fail"],
    }
    skills = [skill]

    def execute(self, context: RequestContext, updater: TaskUpdater) -> None:
        updater.start_work("Trying...")
        raise AgentError("This demo always fails: this is how an agent reports an error.")
