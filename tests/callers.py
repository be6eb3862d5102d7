"""Caller resolvers of the test suite."""

from __future__ import annotations

import msgspec
from django.http import HttpRequest

from a2a_endpoint.auth import resolve_caller
from a2a_endpoint.types import ANY_TENANT, Caller


def any_tenant(request: HttpRequest) -> Caller:
    """The default resolver's caller, allowed to name any tenant: most of the suite stores
    tasks in tenants of its choosing; tests/auth checks the grants themselves."""
    caller = resolve_caller(request)
    return msgspec.structs.replace(caller, tenants=frozenset({ANY_TENANT}))


any_tenant.on_event_loop = True  # type: ignore[attr-defined]
