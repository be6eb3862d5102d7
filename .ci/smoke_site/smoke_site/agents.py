"""The smoke test's agent: echoes the user's text as an artifact."""

from a2a_endpoint.execution import AgentExecutor, RequestContext, TaskUpdater


class EchoAgent(AgentExecutor):
    skills = [{"id": "echo", "name": "Echo", "description": "Echoes your text.", "tags": ["smoke"]}]

    def execute(self, context: RequestContext, updater: TaskUpdater) -> None:
        updater.start_work()
        updater.add_artifact(context.text or "", name="echo", last_chunk=True)
        updater.complete()
