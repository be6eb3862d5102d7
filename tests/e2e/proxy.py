"""A TCP relay in front of a test server that can drop every open connection: a network cut."""

from __future__ import annotations

import contextlib
import socket
import threading
from types import TracebackType
from typing import Self

_CHUNK = 65536
_ACCEPT_POLL_SECONDS = 0.1


class CuttableProxy:
    """Relays ``127.0.0.1:<port>`` to ``upstream``; ``cut()`` resets what is open right now.

    New connections after a cut are relayed as before, so a client that reconnects gets
    through: what it must survive is losing a connection midway, not a server gone down.
    """

    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(_ACCEPT_POLL_SECONDS)  # so the accept loop sees _stopped
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._thread = threading.Thread(target=self._accept_loop, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}"

    def cut(self) -> int:
        """Shut down every relayed connection open now; how many client connections that was."""
        with self._lock:
            sockets, self._open = self._open, set()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        return len(sockets) // 2

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stopped.set()
        self._thread.join()
        self._listener.close()
        self.cut()

    def _accept_loop(self) -> None:
        while not self._stopped.is_set():
            try:
                client, _address = self._listener.accept()
            except TimeoutError:
                continue
            try:
                server = socket.create_connection(self.upstream)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open.update((client, server))
            for source, target in ((client, server), (server, client)):
                threading.Thread(target=self._relay, args=(source, target), daemon=True).start()

    def _relay(self, source: socket.socket, target: socket.socket) -> None:
        try:
            while data := source.recv(_CHUNK):
                target.sendall(data)
        except OSError:
            pass  # the other direction was cut or closed
        finally:
            for sock in (source, target):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
            with self._lock:
                self._open.difference_update((source, target))
            source.close()
