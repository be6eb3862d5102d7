"""Who is calling: DRF authentication, permissions and throttles, then the caller resolver.

``authenticate(request)`` runs the endpoint's DRF classes (``a2a_endpoint.security``) the
way a DRF ``APIView`` does before its handler, and maps the user they found to a
:class:`~a2a_endpoint.types.Caller` with ``CALLER_RESOLVER``. A refusal is a
:class:`Refusal`: the HTTP status, headers and A2A error the transport answers with.
"""

from __future__ import annotations

import inspect
import math
from typing import Any

from asgiref.sync import iscoroutinefunction, sync_to_async
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import HttpRequest, QueryDict
from django.utils.datastructures import MultiValueDict
from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.views import APIView

from a2a_endpoint import errors, security
from a2a_endpoint.conf import app_settings
from a2a_endpoint.types import ANONYMOUS, Caller

__all__ = [
    "Refusal",
    "authenticate",
    "resolve_caller",
    "unauthenticated",
]


def resolve_caller(request: HttpRequest) -> Caller:
    """The authenticated user owns its tasks (``user:<pk>``); everyone else is anonymous.

    ``request.user`` and ``request.auth`` are what the authentication classes found.
    Replace it with ``A2A_ENDPOINT["CALLER_RESOLVER"]`` (a sync or async callable taking the
    request) to map API keys, service accounts or tenants onto callers.
    """
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        return Caller(owner=f"user:{user.pk}")
    return ANONYMOUS


# Reads two attributes set already: safe on the event loop (no thread for open endpoints).
resolve_caller.on_event_loop = True  # type: ignore[attr-defined]


class Refusal(Exception):
    """The request is refused before any method runs: HTTP ``status`` with ``headers``."""

    def __init__(
        self, status: int, error: errors.A2AError, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(error.message)
        self.status = status
        self.error = error
        self.headers = headers or {}

    def apply(self, response: Any) -> Any:
        """``response`` (its JSON-RPC error body already set) with this status and headers."""
        response.status_code = self.status
        for name, value in self.headers.items():
            response[name] = value
        return response


class _Gate(APIView):
    """The checks of ``APIView.initial`` that concern the caller (not content negotiation:
    the endpoint answers JSON or SSE whatever DRF's renderers are)."""

    def get_authenticators(self) -> list[Any]:
        return [cls() for cls in security.authentication_classes()]

    def get_permissions(self) -> list[Any]:
        return [permission() for permission in security.permission_classes()]

    def get_throttles(self) -> list[Any]:
        return [throttle() for throttle in security.throttle_classes()]

    @property
    def throttle_scope(self) -> str:  # ScopedRateThrottle
        return str(app_settings.THROTTLE_SCOPE)

    def challenges(self, request: Request) -> str:
        """Every authenticator's ``WWW-Authenticate`` challenge, not just the first one's
        (DRF's default, which turns a 401 into a 403 when the session class is first)."""
        found = (auth.authenticate_header(request) for auth in request.authenticators)
        return ", ".join(challenge for challenge in found if challenge)


def _refusal(gate: _Gate, request: Request, exc: Exception) -> Refusal:
    if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
        challenges = gate.challenges(request)
        if challenges:
            error = errors.UnauthenticatedError(str(exc.detail))
            return Refusal(401, error, {"WWW-Authenticate": challenges})
        # No challenge to send: RFC 9110 §15.5.2 requires one with a 401 (DRF does the same).
        return Refusal(403, errors.UnauthenticatedError(str(exc.detail)))
    if isinstance(exc, exceptions.Throttled):
        wait = exc.wait
        headers = {"Retry-After": str(max(1, math.ceil(wait)))} if wait is not None else {}
        return Refusal(429, errors.ThrottledError(str(exc.detail)), headers)
    if isinstance(exc, exceptions.PermissionDenied | DjangoPermissionDenied):
        return Refusal(403, errors.PermissionDeniedError(str(exc) or None))
    if isinstance(exc, exceptions.APIException):
        status = exc.status_code if 400 <= exc.status_code < 500 else 403
        return Refusal(status, errors.PermissionDeniedError(str(exc.detail)))
    raise exc


def _drf_request(gate: _Gate, request: HttpRequest) -> Request:
    drf_request = Request(request, authenticators=gate.get_authenticators())
    # The body was read (bounded) and is parsed by the JSON-RPC layer, not by DRF's parsers:
    # mark DRF's data as loaded, so that SessionAuthentication's CSRF check, which reads
    # request.POST, finds it empty instead of reading the consumed stream again.
    drf_request._data = QueryDict(encoding=request.encoding)
    drf_request._files = MultiValueDict()
    drf_request._full_data = drf_request._data
    return drf_request


def _check(request: HttpRequest) -> Request:
    """Authenticate, check permissions and throttles; sets ``request.user``/``request.auth``."""
    gate = _Gate()
    drf_request = _drf_request(gate, request)
    gate.request = drf_request
    gate.args, gate.kwargs, gate.format_kwarg = (), {}, None
    gate.headers = {}
    try:
        drf_request.user  # noqa: B018 -- runs the authenticators (DRF's perform_authentication)
        gate.check_permissions(drf_request)
        gate.check_throttles(drf_request)
    except (exceptions.APIException, DjangoPermissionDenied) as exc:
        raise _refusal(gate, drf_request, exc) from None
    return drf_request


def unauthenticated(request: HttpRequest) -> Refusal:
    """What a request that reached a method needing a known caller anonymously gets."""
    gate = _Gate()
    return _refusal(gate, _drf_request(gate, request), exceptions.NotAuthenticated())


def _on_event_loop(resolver: Any) -> bool:
    return iscoroutinefunction(resolver) or getattr(resolver, "on_event_loop", False)


def _check_and_resolve(request: HttpRequest, resolver: Any) -> Any:
    _check(request)
    return None if _on_event_loop(resolver) else resolver(request)


async def authenticate(request: HttpRequest) -> Caller:
    """The caller of ``request``, or :class:`Refusal` (401, 403, 429).

    One thread hop at most: authenticators, permissions and throttles may use the ORM or
    a cache, and a sync resolver runs in the same hop. An endpoint open to anyone with no
    authenticators runs on the event loop.
    """
    resolver = app_settings.CALLER_RESOLVER
    try:
        if security.runs_on_event_loop() and _on_event_loop(resolver):
            _check(request)
            caller = None
        else:
            caller = await sync_to_async(_check_and_resolve, thread_sensitive=True)(
                request, resolver
            )
        if caller is None:
            caller = resolver(request)
        if inspect.isawaitable(caller):
            caller = await caller
    except DjangoPermissionDenied as exc:  # the resolver refused the caller
        raise Refusal(403, errors.PermissionDeniedError(str(exc) or None)) from None
    return caller
