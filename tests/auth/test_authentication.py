"""Every JSON-RPC request is authenticated by DRF classes, then permitted and throttled.

Each DRF class runs unchanged: DRF's token (both keywords), basic and session classes,
simplejwt's JWTAuthentication and the tests' own API-key class. A refusal is an HTTP 401
(with every challenge), 403 or 429 (with Retry-After) whose body is a JSON-RPC error.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from django.test import AsyncClient
from rest_framework.throttling import AnonRateThrottle, UserRateThrottle

from a2a_endpoint import models
from a2a_endpoint.testing import jsonrpc_request, parse_sse, user_message
from tests.auth import api_keys
from tests.auth.conftest import BASIC, BEARER, JWT, SESSION, TOKEN
from tests.conftest import RpcClient

pytestmark = pytest.mark.django_db(transaction=True)


def send(text: str = "echo hi", **configuration: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"message": user_message(text)}
    if configuration:
        params["configuration"] = configuration
    return jsonrpc_request("SendMessage", params, id="req-7")


def refusal(response: Any, status: int, code: int, request_id: Any = "req-7") -> dict[str, Any]:
    """A refusal: JSON (never HTML), the JSON-RPC error with ``code``, the id echoed."""
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/json"
    body = msgspec.json.decode(response.content)
    assert body["jsonrpc"] == "2.0"
    assert body["id"] == request_id
    assert "result" not in body
    assert body["error"]["code"] == code
    assert body["error"]["message"]
    return body["error"]


async def owners() -> list[str]:
    return [owner async for owner in models.Task.objects.values_list("owner", flat=True)]


# --- each kind of credentials -------------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["bearer", "basic", "jwt"])
async def test_credentials_authenticate_the_caller_who_owns_the_task(endpoint, alice, scheme):
    result = await alice.client(scheme).result("SendMessage", send()["params"])
    assert result["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert await owners() == [alice.owner]


async def test_drf_stock_token_class_with_its_own_keyword(endpoint, alice):
    endpoint(AUTHENTICATION_CLASSES=[TOKEN])
    client = RpcClient()
    client.headers = {"Authorization": f"Token {alice.token}"}
    await client.result("SendMessage", send()["params"])
    assert await owners() == [alice.owner]
    # The same key with the other keyword is not this class's: no credentials at all.
    response = await RpcClient().post(send(), Authorization=f"Bearer {alice.token}")
    refusal(response, 401, -31401)
    assert response["WWW-Authenticate"] == "Token"


async def test_an_api_key_class_of_the_project(endpoint, alice, monkeypatch):
    monkeypatch.setitem(api_keys.KEYS, "k-123", "alice")
    await RpcClient().post(send(), **{"X-API-Key": "k-123"})
    assert await owners() == [alice.owner]
    error = refusal(await RpcClient().post(send(), **{"X-API-Key": "k-999"}), 401, -31401)
    assert error["message"] == "Unknown API key"


async def test_session_with_csrf_token(endpoint, alice):
    endpoint(AUTHENTICATION_CLASSES=[SESSION])
    http = AsyncClient(enforce_csrf_checks=True)
    await http.alogin(username="alice", password="correct horse battery staple")
    page = await http.get("/admin/login/")  # a page that sets the CSRF cookie
    assert page.status_code == 200
    csrf = http.cookies["csrftoken"].value
    body = msgspec.json.encode(send())
    answer = await http.post(
        "/a2a/", body, content_type="application/json", headers={"X-CSRFToken": csrf}
    )
    assert answer.status_code == 200, answer.content
    assert await owners() == [alice.owner]
    # DRF's session authentication enforces CSRF: a signed-in browser tricked into posting
    # without the token is refused, and nothing is stored.
    forged = await http.post("/a2a/", body, content_type="application/json")
    error = refusal(forged, 403, -31403)
    assert "CSRF" in error["message"]
    assert await owners() == [alice.owner]


# --- refusals -------------------------------------------------------------------------------


async def test_no_credentials_is_401_with_every_challenge(endpoint, db):
    endpoint(AUTHENTICATION_CLASSES=[SESSION, BEARER, BASIC, JWT])
    response = await RpcClient().post(send())
    error = refusal(response, 401, -31401)
    assert error["data"][0]["reason"] == "UNAUTHENTICATED"
    # DRF alone would answer 403 here: the session class, first, has no challenge.
    assert response["WWW-Authenticate"] == 'Bearer, Basic realm="api", Bearer realm="api"'
    assert await owners() == []


@pytest.mark.parametrize(
    "header",
    [
        "Bearer not-a-token",
        "Bearer",  # no key
        "Bearer a b",  # spaces
        "Basic !!!",  # not base64
        "Basic " + "YWxpY2U6d3Jvbmc=",  # alice:wrong
        "Bearer eyJhbGciOiJIUzI1NiJ9.e30.c2lnbmF0dXJl",  # a JWT that is not ours
    ],
)
async def test_bad_credentials_are_401_and_store_nothing(endpoint, alice, header):
    endpoint(AUTHENTICATION_CLASSES=[BEARER, BASIC])
    response = await RpcClient().post(send(), Authorization=header)
    refusal(response, 401, -31401)
    assert response["WWW-Authenticate"] == 'Bearer, Basic realm="api"'
    assert await owners() == []


async def test_session_only_has_no_challenge_so_anonymous_is_403(endpoint, db):
    endpoint(AUTHENTICATION_CLASSES=[SESSION])
    response = await RpcClient().post(send())
    refusal(response, 403, -31401)
    assert not response.has_header("WWW-Authenticate")


async def test_refusal_id_is_null_when_the_body_is_not_one_request(endpoint, db):
    batch = [send(), send()]
    refusal(await RpcClient().post(batch), 401, -31401, request_id=None)
    refusal(await RpcClient().post(b"{not json"), 401, -31401, request_id=None)
    refusal(await RpcClient().post({"id": {"an": "object"}}), 401, -31401, request_id=None)


async def test_permission_denied_is_403(endpoint, alice, bob):
    endpoint(PERMISSION_CLASSES=["rest_framework.permissions.IsAdminUser"])
    error = refusal(await alice.client().post(send()), 403, -31403)
    assert error["data"][0]["reason"] == "PERMISSION_DENIED"
    assert await owners() == []
    # A project's own permission class sees the user DRF authenticated.
    endpoint(PERMISSION_CLASSES=["tests.auth.test_authentication.AdminOrAlice"])
    assert (await alice.client().post(send())).status_code == 200
    refusal(await bob.client().post(send()), 403, -31403)
    assert await owners() == [alice.owner]


class TwoPerMinute(UserRateThrottle):
    rate = "2/min"


class OnePerMinuteAnonymous(AnonRateThrottle):
    rate = "1/min"


async def test_throttled_is_429_with_retry_after(endpoint, alice, bob):
    endpoint(THROTTLE_CLASSES=[TwoPerMinute])
    client = alice.client()
    for _ in range(2):
        assert (await client.post(send())).status_code == 200
    response = await client.post(send())
    error = refusal(response, 429, -31429)
    assert error["data"][0]["reason"] == "RESOURCE_EXHAUSTED"
    assert 1 <= int(response["Retry-After"]) <= 60
    assert len(await owners()) == 2
    # Rates are per caller: bob is not held back by alice.
    assert (await bob.client().post(send())).status_code == 200


async def test_anonymous_throttle_on_an_open_endpoint(endpoint, db):
    endpoint(
        PERMISSION_CLASSES=["rest_framework.permissions.AllowAny"],
        THROTTLE_CLASSES=[OnePerMinuteAnonymous],
    )
    assert (await RpcClient().post(send())).status_code == 200
    refusal(await RpcClient().post(send()), 429, -31429)


async def test_scoped_throttle_uses_the_endpoint_scope(endpoint, alice, settings):
    from rest_framework.throttling import ScopedRateThrottle

    # DRF reads the rates when its throttle module is imported (SimpleRateThrottle's class
    # attribute), so set them where it looks.
    rates = {"a2a": "1/min"}
    settings.REST_FRAMEWORK = {"DEFAULT_THROTTLE_RATES": rates}
    original = ScopedRateThrottle.THROTTLE_RATES
    ScopedRateThrottle.THROTTLE_RATES = rates
    try:
        endpoint(THROTTLE_CLASSES=[ScopedRateThrottle])
        assert (await alice.client().post(send())).status_code == 200
        refusal(await alice.client().post(send()), 429, -31429)
        endpoint(THROTTLE_CLASSES=[ScopedRateThrottle], THROTTLE_SCOPE="elsewhere")
        # A scope with no rate is not throttled (DRF's rule).
        assert (await alice.client().post(send())).status_code == 200
    finally:
        ScopedRateThrottle.THROTTLE_RATES = original


# --- streams, the card ---------------------------------------------------------------------


async def test_streams_are_authenticated_before_they_open(endpoint, alice):
    request = jsonrpc_request("SendStreamingMessage", {"message": user_message("echo hi")}, "s")
    response = await RpcClient().post(request, Accept="text/event-stream")
    refusal(response, 401, -31401, request_id="s")
    assert await owners() == []

    opened = await alice.client().post(request, Accept="text/event-stream")
    assert opened.status_code == 200
    assert opened["Content-Type"] == "text/event-stream"
    events = parse_sse([chunk async for chunk in opened.streaming_content])
    assert events[-1]["data"]["result"]["statusUpdate"]["status"]["state"] == (
        "TASK_STATE_COMPLETED"
    )
    assert await owners() == [alice.owner]


async def test_the_public_card_stays_public(endpoint, db):
    response = await AsyncClient().get("/.well-known/agent-card.json")
    assert response.status_code == 200
    assert msgspec.json.decode(response.content)["name"]


async def test_django_login_alone_no_longer_authenticates_without_the_session_class(
    endpoint, alice
):
    """Only the configured classes decide: a Django session is not a credential unless
    SessionAuthentication is one of them."""
    endpoint(AUTHENTICATION_CLASSES=[BEARER])
    http = AsyncClient()
    await http.alogin(username="alice", password="correct horse battery staple")
    response = await http.post(
        "/a2a/", msgspec.json.encode(send()), content_type="application/json"
    )
    refusal(response, 401, -31401)


async def test_resolver_maps_the_authenticated_user(endpoint, alice):
    endpoint(CALLER_RESOLVER="tests.auth.test_authentication.by_username")
    await alice.client().result("SendMessage", send()["params"])
    assert await owners() == ["name:alice"]


def by_username(request: Any) -> Any:
    from a2a_endpoint.types import Caller

    assert request.auth is not None  # DRF's Token object, set on the Django request
    return Caller(owner=f"name:{request.user.username}")


class AdminOrAlice:
    """A permission class of the project's, reading the user DRF authenticated."""

    def has_permission(self, request: Any, view: Any) -> bool:
        return request.user.is_staff or request.user.username == "alice"


async def test_the_admin_manages_tokens(endpoint, alice, django_user_model):
    await django_user_model.objects.acreate_superuser("root", password="pw")
    http = AsyncClient()
    await http.alogin(username="root", password="pw")
    listing = await http.get("/admin/authtoken/tokenproxy/")
    assert listing.status_code == 200
    assert b"alice" in listing.content
