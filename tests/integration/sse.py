"""Reading SSE streams of the A2A endpoint in the multi-process suites."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import httpx


@dataclass
class Frame:
    """One SSE event: its ``id:`` (the task event seq), its JSON-RPC response, when it came."""

    seq: int | None
    data: dict[str, Any]
    received: float  # the reader's ``clock``


async def sse_frames(
    response: httpx.Response, clock: Callable[[], float] = time.monotonic
) -> AsyncIterator[Frame]:
    """The SSE events of a response body as they arrive (comments are skipped).

    ``clock`` stamps each frame: ``time.monotonic`` for durations, ``time.time`` to compare
    with timestamps the servers wrote (same machine).
    """
    seq: int | None = None
    data: list[str] = []
    async for line in response.aiter_lines():
        if not line:
            if data:
                yield Frame(seq, json.loads("\n".join(data)), clock())
            seq, data = None, []
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "id":
                seq = int(value)
            elif name == "data":
                data.append(value)
