"""The load generator: a minimal asyncio HTTP/1.1 client (keep-alive, SSE) that stays cheap.

No HTTP library: one request costs a write and two buffered reads, so one client core drives
several thousand requests a second and is not what a measurement hits first (the report shows
the client's own CPU use beside each figure to prove it). Every response is checked: status
200, a JSON-RPC 2.0 ``result`` (not ``error``), and whatever the scenario's validator demands.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

RPC_PATH = "/a2a/"
_json = msgspec.json.Decoder()
_encode = msgspec.json.Encoder().encode


class ResponseError(Exception):
    """A response that is not the valid answer the scenario expects."""


@dataclass
class Response:
    status: int
    headers: dict[bytes, bytes]
    body: bytes

    def rpc_result(self) -> Any:
        """The JSON-RPC ``result``; a ResponseError for anything else."""
        if self.status != 200:
            raise ResponseError(f"HTTP {self.status}: {self.body[:200]!r}")
        try:
            payload = _json.decode(self.body)
        except msgspec.DecodeError as exc:
            raise ResponseError(f"not JSON: {self.body[:200]!r}") from exc
        if not isinstance(payload, dict) or payload.get("jsonrpc") != "2.0":
            raise ResponseError(f"not JSON-RPC 2.0: {self.body[:200]!r}")
        if "result" not in payload:
            raise ResponseError(f"JSON-RPC error: {payload.get('error')!r}")
        return payload["result"]


def rpc_body(method: str, params: dict[str, Any]) -> bytes:
    return _encode({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})


class Connection:
    """One keep-alive HTTP/1.1 connection; reconnects when the server closes it.

    ``headers`` are sent with every request on it (a server's ``Authorization``, say).
    """

    def __init__(self, host: str, port: int, headers: Mapping[str, str] | None = None) -> None:
        self.host = host
        self.port = port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        extra = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
        self._head = (
            f"POST {RPC_PATH} HTTP/1.1\r\nHost: {host}:{port}\r\n"
            f"Content-Type: application/json\r\nA2A-Version: 1.0\r\n{extra}"
        ).encode()

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(
            self.host, self.port, limit=1 << 22
        )
        sock = self.writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None

    def _send(self, body: bytes, accept: bytes) -> None:
        assert self.writer is not None
        self.writer.write(
            self._head
            + b"Accept: "
            + accept
            + b"\r\nContent-Length: "
            + str(len(body)).encode()
            + b"\r\n\r\n"
            + body
        )

    async def _head_response(self) -> tuple[int, dict[bytes, bytes]]:
        assert self.reader is not None
        raw = await self.reader.readuntil(b"\r\n\r\n")
        lines = raw[:-4].split(b"\r\n")
        status = int(lines[0].split(b" ", 2)[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            headers[name.strip().lower()] = value.strip()
        return status, headers

    async def _chunks(self, headers: dict[bytes, bytes]) -> AsyncIterator[bytes]:
        """The body as it arrives: content-length, chunked, or until the server closes."""
        reader = self.reader
        assert reader is not None
        if b"content-length" in headers:
            yield await reader.readexactly(int(headers[b"content-length"]))
            return
        if headers.get(b"transfer-encoding", b"").lower() == b"chunked":
            while True:
                size = int((await reader.readuntil(b"\r\n"))[:-2].split(b";")[0], 16)
                if size == 0:
                    await reader.readuntil(b"\r\n")  # no trailers are sent
                    return
                data = await reader.readexactly(size + 2)
                yield data[:-2]
        while data := await reader.read(65536):
            yield data

    def _reusable(self, headers: dict[bytes, bytes]) -> bool:
        return headers.get(b"connection", b"").lower() != b"close"

    async def post(self, body: bytes) -> Response:
        """One request on this connection (opened on first use, reopened after a close)."""
        if self.writer is None:
            await self.open()
        try:
            self._send(body, b"application/json")
            status, headers = await self._head_response()
            data = b"".join([chunk async for chunk in self._chunks(headers)])
        except BaseException:
            self.close()
            raise
        if not self._reusable(headers):
            self.close()
        return Response(status, headers, data)

    async def stream(self, body: bytes) -> AsyncIterator[tuple[float, Any]]:
        """POST and yield ``(perf_counter at arrival, decoded JSON-RPC result)`` per SSE event.

        Comment frames (``: keep-alive``) are skipped; an ``error`` frame raises ResponseError.
        The connection is closed afterwards (a stream is not reused).
        """
        if self.writer is None:
            await self.open()
        try:
            self._send(body, b"text/event-stream")
            status, headers = await self._head_response()
            if status != 200 or not headers.get(b"content-type", b"").startswith(
                b"text/event-stream"
            ):
                data = b"".join([chunk async for chunk in self._chunks(headers)])
                Response(status, headers, data).rpc_result()  # raises with the error
                raise ResponseError(f"not an event stream: {status} {data[:200]!r}")
            buffer = b""
            async for chunk in self._chunks(headers):
                arrived = time.time()
                # SSE lines may end in CRLF (sse-starlette) or LF (a2a_endpoint).
                buffer = (buffer + chunk).replace(b"\r\n", b"\n")
                while b"\n\n" in buffer:
                    frame, buffer = buffer.split(b"\n\n", 1)
                    for line in frame.split(b"\n"):
                        if line.startswith(b"data:"):
                            yield arrived, Response(200, {}, line[5:].strip()).rpc_result()
        finally:
            self.close()


# --- closed-loop load ----------------------------------------------------------------------


@dataclass
class Sample:
    """What one load run measured (latencies in seconds)."""

    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    error_examples: list[str] = field(default_factory=list)
    elapsed: float = 0.0
    client_cpu: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def error(self, exc: BaseException) -> None:
        self.errors += 1
        if len(self.error_examples) < 3:
            self.error_examples.append(f"{type(exc).__name__}: {exc}"[:300])


#: One request: gets a connection and a worker-local state; returns nothing, raises if invalid.
Operation = Callable[[Connection, dict[str, Any]], Awaitable[None]]


async def closed_loop(
    host: str,
    port: int,
    operation: Operation,
    *,
    connections: int,
    duration: float,
    warmup: float = 1.0,
    headers: Mapping[str, str] | None = None,
) -> Sample:
    """``connections`` workers each send ``operation`` back to back for ``warmup + duration``.

    Only requests that start after the warm-up are measured (latency and count). A failed
    request counts as an error and its connection is reopened. ``headers`` go with every
    request.
    """
    sample = Sample()
    start = time.perf_counter()
    measure_from = start + warmup
    stop_at = measure_from + duration

    async def worker() -> None:
        connection = Connection(host, port, headers)
        state: dict[str, Any] = {}
        try:
            while (began := time.perf_counter()) < stop_at:
                try:
                    await operation(connection, state)
                except (ResponseError, OSError, asyncio.IncompleteReadError, ValueError) as exc:
                    connection.close()
                    if began >= measure_from:
                        sample.error(exc)
                    continue
                if began >= measure_from:
                    sample.latencies.append(time.perf_counter() - began)
        finally:
            connection.close()

    cpu = time.process_time()
    await asyncio.sleep(0)
    await asyncio.gather(*(worker() for _ in range(connections)))
    sample.elapsed = max(time.perf_counter() - measure_from, 1e-9)
    sample.client_cpu = time.process_time() - cpu
    return sample


@contextlib.asynccontextmanager
async def connection(
    host: str, port: int, headers: Mapping[str, str] | None = None
) -> AsyncIterator[Connection]:
    conn = Connection(host, port, headers)
    try:
        yield conn
    finally:
        conn.close()
