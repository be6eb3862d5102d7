"""The endpoint's access policy: its DRF authentication, permission and throttle classes,
and how the agent card describes them (``securitySchemes``, ``securityRequirements``).

The classes come from ``A2A_ENDPOINT`` (``AUTHENTICATION_CLASSES``, ``PERMISSION_CLASSES``,
``THROTTLE_CLASSES``), falling back to ``REST_FRAMEWORK``'s defaults for authentication and
throttling. They are resolved once and again whenever either setting changes.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.utils.module_loading import import_string
from rest_framework import authentication, permissions
from rest_framework.settings import api_settings as drf_settings

from a2a_endpoint.conf import SETTING_NAME, app_settings

__all__ = [
    "authentication_classes",
    "describe",
    "is_open",
    "permission_classes",
    "runs_on_event_loop",
    "security_requirements",
    "security_schemes",
    "throttle_classes",
]


def _classes(value: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(import_string(item) if isinstance(item, str) else item for item in value)


@functools.cache
def authentication_classes() -> tuple[type[authentication.BaseAuthentication], ...]:
    value = app_settings.AUTHENTICATION_CLASSES
    return _classes(drf_settings.DEFAULT_AUTHENTICATION_CLASSES if value is None else value)


@functools.cache
def permission_classes() -> tuple[Any, ...]:
    """Permission classes, or DRF's composed ones (``IsAdminUser | IsAuthenticated``)."""
    return _classes(app_settings.PERMISSION_CLASSES)


@functools.cache
def throttle_classes() -> tuple[Any, ...]:
    value = app_settings.THROTTLE_CLASSES
    return _classes(drf_settings.DEFAULT_THROTTLE_CLASSES if value is None else value)


def _allows_anyone(permission: Any) -> bool:
    return isinstance(permission, type) and issubclass(permission, permissions.AllowAny)


@functools.cache
def is_open() -> bool:
    """True when the permission classes let anonymous callers in (none, or only AllowAny)."""
    return all(_allows_anyone(permission) for permission in permission_classes())


@functools.cache
def runs_on_event_loop() -> bool:
    """Nothing to authenticate, throttle or check that could touch the database or a cache:
    the gate may run on the event loop, without a thread."""
    return not authentication_classes() and not throttle_classes() and is_open()


# --- The card ----------------------------------------------------------------------------


def _is_simplejwt(cls: type) -> bool:
    return any(
        base.__module__.startswith("rest_framework_simplejwt.")
        and base.__name__ == "JWTAuthentication"
        for base in cls.__mro__
    )


def _jwt_header_type() -> str:
    from rest_framework_simplejwt.settings import api_settings as jwt_settings

    return next(iter(jwt_settings.AUTH_HEADER_TYPES), "Bearer")


def describe(cls: type) -> tuple[str, dict[str, Any]] | None:
    """``(name, SecurityScheme)`` for one authentication class, or None when unknown.

    A class declares its own with ``a2a_security_scheme`` (a SecurityScheme dict, as in the
    card) and optionally ``a2a_security_scheme_name``; DRF's token, basic and session
    classes and simplejwt's JWT class are known.
    """
    declared = getattr(cls, "a2a_security_scheme", None)
    if declared is not None:
        default_name = cls.__name__.removesuffix("Authentication").lower() or cls.__name__
        return getattr(cls, "a2a_security_scheme_name", default_name), dict(declared)
    if _is_simplejwt(cls):
        scheme = {"scheme": _jwt_header_type(), "bearerFormat": "JWT"}
        return "jwt", {"httpAuthSecurityScheme": scheme}
    if issubclass(cls, authentication.TokenAuthentication):
        keyword = cls.keyword
        scheme = {"scheme": keyword, "description": f"Authorization: {keyword} <token>"}
        return keyword.lower(), {"httpAuthSecurityScheme": scheme}
    if issubclass(cls, authentication.BasicAuthentication):
        return "basic", {"httpAuthSecurityScheme": {"scheme": "Basic"}}
    if issubclass(cls, authentication.SessionAuthentication):
        scheme = {
            "location": "cookie",
            "name": settings.SESSION_COOKIE_NAME,
            "description": "A Django session; requests also need the CSRF token header "
            f"({_csrf_header()}).",
        }
        return "session", {"apiKeySecurityScheme": scheme}
    return None


def _csrf_header() -> str:
    """``CSRF_HEADER_NAME`` as a client writes it (Django's default: X-CSRFToken)."""
    name = settings.CSRF_HEADER_NAME
    if name == "HTTP_X_CSRFTOKEN":
        return "X-CSRFToken"
    return name.removeprefix("HTTP_").replace("_", "-").title()


def security_schemes() -> dict[str, dict[str, Any]]:
    schemes: dict[str, dict[str, Any]] = {}
    for cls in authentication_classes():
        described = describe(cls)
        if described is not None:
            schemes.setdefault(*described)
    return schemes


def security_requirements(schemes: dict[str, Any]) -> list[dict[str, Any]]:
    """Any one of ``schemes`` will do; none is required when anonymous callers get in."""
    if is_open():
        return []
    return [{"schemes": {name: {"list": []}}} for name in schemes]


def _reset(*, setting: str, **kwargs: Any) -> None:
    if setting in {SETTING_NAME, "REST_FRAMEWORK"}:
        for cached in (
            authentication_classes,
            permission_classes,
            throttle_classes,
            is_open,
            runs_on_event_loop,
        ):
            cached.cache_clear()


setting_changed.connect(_reset)
