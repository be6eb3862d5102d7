"""An agent for the official A2A conformance kit (a2a-tck), which is run by hand.

The kit tells the agent what to do through the ``messageId`` prefix of the message it sends
(its ``scenarios/*.feature``): ``A2A_AGENT=project.agents.tck.TckAgent make run``, then
``run_tck.py --sut-host http://127.0.0.1:8000/a2a/ --transport jsonrpc`` from a checkout of
the kit. See docs/deployment.md, "Conformance".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from a2a_endpoint import types
from a2a_endpoint.execution import AgentExecutor, RequestContext, TaskUpdater

#: The kit's streaming timeout is 2 s; its resubscription test needs the task open for twice
#: that.
RESUBSCRIBE_SECONDS = 4.0


def _file(name: str, media_type: str, **content: Any) -> types.Part:
    return types.Part(filename=name, media_type=media_type, **content)


#: messageId prefix → the artifact parts of a task that works, adds them and completes.
ARTIFACTS: dict[str, list[types.Part]] = {
    "tck-stream-artifact-text": [types.Part(text="Streamed text content")],
    "tck-stream-artifact-file": [_file("output.txt", "text/plain", raw=b"tck")],
    "tck-stream-ordering-001": [types.Part(text="Ordered output")],
    "tck-stream-001": [types.Part(text="Stream hello from TCK")],
    "tck-stream-003": [types.Part(text="Stream task lifecycle")],
    "tck-artifact-file-url": [
        _file("output.txt", "text/plain", url="https://example.com/output.txt")
    ],
    "tck-artifact-text": [types.Part(text="Generated text content")],
    "tck-artifact-file": [_file("output.txt", "text/plain", raw=b"tck")],
    "tck-artifact-data": [types.Part(data={"key": "value", "count": 42})],
}


class TckAgent(AgentExecutor):
    """Answers each a2a-tck scenario by the prefix of the incoming ``messageId``."""

    skills: ClassVar[list[dict[str, Any]]] = [
        {
            "id": "tck",
            "name": "A2A TCK scenarios",
            "description": "Behaves as the a2a-tck scenario named by the messageId prefix.",
            "tags": ["tck"],
        }
    ]

    def execute(self, context: RequestContext, updater: TaskUpdater) -> None:
        message_id = context.message.message_id
        for prefix, parts in ARTIFACTS.items():  # longer prefixes first (dict order)
            if message_id.startswith(prefix):
                if prefix.startswith("tck-stream"):
                    updater.start_work()
                updater.add_artifact(parts, last_chunk=True)
                updater.complete()
                return
        for prefix, scenario in SCENARIOS.items():
            if message_id.startswith(prefix):
                scenario(context, updater)
                return
        updater.complete(f"Unhandled messageId prefix: {message_id}")


def _chunked(context: RequestContext, updater: TaskUpdater) -> None:
    updater.start_work()
    artifact_id = updater.add_artifact("chunk-1 ")
    updater.add_artifact("chunk-2", artifact_id=artifact_id, append=True, last_chunk=True)
    updater.complete()


def _long_running(context: RequestContext, updater: TaskUpdater) -> None:
    updater.start_work()
    if not context.cancel_event.wait(RESUBSCRIBE_SECONDS):
        updater.complete()


#: messageId prefix → what the agent does (the scenarios without artifacts of their own).
SCENARIOS: dict[str, Callable[[RequestContext, TaskUpdater], Any]] = {
    "tck-stream-artifact-chunked": _chunked,
    "test-resubscribe-message-id": _long_running,
    "tck-message-response": lambda context, updater: updater.reply("Direct message response"),
    "tck-input-required": lambda context, updater: updater.require_input("Input required"),
    "tck-reject-task": lambda context, updater: updater.reject("rejected"),
    "tck-stream-002": lambda context, updater: updater.complete(),
    "tck-complete-task": lambda context, updater: updater.complete("Hello from TCK"),
}
