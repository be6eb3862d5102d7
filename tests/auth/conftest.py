"""The endpoint closed, as a deployment runs it: users, their credentials, and the clients."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.core.cache import cache
from django.test import override_settings
from rest_framework.authtoken.models import Token

from tests.conftest import RpcClient

BEARER = "a2a_endpoint.authentication.BearerTokenAuthentication"
TOKEN = "rest_framework.authentication.TokenAuthentication"
BASIC = "rest_framework.authentication.BasicAuthentication"
SESSION = "rest_framework.authentication.SessionAuthentication"
JWT = "rest_framework_simplejwt.authentication.JWTAuthentication"
API_KEY = "tests.auth.api_keys.ApiKeyAuthentication"
IS_AUTHENTICATED = "rest_framework.permissions.IsAuthenticated"
PASSWORD = "correct horse battery staple"


def closed(**overrides: Any) -> dict[str, Any]:
    """The suite's A2A_ENDPOINT, closed (DRF's IsAuthenticated) with the default resolver."""
    return {
        **settings.A2A_ENDPOINT,
        "PERMISSION_CLASSES": [IS_AUTHENTICATED],
        "CALLER_RESOLVER": "a2a_endpoint.auth.resolve_caller",
        "AUTHENTICATION_CLASSES": [BEARER, TOKEN, BASIC, JWT, API_KEY],
        **overrides,
    }


@pytest.fixture
def endpoint() -> Iterator[Any]:
    """Closed for the test; ``endpoint(**overrides)`` changes it again within the test."""
    stack: list[Any] = []

    def configure(**overrides: Any) -> None:
        while stack:
            stack.pop().disable()
        override = override_settings(A2A_ENDPOINT=closed(**overrides))
        override.enable()
        stack.append(override)

    configure()
    cache.clear()  # throttle history
    yield configure
    while stack:
        stack.pop().disable()
    cache.clear()


class User:
    def __init__(self, user: Any) -> None:
        self.user = user
        self.owner = f"user:{user.pk}"
        self.token = Token.objects.create(user=user).key

    @property
    def bearer(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    @property
    def basic(self) -> dict[str, str]:
        raw = f"{self.user.username}:{PASSWORD}".encode()
        return {"Authorization": "Basic " + base64.b64encode(raw).decode()}

    @property
    def jwt(self) -> dict[str, str]:
        from rest_framework_simplejwt.tokens import AccessToken

        return {"Authorization": f"Bearer {AccessToken.for_user(self.user)}"}

    def client(self, scheme: str = "bearer") -> RpcClient:
        client = RpcClient()
        client.headers = dict(getattr(self, scheme))
        return client


def _user(django_user_model: Any, name: str) -> User:
    return User(django_user_model.objects.create_user(name, password=PASSWORD))


@pytest.fixture
def alice(db: Any, django_user_model: Any) -> User:
    return _user(django_user_model, "alice")


@pytest.fixture
def bob(db: Any, django_user_model: Any) -> User:
    return _user(django_user_model, "bob")
