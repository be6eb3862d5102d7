"""Agents the tests drive: the first word of the user's text says what to do.

Both agents count their runs per task (``RUNS``) and note what they observed
(``OBSERVED``), so tests can tell whether a job ran again or saw its cancellation. When the
agent runs in another process (a Celery worker), a task whose metadata names a run log file
(``RUN_LOG_KEY``) gets every run and observation appended to it as a JSON line, with the pid.
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from a2a_endpoint import types
from a2a_endpoint.errors import TaskStateError
from a2a_endpoint.execution import AgentError, AgentExecutor, RequestContext, TaskUpdater

_lock = threading.Lock()
RUNS: collections.Counter[str] = collections.Counter()
OBSERVED: dict[str, list[str]] = collections.defaultdict(list)
_GATES: dict[str, threading.Event] = {}
# How long a "ticks" job waits for its gate file before it gives up (and the task fails).
FILE_GATE_TIMEOUT = 60.0
FILE_GATE_POLL = 0.01
#: Task metadata key: a file the agent appends its runs and observations to (JSON lines).
RUN_LOG_KEY = "scriptedAgentRunLog"


def _count_run(task_id: str) -> None:
    with _lock:
        RUNS[task_id] += 1


def observe(task_id: str, what: str) -> None:
    with _lock:
        OBSERVED[task_id].append(what)


def run_log(context: RequestContext, event: str, **fields: Any) -> None:
    """Append ``event`` to the task's run log file, if its metadata names one."""
    path = (context.metadata or {}).get(RUN_LOG_KEY)
    if not path:
        return
    line = {
        "task": context.task_id,
        "event": event,
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "time": time.time(),
        **fields,
    }
    # One short O_APPEND write per line: lines of concurrent processes do not interleave.
    with open(path, "a", encoding="utf-8") as log:
        log.write(json.dumps(line) + "\n")


def note(context: RequestContext, what: str) -> None:
    """``observe`` in this process, and in the run log for the test process to read."""
    observe(context.task_id, what)
    run_log(context, "note", what=what)


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
        run_log(context, "run", text=context.text, attempt=context.attempt)
        command, _, rest = context.text.partition(" ")
        if context.is_continuation:
            if command == "hold":  # a scripted answer: held at a gate, then the rest
                self.do_hold(context, updater, rest)
                return
            if command == "ticks":  # an answer that keeps the task WORKING for a while
                self.do_ticks(context, updater, rest)
                return
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

    def do_ticks(self, context: RequestContext, updater: TaskUpdater, rest: str) -> None:
        """ "ticks N MS [GATE_FILE]": N WORKING updates "tick <i>", MS milliseconds apart.

        With a gate file, the job first waits until that file exists: a gate other processes
        (the test process, another server) can open, so streams attach before events flow.
        """
        count, interval, *gate_file = rest.split()
        if gate_file and not _wait_for_file(Path(gate_file[0]), context.cancel_event):
            if context.cancelled:
                return
            raise TimeoutError(f"gate file {gate_file[0]} did not appear")
        for index in range(int(count)):
            if index and context.cancel_event.wait(int(interval) / 1000):
                return
            updater.start_work(f"tick {index}")
        updater.complete("ticked")

    def do_report(self, context: RequestContext, updater: TaskUpdater, rest: str) -> None:
        """ "report N MS": a "report" artifact (a new artifactId each run) built in N chunks
        MS milliseconds apart, a WORKING update after each, then COMPLETED (the demo's long
        job, test-sized)."""
        count, interval = (int(value) for value in rest.split())
        report_id = f"report-{uuid.uuid4()}"
        for index in range(count):
            if index and context.cancel_event.wait(interval / 1000):
                return
            updater.add_artifact(
                f"chunk {index} of attempt {context.attempt}\n",
                artifact_id=report_id,
                name="report",
                append=index > 0,
                last_chunk=index == count - 1,
            )
            updater.start_work(f"chunk {index}")
        updater.complete("reported")

    def do_hold(self, context: RequestContext, updater: TaskUpdater, rest: str) -> None:
        """ "hold <gate> [script]": WORKING, wait for the test to open the gate, then the rest
        of the script (another command, e.g. "hold g1 burst 3 ask"), or complete."""
        name, _, script = rest.partition(" ")
        updater.start_work(f"holding {name}")
        # Also released by cancellation, so a runtime shutdown never waits on a closed gate.
        deadline = time.monotonic() + 30
        while not gate(name).wait(0.05) and time.monotonic() < deadline:
            if context.cancelled:
                return
        self._then(context, updater, script)

    def do_burst(self, context: RequestContext, updater: TaskUpdater, rest: str) -> None:
        """ "burst <n> [script]": n WORKING updates as fast as possible, then the rest."""
        count, _, script = rest.partition(" ")
        for step in range(1, int(count) + 1):
            updater.start_work(f"step {step}")
        self._then(context, updater, script)

    def _then(self, context: RequestContext, updater: TaskUpdater, script: str) -> None:
        command, _, rest = script.partition(" ")
        action = getattr(self, f"do_{command.replace('-', '_')}", None) if command else None
        if action is None:
            updater.complete("done")
        else:
            action(context, updater, rest)

    def do_linger(self, context: RequestContext, updater: TaskUpdater, rest: str) -> None:
        """Wait for the cancel signal, then try to write anyway (it must be refused)."""
        updater.start_work()
        context.cancel_event.wait(30)
        note(context, f"cancelled={context.cancelled}")
        try:
            updater.complete("too late")
        except TaskStateError:
            note(context, "write refused")
            raise
        note(context, "write accepted")

    def do_stubborn(self, context: RequestContext, updater: TaskUpdater, rest: str) -> None:
        """ "stubborn SECONDS": work that ignores cancellation (only killing stops it)."""
        updater.start_work("stubborn")
        deadline = time.monotonic() + float(rest or 60)
        noticed = False
        while time.monotonic() < deadline:
            time.sleep(0.02)
            if context.cancelled and not noticed:
                noticed = True
                note(context, "ignoring cancellation")
        note(context, "finished")


def _wait_for_file(path: Path, cancel_event: threading.Event) -> bool:
    """True once ``path`` exists; False on cancellation or after FILE_GATE_TIMEOUT."""
    deadline = time.monotonic() + FILE_GATE_TIMEOUT
    while not path.exists():
        if time.monotonic() >= deadline or cancel_event.wait(FILE_GATE_POLL):
            return False
    return True


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
