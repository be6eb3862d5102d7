"""``manage.py a2a_webhook_receiver [--host 127.0.0.1] [--port 9000] [--status 200]``: a demo
webhook that prints one line per push notification it receives, until Ctrl-C.

To watch push notifications while trying the endpoint out: a SendMessage whose push config
has ``url`` ``http://127.0.0.1:9000/`` (the sample project allows http and loopback webhooks
while DEBUG is on). ``--status 503`` shows the sender's retries, ``--status 404`` its dead
letters. Of the ``Authorization`` header only the scheme is printed, and of the token only
whether it came: the client's secrets stay out of a terminal's scrollback.

Its own small server rather than :class:`a2a_endpoint.testing.WebhookReceiver`, which keeps
every request for a test to look at (a demo left running would grow without end) and answers
from a script rather than with one status.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from datetime import datetime
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser


def _kind(body: bytes) -> str:
    """What a StreamResponse is (its one top-level key), with the state a status update
    reports."""
    try:
        response = json.loads(body)
    except ValueError:
        return f"unreadable body ({len(body)} bytes)"
    if not isinstance(response, dict) or len(response) != 1:
        return "not a StreamResponse"
    [(kind, event)] = response.items()
    status = event.get("status") if isinstance(event, dict) else None
    if kind == "statusUpdate" and isinstance(status, dict):
        return f"{kind} state={status.get('state', '?')}"
    return str(kind)


def _auth_scheme(value: str) -> str:
    """The scheme of an Authorization header, never what follows it (the credentials)."""
    scheme, space, _ = value.strip().partition(" ")
    if not value.strip():
        return "none"
    return scheme if space else "?"  # one word alone may be a credential: not shown


def describe(headers: Message, body: bytes, when: datetime) -> str:
    """One line for a received push: when, which event of which task, what it is."""
    token = "yes" if headers.get("X-A2A-Notification-Token") is not None else "no"
    fields = [
        when.strftime("%Y-%m-%d %H:%M:%S"),
        f"task={headers.get('X-A2A-Task-Id') or '?'}",
        f"seq={headers.get('X-A2A-Event-Seq') or '?'}",
        _kind(body),
        f"config={headers.get('X-A2A-Push-Config-Id') or '?'}",
        f"attempt={headers.get('X-A2A-Delivery-Attempt') or '?'}",
        f"auth={_auth_scheme(headers.get('Authorization') or '')}",
        f"token={token}",
    ]
    return " ".join(fields)


def _handler(say: Callable[[str], None], status: int) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            say(describe(self.headers, body, datetime.now()))
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass  # the line above says it all (and the request line may carry a query)

    return Handler


class Command(BaseCommand):
    help = "A demo webhook: print one line per push notification received, until Ctrl-C."
    requires_system_checks: list[str] = []  # no database, no agent: it only listens

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1", help="Default: 127.0.0.1.")
        parser.add_argument(
            "--port", type=int, default=9000, help="Default: 9000 (0: any free port)."
        )
        parser.add_argument(
            "--status", type=int, default=200, help="The HTTP status to answer (default 200)."
        )

    def handle(self, *args: Any, host: str, port: int, status: int, **options: Any) -> None:
        if not 200 <= status <= 599:
            raise CommandError("--status must be an HTTP status from 200 to 599.")
        self._lock = threading.Lock()
        try:
            server = ThreadingHTTPServer((host, port), _handler(self._say, status))
        except OSError as error:
            raise CommandError(f"Cannot listen on {host}:{port}: {error}") from None
        server.daemon_threads = True
        bound_host, bound_port = server.server_address[:2]
        self._say(
            f"Receiving push notifications at http://{bound_host}:{bound_port}/ "
            f"(answering {status}); Ctrl-C to stop."
        )
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
        self._say("Stopped.")

    def _say(self, line: str) -> None:
        # From the server's threads: one whole line at a time, out at once (a pipe, a log).
        with self._lock:
            self.stdout.write(line)
            self.stdout.flush()
