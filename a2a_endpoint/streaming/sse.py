"""Server-Sent Events framing (pure): one JSON document per event, comments for keep-alive."""

from __future__ import annotations


def encode_sse(data: bytes, event_id: int | str | None = None, event: str | None = None) -> bytes:
    """One SSE event. ``data`` must be single-line JSON (compact JSON never holds a newline)."""
    head = b""
    if event_id is not None:
        head += b"id: " + str(event_id).encode() + b"\n"
    if event is not None:
        head += b"event: " + event.encode() + b"\n"
    return head + b"data: " + data + b"\n\n"


def keepalive(comment: str = "keep-alive") -> bytes:
    """A comment line: ignored by clients, keeps proxies from closing an idle stream."""
    return b": " + comment.encode() + b"\n\n"
