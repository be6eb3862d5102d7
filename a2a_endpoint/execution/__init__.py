"""The agent runtime: the contract agent authors implement, the runner and the backends."""

from a2a_endpoint.execution.context import RequestContext
from a2a_endpoint.execution.executor import AgentError, AgentExecutor
from a2a_endpoint.execution.updater import TaskUpdater

__all__ = ["AgentError", "AgentExecutor", "RequestContext", "TaskUpdater"]
