"""Who is calling: the default caller resolver (the Django user, else anonymous)."""

from __future__ import annotations

from django.http import HttpRequest

from a2a_endpoint.types import ANONYMOUS, Caller


async def resolve_caller(request: HttpRequest) -> Caller:
    """The authenticated Django user owns its tasks; everyone else shares "anonymous".

    Replace it with ``A2A_ENDPOINT["CALLER_RESOLVER"]`` (a sync or async callable taking the
    request) to map API keys, JWTs or tenants onto callers.
    """
    auser = getattr(request, "auser", None)
    if auser is None:  # no AuthenticationMiddleware
        return ANONYMOUS
    user = await auser()
    if user.is_authenticated:
        return Caller(owner=f"user:{user.pk}")
    return ANONYMOUS
