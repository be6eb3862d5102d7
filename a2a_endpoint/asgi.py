"""Django's ASGI application, with cheaper middleware calls and reused request threads.

``get_asgi_application()`` here returns Django's ASGI handler with two changes, both about
what Django spends per request before any view runs:

- **Middleware.** The handler loads the drop-in from ``a2a_endpoint.middleware`` for each of
  Django's stock middleware classes named in ``MIDDLEWARE`` (``DROP_INS``): the same classes,
  whose ``process_*`` calls run on the event loop unless they may block, instead of through a
  worker thread each. ``MIDDLEWARE`` keeps Django's dotted paths, so the checks that look for
  them (``check --deploy``: security.W001-W003 and the settings they gate) still work; other
  middleware is loaded as listed.
- **Request threads.** Django runs each request's thread-sensitive sync code (sync views and
  middleware, signal receivers) in a one-thread executor of its own, created for the request
  and joined by yet another thread when it ends: two threads started per request, even for
  an async view (the ``request_started`` receivers are sync). This handler gives each request
  an idle executor from a pool instead, and takes it back when the request is done, so the
  thread and whatever it keeps (a persistent database connection) serve later requests, as a
  WSGI server's threads do. A request still has its thread to itself while it runs.

See docs/deployment.md, "Middleware under ASGI".
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import django
from asgiref.sync import SyncToAsync, ThreadSensitiveContext
from django.core.handlers import asgi, base
from django.db import connections
from django.utils.module_loading import import_string

#: Django's dotted path → its drop-in in a2a_endpoint.middleware (imported when the handler
#: loads: this module is imported before Django is set up, that one needs the app registry).
DROP_INS = {
    path: f"a2a_endpoint.middleware.{path.rpartition('.')[2]}"
    for path in (
        "django.middleware.security.SecurityMiddleware",
        "django.contrib.sessions.middleware.SessionMiddleware",
        "django.middleware.common.CommonMiddleware",
        "django.middleware.csrf.CsrfViewMiddleware",
        "django.contrib.auth.middleware.AuthenticationMiddleware",
        "django.contrib.messages.middleware.MessageMiddleware",
        "django.middleware.clickjacking.XFrameOptionsMiddleware",
    )
}


class ASGIHandler(asgi.ASGIHandler):
    """Django's ASGI handler: stock middleware loads as its drop-in; request threads are pooled."""

    #: Idle request threads kept for later requests; more are let go when they finish.
    max_idle_threads = 64

    def __init__(self) -> None:
        super().__init__()
        self._idle: list[ThreadPoolExecutor] = []

    def load_middleware(self, is_async: bool = False) -> None:
        # BaseHandler.load_middleware imports each MIDDLEWARE path with its module's
        # import_string: map the stock paths for this call only (it runs once, at start-up).
        def import_middleware(path: str) -> Any:
            return import_string(DROP_INS.get(path, path))

        original = base.import_string
        base.import_string = import_middleware
        try:
            super().load_middleware(is_async)
        finally:
            base.import_string = original

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        context = ThreadSensitiveContext()
        async with context:
            if context.token is None:  # inside another thread-sensitive context: use its thread
                await self.handle(scope, receive, send)
                return
            # asgiref runs this context's thread-sensitive calls on the executor registered
            # for it (and creates one, as Django's handler relies on, when there is none).
            executors = SyncToAsync.context_to_thread_executor
            executor = self._idle.pop() if self._idle else _new_executor()
            executors[context] = executor
            finished = False
            try:
                await self.handle(scope, receive, send)
                finished = True
            finally:
                if executors.get(context) is executor:
                    del executors[context]
                    # Finished: the request's last thread-sensitive call (request_finished)
                    # has run, so nothing is left on the thread. Cancelled or failed: a call
                    # may still be running there; that thread is not reused.
                    self._release(executor, reusable=finished)
                # Else a stream let the thread go when its body started (views.py); what
                # asgiref made for the context later is shut down when the context exits.

    def _release(self, executor: ThreadPoolExecutor, *, reusable: bool) -> None:
        if reusable and len(self._idle) < self.max_idle_threads:
            self._idle.append(executor)
            return
        # The thread's connections go back (to the pool, or closed), then it ends.
        executor.submit(connections.close_all)
        executor.shutdown(wait=False)


def _new_executor() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="a2a-request")


def get_asgi_application() -> ASGIHandler:
    """``django.core.asgi.get_asgi_application``, serving with this module's handler."""
    django.setup(set_prefix=False)
    return ASGIHandler()
