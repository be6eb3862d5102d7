"""Agents the tests drive: the first word of the user's text says what to do."""

from __future__ import annotations

import asyncio

from a2a_endpoint import types
from a2a_endpoint.execution import AgentError, AgentExecutor, RequestContext, TaskUpdater


class ScriptedAgent(AgentExecutor):
    """A synchronous agent (runs in a worker thread)."""

    skills = [
        {"id": "script", "name": "Script", "description": "Does what it is told.", "tags": ["test"]}
    ]

    def execute(self, context: RequestContext, updater: TaskUpdater) -> None:
        command, _, rest = context.text.partition(" ")
        if context.is_continuation:
            updater.complete(f"Hello {context.text}")
        elif command == "echo":
            updater.start_work("echoing")
            updater.add_artifact(rest, name="echo", last_chunk=True)
            updater.complete()
        elif command == "reply":
            updater.reply(f"you said {rest}")
        elif command == "ask":
            updater.require_input("What is your name?")
        elif command == "chunks":
            self.chunks(updater)
        elif command == "fail":
            raise RuntimeError("database password is hunter2")
        elif command == "agent-error":
            raise AgentError("The input was not understood")
        elif command == "wait":
            updater.start_work()
            context.cancel_event.wait(float(rest or 30))
            if context.cancelled:
                return
            updater.complete("waited")
        # "noop" and anything else: return without a word; the runner completes the task.

    def chunks(self, updater: TaskUpdater) -> None:
        updater.start_work()
        artifact_id = updater.add_artifact("one ", name="story")
        updater.add_artifact("two ", artifact_id=artifact_id, append=True)
        updater.add_artifact(
            [types.Part(data={"n": 3})], artifact_id=artifact_id, append=True, last_chunk=True
        )
        updater.complete()


class AsyncScriptedAgent(AgentExecutor):
    """An asynchronous agent (runs on the backend's event loop)."""

    async def execute(self, context: RequestContext, updater: TaskUpdater) -> None:
        command, _, rest = context.text.partition(" ")
        if command == "echo":
            await updater.astart_work()
            await updater.aadd_artifact(rest, name="echo", last_chunk=True)
            await updater.acomplete()
        elif command == "reply":
            await updater.areply(f"you said {rest}")
        elif command == "ask":
            await updater.arequire_input("What is your name?")
        elif command == "fail":
            raise ValueError("boom")
        elif command == "stubborn":
            await updater.astart_work()
            await asyncio.sleep(60)  # ignores cancellation until the grace period ends
