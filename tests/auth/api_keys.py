"""The tests' own DRF authentication class: an API key in a header, mapped to a user."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from rest_framework import authentication, exceptions

HEADER = "X-API-Key"
#: key -> username; a project would keep hashed keys in a model.
KEYS: dict[str, str] = {}


class ApiKeyAuthentication(authentication.BaseAuthentication):
    a2a_security_scheme = {"apiKeySecurityScheme": {"location": "header", "name": HEADER}}
    a2a_security_scheme_name = "apiKey"

    def authenticate(self, request: Any) -> tuple[Any, str] | None:
        key = request.headers.get(HEADER)
        if not key:
            return None
        username = KEYS.get(key)
        if username is None:
            raise exceptions.AuthenticationFailed("Unknown API key")
        return get_user_model().objects.get(username=username), key

    def authenticate_header(self, request: Any) -> str:
        return f'ApiKey header="{HEADER}"'
