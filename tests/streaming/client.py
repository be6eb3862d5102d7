"""An SSE client for the streaming tests: reads a response frame by frame with deadlines."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import msgspec
from asgiref.sync import sync_to_async

from a2a_endpoint import models
from a2a_endpoint.testing import jsonrpc_request, parse_sse, user_message

DEADLINE = 10.0
KINDS = frozenset({"task", "message", "statusUpdate", "artifactUpdate"})
KEEPALIVE = b": keep-alive"


class StreamEnded(Exception):
    """The server closed the stream."""


class SseStream:
    """One open ``text/event-stream`` response, read one SSE block at a time.

    Blocks are split on the blank line that ends each event (A2A §3.1.2 rides on SSE), so
    the test sees comments (``: keep-alive``) as well as ``data:`` events.
    """

    def __init__(self, response: Any, request_id: Any = 1) -> None:
        assert response.status_code == 200
        assert response["Content-Type"] == "text/event-stream", response.content
        self.response = response
        self.request_id = request_id
        self.chunks: AsyncIterator[bytes] = response.streaming_content
        self.buffer = b""
        self.comments: list[bytes] = []
        self.ended = False

    async def block(self, timeout: float = DEADLINE) -> bytes:
        """The next complete SSE block (event or comment); StreamEnded when it closes."""
        while b"\n\n" not in self.buffer:
            if self.ended:
                assert not self.buffer.strip(), f"incomplete frame at the end: {self.buffer!r}"
                raise StreamEnded
            try:
                self.buffer += await asyncio.wait_for(anext(self.chunks), timeout)
            except StopAsyncIteration:
                self.ended = True
        block, _, self.buffer = self.buffer.partition(b"\n\n")
        return block

    async def event(self, timeout: float = DEADLINE) -> dict[str, Any]:
        """The next ``data:`` event (comments are kept in ``comments``), checked as a frame."""
        while True:
            block = await self.block(timeout)
            if block.startswith(b":"):
                self.comments.append(block)
                continue
            [event] = parse_sse([block + b"\n\n"])
            return check_frame(event, self.request_id)

    async def rest(self, timeout: float = DEADLINE) -> list[dict[str, Any]]:
        """Every remaining event until the server closes the stream (within ``timeout``)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        events = []
        while True:
            try:
                events.append(await self.event(deadline - loop.time()))
            except StreamEnded:
                return events

    async def aclose(self) -> None:
        """What a client does when it goes away: stop reading and close the response."""
        await self.chunks.aclose()
        # Django's test client wraps the view's iterator; a server closes that one too.
        await self.response._iterator.aclose()


def check_frame(event: dict[str, Any], request_id: Any) -> dict[str, Any]:
    """A2A §9.4: each frame is one JSON-RPC response with the request id, ``id:`` its seq."""
    data = event["data"]
    assert data["jsonrpc"] == "2.0"
    assert data["id"] == request_id
    assert type(data["id"]) is type(request_id)
    if "error" in data:
        assert "id" not in event  # an error is no task event: it has no seq
        return event
    assert set(data) == {"jsonrpc", "id", "result"}, data
    assert len(data["result"]) == 1, data["result"]
    assert set(data["result"]) <= KINDS, data["result"]
    assert event["id"].isdigit(), event
    event["seq"] = int(event["id"])
    event["kind"], event["body"] = next(iter(data["result"].items()))
    return event


def state_of(event: dict[str, Any]) -> str:
    """The task state a task or statusUpdate event reports."""
    return event["body"]["status"]["state"]


def seqs(events: list[dict[str, Any]]) -> list[int]:
    return [event["seq"] for event in events]


def assert_consecutive(events: list[dict[str, Any]]) -> None:
    """Event ids go up by exactly one: no gap, no repeat."""
    first = events[0]["seq"]
    assert seqs(events) == list(range(first, first + len(events))), seqs(events)


async def open_stream(
    rpc: Any, method: str, params: dict[str, Any], request_id: Any = 1, **headers: str
) -> SseStream:
    response = await rpc.post(jsonrpc_request(method, params, request_id), **headers)
    return SseStream(response, request_id)


async def send_streaming(rpc: Any, text: str, request_id: Any = 1, **fields: Any) -> SseStream:
    configuration = fields.pop("configuration", None)
    params: dict[str, Any] = {"message": user_message(text, **fields)}
    if configuration is not None:
        params["configuration"] = configuration
    return await open_stream(rpc, "SendStreamingMessage", params, request_id)


async def subscribe(rpc: Any, task_id: str, request_id: Any = 1, **headers: str) -> SseStream:
    return await open_stream(rpc, "SubscribeToTask", {"id": task_id}, request_id, **headers)


async def json_error(rpc: Any, method: str, params: Any, request_id: Any = 1, **headers: str):
    """An error found before the stream starts: a plain JSON-RPC response (A2A §9.4)."""
    response = await rpc.post(jsonrpc_request(method, params, request_id), **headers)
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json", response["Content-Type"]
    answer = msgspec.json.decode(response.content)
    assert answer["id"] == request_id
    assert "result" not in answer
    return answer["error"]


@sync_to_async
def event_log(task_id: str) -> list[tuple[int, dict[str, Any]]]:
    """The task's TaskEvent rows as (seq, payload), in order."""
    rows = models.TaskEvent.objects.filter(task_id=task_id).order_by("seq")
    return list(rows.values_list("seq", "payload"))


def as_logged(events: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    return [(event["seq"], event["data"]["result"]) for event in events]
