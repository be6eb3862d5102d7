"""The ceiling: a trivial ASGI app answering every request with one constant JSON-RPC response.

Served by daphne and by uvicorn, it measures what the server and the load generator cost with
no application work at all: the upper bound any A2A server on that ASGI server can reach.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

BODY = (
    b'{"jsonrpc":"2.0","id":1,"result":{"id":"ceiling","contextId":"ceiling",'
    b'"status":{"state":"TASK_STATE_COMPLETED"}}}'
)
HEADERS = [(b"content-type", b"application/json"), (b"content-length", str(len(BODY)).encode())]

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


async def application(scope: dict[str, Any], receive: Receive, send: Send) -> None:
    """Read the request body, answer BODY (lifespan: accept startup and shutdown)."""
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] != "http":
        return
    more = True
    while more:
        message = await receive()
        more = message.get("more_body", False)
    await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
    await send({"type": "http.response.body", "body": BODY})
