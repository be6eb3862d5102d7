"""The bench's echo agent for a2a_endpoint: working → artifact → completed, or a held task.

``hold`` (first word) parks the task in INPUT_REQUIRED so SubscribeToTask streams stay open;
each later ``hold`` message to it emits one WORKING update whose text carries the wall-clock
time it was written (``tick <unix time>``), which the fan-out scenario measures delivery from.
"""

from __future__ import annotations

import time

from a2a_endpoint.execution import AgentExecutor, RequestContext, TaskUpdater

HOLD = "hold"


class BenchAgent(AgentExecutor):
    """Echoes the text as an artifact; ``hold`` keeps the task open for fan-out updates."""

    skills = [{"id": "echo", "name": "Echo", "description": "Echoes your text.", "tags": ["bench"]}]

    def execute(self, context: RequestContext, updater: TaskUpdater) -> None:
        text = context.text
        if text.startswith(HOLD):
            if context.is_continuation:
                updater.start_work(f"tick {time.time():.6f}")
            updater.require_input("send hold again for the next tick")
            return
        updater.start_work()
        updater.add_artifact(text or "(no text)", name="echo", last_chunk=True)
        updater.complete()
