"""The reference: an a2a-sdk 1.3.0 JSON-RPC server (Starlette, run by uvicorn), same echo agent.

``uvicorn bench.sdk_server:app``. ``BENCH_SDK_DB`` (a SQLAlchemy async URL,
``postgresql+asyncpg://...``) selects the SDK's ``DatabaseTaskStore`` on that database,
otherwise its ``InMemoryTaskStore``. Served at ``/a2a/`` and ``/.well-known/agent-card.json``,
the same paths as a2a_endpoint, so the load generator sends identical requests to both.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import AsyncIterator

from a2a.helpers import new_task_from_user_message, new_text_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events.event_queue_v2 import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import DatabaseTaskStore, InMemoryTaskStore, TaskStore, TaskUpdater
from a2a.types import AgentCard, Part
from google.protobuf.json_format import ParseDict
from starlette.applications import Starlette

HOLD = "hold"
RPC_PATH = "/a2a/"


class EchoExecutor(AgentExecutor):
    """bench.agents.BenchAgent for the SDK: working → artifact → completed, or ``hold``."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input()
        task = context.current_task
        if task is None:
            assert context.message is not None
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        if text.startswith(HOLD):
            if context.current_task is not None:
                await updater.start_work(_agent_text(f"tick {time.time():.6f}", task))
            await updater.requires_input(_agent_text("send hold again for the next tick", task))
            return
        await updater.start_work()
        await updater.add_artifact([Part(text=text or "(no text)")], name="echo", last_chunk=True)
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError("the bench never cancels")


def _agent_text(text: str, task: object) -> object:
    return new_text_message(text, context_id=task.context_id, task_id=task.id)  # type: ignore[attr-defined]


def agent_card(base_url: str) -> AgentCard:
    card = {
        "name": "a2a-sdk reference",
        "description": "The a2a-sdk 1.3.0 reference server of the a2a_endpoint benchmark.",
        "version": "1.3.0",
        "supportedInterfaces": [
            {"url": base_url + RPC_PATH, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
        ],
        "capabilities": {"streaming": True},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "echo", "name": "Echo", "description": "Echoes.", "tags": ["bench"]}],
    }
    return ParseDict(card, AgentCard())


def task_store() -> TaskStore:
    url = os.environ.get("BENCH_SDK_DB", "")
    if not url:
        return InMemoryTaskStore()
    from sqlalchemy.ext.asyncio import create_async_engine

    # pool_size matches the load generator's 16 connections: the pool is no bottleneck, and
    # the shared PostgreSQL (max_connections 100) keeps room for the other servers.
    engine = create_async_engine(url, pool_size=16, max_overflow=4)
    return DatabaseTaskStore(engine, create_table=True)


def build_app() -> Starlette:
    store = task_store()
    card = agent_card(os.environ.get("BENCH_BASE_URL", "http://127.0.0.1:8000"))
    handler = DefaultRequestHandler(
        agent_executor=EchoExecutor(), task_store=store, agent_card=card
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if isinstance(store, DatabaseTaskStore):
            await store.initialize()  # creates the tasks table
        yield

    routes = [*create_agent_card_routes(card), *create_jsonrpc_routes(handler, RPC_PATH)]
    return Starlette(routes=routes, lifespan=lifespan)


app = build_app()
