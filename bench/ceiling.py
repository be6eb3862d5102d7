"""The ceiling: a trivial ASGI app answering JSON-RPC with constants, and a bare SSE broadcast.

Served by daphne and by uvicorn, it measures what the server and the load generator cost with
no application work at all: the upper bound any A2A server on that ASGI server can reach.

Requests are answered by method name (the body is scanned, not parsed):

- ``SubscribeToTask``: an SSE stream; a constant task snapshot first, then each broadcast;
- ``SendMessage`` naming a ``taskId``: broadcasts one ``tick <unix time>`` status update to
  every open stream (the fan-out scenario's update), then answers a constant task;
- ``SendMessage`` of a new message: a constant INPUT_REQUIRED task (the fan-out scenario's
  held task);
- anything else: one constant JSON-RPC response (GetTask's ceiling).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

BODY = (
    b'{"jsonrpc":"2.0","id":1,"result":{"id":"ceiling","contextId":"ceiling",'
    b'"status":{"state":"TASK_STATE_COMPLETED"}}}'
)
HELD = (
    b'{"jsonrpc":"2.0","id":1,"result":{"task":{"id":"ceiling","contextId":"ceiling",'
    b'"status":{"state":"TASK_STATE_INPUT_REQUIRED"}}}}'
)
SNAPSHOT = (
    b'data: {"jsonrpc":"2.0","id":1,"result":{"task":{"id":"ceiling","contextId":"ceiling",'
    b'"status":{"state":"TASK_STATE_INPUT_REQUIRED"}}}}\n\n'
)
HEADERS = [(b"content-type", b"application/json"), (b"content-length", str(len(BODY)).encode())]
SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

#: The open streams' queues (one event loop per server process).
_streams: set[asyncio.Queue[bytes]] = set()


def _tick() -> bytes:
    update = {
        "statusUpdate": {
            "taskId": "ceiling",
            "contextId": "ceiling",
            "status": {
                "state": "TASK_STATE_WORKING",
                "message": {
                    "messageId": "tick",
                    "role": "ROLE_AGENT",
                    "parts": [{"text": f"tick {time.time():.6f}"}],
                },
            },
        }
    }
    frame = json.dumps({"jsonrpc": "2.0", "id": 1, "result": update}, separators=(",", ":"))
    return b"data: " + frame.encode() + b"\n\n"


async def _reply(send: Send, body: bytes) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _stream(receive: Receive, send: Send) -> None:
    queue: asyncio.Queue[bytes] = asyncio.Queue()
    _streams.add(queue)
    try:
        await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
        await send({"type": "http.response.body", "body": SNAPSHOT, "more_body": True})
        disconnected = asyncio.ensure_future(receive())  # http.disconnect ends the stream
        while True:
            frame = asyncio.ensure_future(queue.get())
            await asyncio.wait({frame, disconnected}, return_when=asyncio.FIRST_COMPLETED)
            if not frame.done():
                frame.cancel()
                return
            await send({"type": "http.response.body", "body": frame.result(), "more_body": True})
    finally:
        _streams.discard(queue)


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def application(scope: dict[str, Any], receive: Receive, send: Send) -> None:
    """Read the request body, answer by method (lifespan: accept startup and shutdown)."""
    if scope["type"] == "lifespan":
        await _lifespan(receive, send)
        return
    if scope["type"] != "http":
        return
    body = b""
    more = True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
    if b'"SubscribeToTask"' in body:
        await _stream(receive, send)
    elif b'"SendMessage"' in body and b'"taskId"' in body:
        tick = _tick()
        for queue in _streams:
            queue.put_nowait(tick)
        await _reply(send, HELD)
    elif b'"SendMessage"' in body:
        await _reply(send, HELD)
    else:
        await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
        await send({"type": "http.response.body", "body": BODY})
