"""Public test helpers for projects using a2a_endpoint: request builders, echo agent, SSE
parser, and a webhook receiver for push notifications."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

import msgspec

from a2a_endpoint.execution import AgentExecutor, RequestContext, TaskUpdater

__all__ = [
    "EchoAgent",
    "ReceivedPush",
    "WebhookReceiver",
    "jsonrpc_request",
    "parse_sse",
    "user_message",
]


def user_message(text: str, **fields: Any) -> dict[str, Any]:
    """A ProtoJSON user Message with one text part and a fresh messageId."""
    return {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"text": text}],
        **fields,
    }


def jsonrpc_request(method: str, params: Any = None, id: Any = 1) -> dict[str, Any]:
    """A JSON-RPC 2.0 request object (``params`` omitted when None)."""
    request: dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None:
        request["params"] = params
    return request


def parse_sse(chunks: Iterable[bytes]) -> list[dict[str, Any]]:
    """The events of an SSE body: ``{"id": ..., "event": ..., "data": <decoded JSON>}``."""
    events: list[dict[str, Any]] = []
    for block in b"".join(chunks).split(b"\n\n"):
        event: dict[str, Any] = {}
        for line in block.split(b"\n"):
            name, _, value = line.partition(b": ")
            if name == b"data":
                event["data"] = msgspec.json.decode(value)
            elif name in (b"id", b"event"):
                event[name.decode()] = value.decode()
        if "data" in event:
            events.append(event)
    return events


class EchoAgent(AgentExecutor):
    """Completes each task with an artifact holding the user's text."""

    skills = [{"id": "echo", "name": "Echo", "description": "Echoes your text.", "tags": ["demo"]}]

    def execute(self, context: RequestContext, updater: TaskUpdater) -> None:
        updater.start_work()
        updater.add_artifact(context.text or "(no text)", name="echo", last_chunk=True)
        updater.complete()


@dataclass(frozen=True)
class ReceivedPush:
    """One POST a :class:`WebhookReceiver` got (headers with lower-case names)."""

    path: str
    headers: dict[str, str]
    body: bytes
    received_at: float  # time.time()

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def task_id(self) -> str:
        return self.headers.get("x-a2a-task-id", "")

    @property
    def seq(self) -> int:
        return int(self.headers.get("x-a2a-event-seq", "0"))


@dataclass
class _Answer:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    hold: threading.Event | None = None


class WebhookReceiver:
    """An HTTP server on loopback that records the push notifications POSTed to it.

    Answers 200, or what :meth:`answer_next` scripted (a status, headers, or holding the
    request until an event is set: a slow receiver). Use it as a context manager::

        with WebhookReceiver() as receiver:
            ...  # a push config with url=receiver.url()
            [push] = receiver.wait_for(1)
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.received: list[ReceivedPush] = []
        self._script: list[_Answer] = []
        self._changed = threading.Condition()
        self._server = ThreadingHTTPServer((host, port), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="webhook-receiver", daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def url(self, path: str = "/webhook") -> str:
        return f"http://{self._server.server_address[0]}:{self.port}{path}"

    def answer_next(
        self,
        status: int = 200,
        *,
        times: int = 1,
        headers: dict[str, str] | None = None,
        hold: threading.Event | None = None,
    ) -> None:
        """Answer the next ``times`` requests with ``status`` (after ``hold`` is set)."""
        with self._changed:
            self._script.extend(_Answer(status, dict(headers or {}), hold) for _ in range(times))

    def wait_for(self, count: int, timeout: float = 10.0) -> list[ReceivedPush]:
        """The first ``count`` requests, once they arrived; AssertionError at the deadline."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while len(self.received) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        f"{len(self.received)} of {count} webhook requests within {timeout}s"
                    )
                self._changed.wait(left)
            return list(self.received[:count])

    def _record(self, push: ReceivedPush) -> _Answer:
        with self._changed:
            self.received.append(push)
            self._changed.notify_all()
            return self._script.pop(0) if self._script else _Answer()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                headers = {name.lower(): value for name, value in self.headers.items()}
                answer = receiver._record(ReceivedPush(self.path, headers, body, time.time()))
                if answer.hold is not None:
                    answer.hold.wait(60)
                self.send_response(answer.status)
                for name, value in answer.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
