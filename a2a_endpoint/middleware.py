"""Django's stock middleware without a thread hop per call under ASGI.

Under an ASGI server Django runs a ``MiddlewareMixin`` middleware's ``process_request`` and
``process_response`` each through ``sync_to_async`` (and ``process_view`` too), because any of
them *might* block. With the seven classes of ``startproject``'s ``MIDDLEWARE`` that is 13
trips to a worker thread and back per request, more CPU than a JSON-RPC call of this app
costs. Most of those calls only read headers and set attributes.

Each class here is Django's own class (same module name, same settings, same behaviour:
every ``process_*`` method is inherited, none is copied). Only where it runs differs: on the
event loop when it cannot block, and in the thread Django would have used when it might,
decided per call:

- ``SessionMiddleware`` saves in the thread (the session was modified, or
  ``SESSION_SAVE_EVERY_REQUEST``); loading is lazy and happens in the view anyway.
- ``CsrfViewMiddleware`` goes to the thread with ``CSRF_USE_SESSIONS`` (the token lives in the
  session), and for a POST to a view that is not ``csrf_exempt`` (the check reads the form
  first, and parsing one may read a spooled body or write uploads to disk).
- ``MessageMiddleware`` stores messages in the thread when there are any to store (the
  fallback storage may write to the session).
- ``SecurityMiddleware``, ``CommonMiddleware``, ``AuthenticationMiddleware`` (``request.user``
  stays lazy) and ``XFrameOptionsMiddleware`` never block.

Under WSGI (sync mode) they are exactly Django's classes. ``a2a_endpoint.asgi``'s handler
loads them in place of Django's classes named in ``MIDDLEWARE``, which keeps Django's
dotted paths there for ``check --deploy`` (docs/deployment.md, "Middleware under ASGI").
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth import middleware as auth
from django.contrib.messages import middleware as messages
from django.contrib.sessions import middleware as sessions
from django.http import HttpRequest, HttpResponseBase
from django.middleware import clickjacking, common, csrf, security

__all__ = [
    "AuthenticationMiddleware",
    "CommonMiddleware",
    "CsrfViewMiddleware",
    "MessageMiddleware",
    "SecurityMiddleware",
    "SessionMiddleware",
    "XFrameOptionsMiddleware",
]


class InlineMiddlewareMixin:
    """``MiddlewareMixin.__acall__`` that calls ``process_*`` inline unless they may block.

    Mix it in before a ``MiddlewareMixin`` subclass and override ``request_may_block`` /
    ``response_may_block`` for the calls that can do I/O; those run as Django runs them
    (``sync_to_async``, thread-sensitive).
    """

    get_response: Any

    def request_may_block(self, request: HttpRequest) -> bool:
        return False

    def response_may_block(self, request: HttpRequest, response: HttpResponseBase) -> bool:
        return False

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        response = None
        process_request = getattr(self, "process_request", None)
        if process_request is not None:
            if self.request_may_block(request):
                response = await sync_to_async(process_request, thread_sensitive=True)(request)
            else:
                response = process_request(request)
        response = response or await self.get_response(request)
        process_response = getattr(self, "process_response", None)
        if process_response is not None:
            if self.response_may_block(request, response):
                process_response = sync_to_async(process_response, thread_sensitive=True)
                response = await process_response(request, response)
            else:
                response = process_response(request, response)
        return response


class SecurityMiddleware(InlineMiddlewareMixin, security.SecurityMiddleware):
    pass


class SessionMiddleware(InlineMiddlewareMixin, sessions.SessionMiddleware):
    def response_may_block(self, request: HttpRequest, response: HttpResponseBase) -> bool:
        session = getattr(request, "session", None)
        return settings.SESSION_SAVE_EVERY_REQUEST or bool(getattr(session, "modified", False))


class CommonMiddleware(InlineMiddlewareMixin, common.CommonMiddleware):
    pass


class CsrfViewMiddleware(InlineMiddlewareMixin, csrf.CsrfViewMiddleware):
    def __init__(self, get_response: Any) -> None:
        super().__init__(get_response)
        if self.async_mode:
            # The handler adapts process_view by its kind: a coroutine function is awaited
            # as is, a plain one would always go through sync_to_async.
            self.process_view = self._process_view_async  # type: ignore[method-assign]

    async def _process_view_async(
        self, request: HttpRequest, callback: Any, callback_args: Any, callback_kwargs: Any
    ) -> HttpResponseBase | None:
        process_view = super().process_view
        if self._view_may_block(request, callback):
            process_view = sync_to_async(process_view, thread_sensitive=True)
            return await process_view(request, callback, callback_args, callback_kwargs)
        return process_view(request, callback, callback_args, callback_kwargs)

    def _view_may_block(self, request: HttpRequest, callback: Any) -> bool:
        if settings.CSRF_USE_SESSIONS:
            return True
        # Django's check reads request.POST first for every POST it enforces (the header is
        # the fallback), and parsing a form may read a spooled body or write uploads to disk.
        return request.method == "POST" and not getattr(callback, "csrf_exempt", False)

    def request_may_block(self, request: HttpRequest) -> bool:
        return settings.CSRF_USE_SESSIONS

    def response_may_block(self, request: HttpRequest, response: HttpResponseBase) -> bool:
        return settings.CSRF_USE_SESSIONS


class AuthenticationMiddleware(InlineMiddlewareMixin, auth.AuthenticationMiddleware):
    pass


class MessageMiddleware(InlineMiddlewareMixin, messages.MessageMiddleware):
    def response_may_block(self, request: HttpRequest, response: HttpResponseBase) -> bool:
        storage = getattr(request, "_messages", None)
        if storage is None:
            return False
        return getattr(storage, "used", True) or getattr(storage, "added_new", True)


class XFrameOptionsMiddleware(InlineMiddlewareMixin, clickjacking.XFrameOptionsMiddleware):
    pass
