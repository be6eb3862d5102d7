"""HTTP requests through an ASGI application, as daphne makes them (no server, no socket)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any, NamedTuple


def http_scope(
    path: str = "/a2a/", *, method: str = "POST", headers: Iterable[tuple[bytes, bytes]] = ()
) -> dict[str, Any]:
    """The ASGI scope of an HTTP/1.1 request to ``path`` with a JSON body, plus ``headers``."""
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"testserver"), (b"content-type", b"application/json"), *headers],
        "client": ("127.0.0.1", 40000),
        "server": ("testserver", 80),
    }


class Answer(NamedTuple):
    status: int
    headers: dict[bytes, bytes]
    body: bytes


async def asgi_request(app: Any, path: str, body: bytes = b"", *, method: str = "POST") -> Answer:
    """Send one request to ``app`` and collect its whole response (a stream until it ends)."""
    scope = http_scope(path, method=method)
    done = asyncio.Event()
    incoming = [{"type": "http.request", "body": body, "more_body": False}]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if incoming:
            return incoming.pop()
        await done.wait()  # the client stays connected until the response is complete
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    try:
        await app(scope, receive, send)
    finally:
        done.set()
    start = next(message for message in sent if message["type"] == "http.response.start")
    content = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return Answer(start["status"], dict(start["headers"]), content)
