"""DRF authentication classes for A2A callers.

A module of its own, importing nothing but ``rest_framework.authentication``: DRF resolves
``DEFAULT_AUTHENTICATION_CLASSES`` while ``rest_framework.views`` is being imported, so a
class named there must not live in a module that imports the views (``a2a_endpoint.auth``
does).
"""

from __future__ import annotations

from typing import Any

from rest_framework.authentication import TokenAuthentication

__all__ = ["BearerTokenAuthentication"]


class BearerTokenAuthentication(TokenAuthentication):
    """DRF's token authentication with the standard scheme: ``Authorization: Bearer <key>``.

    DRF's own class expects ``Token <key>``; A2A clients speak HTTP bearer (the card's
    ``httpAuthSecurityScheme`` with ``scheme: Bearer``). Same tokens, same admin, same
    ``drf_create_token`` command.
    """

    keyword = "Bearer"

    def authenticate_credentials(self, key: str) -> tuple[Any, Any]:
        if "." in key:
            # A JWT (header.payload.signature), not a DRF key: let the next class (e.g.
            # simplejwt's, which shares the Bearer scheme) take it. DRF stops at the first
            # class that raises, so without this the two could not be used together.
            raise _NotOurs
        return super().authenticate_credentials(key)

    def authenticate(self, request: Any) -> tuple[Any, Any] | None:
        try:
            return super().authenticate(request)
        except _NotOurs:
            return None


class _NotOurs(Exception):
    pass
