"""Agents the tests drive: the first word of the user's text says what to do.

Both agents count their runs per task (``RUNS``) and note what they observed
(``OBSERVED``), so tests can tell whether a job ran again or saw its cancellation.
"""

from __future__ import annotations

import asyncio
import collections
import threading

from a2a_endpoint import types
from a2a_endpoint.errors import TaskStateError
from a2a_endpoint.execution import AgentError, AgentExecutor, RequestContext, TaskUpdater

_lock = threading.Lock()
RUNS: collections.Counter[str] = collections.Counter()
OBSERVED: dict[str, list[str]] = collections.defaultdict(list)
_GATES: dict[str, threading.Event] = {}


def _count_run(task_id: str) -> None:
    with _lock:
        RUNS[task_id] += 1


def observe(task_id: str, what: str) -> None:
    with _lock:
        OBSERVED[task_id].append(what)


def observed(task_id: str) -> list[str]:
    with _lock:
        return list(OBSERVED[task_id])


def gate(name: str) -> threading.Event:
    """The event a "gate <name>" job waits for; tests ``set()`` it to let the job finish."""
    with _lock:
        return _GATES.setdefault(name, threading.Event())


class ScriptedAgent(AgentExecutor):
    """A synchronous agent (runs in a worker thread)."""

    skills = [
        {"id": "script", "name": "Script", "description": "Does what it is told.", "tags": ["test"]}
    ]

    def execute(self, context: RequestContext, updater: TaskUpdater) -> None:
        _count_run(context.task_id)
        command, _, rest = context.text.partition(" ")
        if context.is_continuation:
            updater.complete(f"Hello {context.text}")
            return
        # "noop" and anything unknown: return without a word; the runner completes the task.
        action = getattr(self, f"do_{command.replace('-', '_')}", None)
        if action is not None:
            action(context, updater, rest)

    def do_metadata(self, context: RequestContext, updater: TaskUpdater, rest: str) -> None:
        observe(context.task_id, repr(context.metadata))
        updater.complete()

    def do_echo(self, context: RequestContext, updater: TaskUpdater, rest: str) -> None:
        updater.start_work("echoing")
        updater.add_artifact(rest, name="echo", last_chunk=True)
        updater.complete()

    def do_reply(self, context: RequestContext, updater: TaskUpdater, rest: str) -> None:
        updater.reply(f"you said {rest}")

    def do_ask(self, context: RequestContext, updater: TaskUpdater, rest: str) -> None:
        updater.require_input("What is your name?")

    def do_chunks(self, context: RequestContext, updater: TaskUpdater, rest: str) -> None:
        updater.start_work()
        artifact_id = updater.add_artifact("one ", name="story")
        updater.add_artifact("two ", artifact_id=artifact_id, append=True)
        updater.add_artifact(
            [types.Part(data={"n": 3})], artifact_id=artifact_id, append=True, last_chunk=True
        )
        updater.complete()

    def do_fail(self, context: RequestContext, updater: TaskUpdater, rest: str) -> None:
        raise RuntimeError("database password is hunter2")

    def do_agent_error(self, context: RequestContext, updater: TaskUpdater, rest: str) -> None:
        raise AgentError("The input was not understood")

    def do_wait(self, context: RequestContext, updater: TaskUpdater, rest: str) -> None:
        updater.start_work()
        context.cancel_event.wait(float(rest or 30))
        if context.cancelled:
            return
        updater.complete("waited")

    def do_gate(self, context: RequestContext, updater: TaskUpdater, rest: str) -> None:
        """Work until the test opens ``gate(rest)``."""
        updater.start_work()
        gate(rest).wait(30)
        updater.complete("opened")

    def do_linger(self, context: RequestContext, updater: TaskUpdater, rest: str) -> None:
        """Wait for the cancel signal, then try to write anyway (it must be refused)."""
        updater.start_work()
        context.cancel_event.wait(30)
        observe(context.task_id, f"cancelled={context.cancelled}")
        try:
            updater.complete("too late")
        except TaskStateError:
            observe(context.task_id, "write refused")
            raise
        observe(context.task_id, "write accepted")


class AsyncScriptedAgent(AgentExecutor):
    """An asynchronous agent (runs on the backend's event loop)."""

    async def execute(self, context: RequestContext, updater: TaskUpdater) -> None:
        _count_run(context.task_id)
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
            try:
                await asyncio.sleep(60)  # ignores cancellation until the grace period ends
            except asyncio.CancelledError:
                observe(context.task_id, "stopped")
                raise


class UnbuildableAgent(ScriptedAgent):
    """An agent whose constructor fails: the task must fail, not hang SUBMITTED."""

    def __init__(self) -> None:
        raise RuntimeError("missing API key for the model")
