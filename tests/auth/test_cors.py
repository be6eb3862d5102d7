"""Browser clients on other origins, through django-cors-headers as the sample project sets it
up: the preflight of the JSON-RPC endpoint, a unary answer and a stream readable cross-origin."""

from __future__ import annotations

from collections.abc import Iterator

import msgspec
import pytest
from corsheaders.defaults import default_headers
from django.conf import settings
from django.test import AsyncClient, override_settings

from a2a_endpoint.cors import A2A_REQUEST_HEADERS, A2A_RESPONSE_HEADERS
from a2a_endpoint.testing import jsonrpc_request, parse_sse, user_message
from project import settings as project_settings
from tests.auth.conftest import User

pytestmark = pytest.mark.django_db(transaction=True)

ORIGIN = "https://app.example.com"


@pytest.fixture
def cors(endpoint) -> Iterator[None]:
    """The sample project's CORS configuration, with ORIGIN allowed."""
    middleware = list(settings.MIDDLEWARE)
    middleware.insert(middleware.index("django.middleware.common.CommonMiddleware"), CORS)
    with override_settings(
        MIDDLEWARE=middleware,
        CORS_ALLOWED_ORIGINS=[ORIGIN],
        CORS_URLS_REGEX=project_settings.CORS_URLS_REGEX,
        CORS_ALLOW_HEADERS=project_settings.CORS_ALLOW_HEADERS,
        CORS_EXPOSE_HEADERS=project_settings.CORS_EXPOSE_HEADERS,
    ):
        yield


CORS = "corsheaders.middleware.CorsMiddleware"


def test_the_project_allows_the_a2a_headers():
    assert set(project_settings.CORS_ALLOW_HEADERS) >= {*default_headers, *A2A_REQUEST_HEADERS}
    assert "authorization" in project_settings.CORS_ALLOW_HEADERS
    assert list(A2A_RESPONSE_HEADERS) == project_settings.CORS_EXPOSE_HEADERS
    assert CORS in project_settings.MIDDLEWARE


@pytest.mark.parametrize("path", ["/a2a/", "/a2a"])
async def test_preflight_of_the_endpoint_succeeds_for_an_allowed_origin(cors, path):
    response = await AsyncClient().options(
        path,
        headers={
            "Origin": ORIGIN,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type, a2a-version, "
            "last-event-id",
        },
    )
    assert response.status_code == 200
    assert response["Access-Control-Allow-Origin"] == ORIGIN
    assert "POST" in response["Access-Control-Allow-Methods"]
    allowed = {h.strip() for h in response["Access-Control-Allow-Headers"].split(",")}
    assert {"authorization", "content-type", "a2a-version", "last-event-id"} <= allowed


async def test_preflight_from_another_origin_is_not_allowed(cors):
    response = await AsyncClient().options(
        "/a2a/",
        headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"},
    )
    assert not response.has_header("Access-Control-Allow-Origin")


async def test_unary_answer_and_refusal_are_readable_cross_origin(cors, alice: User):
    http = AsyncClient()
    body = msgspec.json.encode(jsonrpc_request("ListTasks", {}))
    answer = await http.post(
        "/a2a/", body, content_type="application/json", headers={"Origin": ORIGIN, **alice.bearer}
    )
    assert answer.status_code == 200
    assert answer["Access-Control-Allow-Origin"] == ORIGIN
    # A 401 too: the page can read the error and the challenge.
    refused = await http.post(
        "/a2a/", body, content_type="application/json", headers={"Origin": ORIGIN}
    )
    assert refused.status_code == 401
    assert refused["Access-Control-Allow-Origin"] == ORIGIN
    assert "WWW-Authenticate" in refused["Access-Control-Expose-Headers"]


async def test_the_stream_is_readable_cross_origin(cors, alice: User):
    request = jsonrpc_request("SendStreamingMessage", {"message": user_message("echo hi")})
    response = await AsyncClient().post(
        "/a2a/",
        msgspec.json.encode(request),
        content_type="application/json",
        headers={"Origin": ORIGIN, "Accept": "text/event-stream", **alice.bearer},
    )
    assert response.status_code == 200
    assert response["Content-Type"] == "text/event-stream"
    assert response["Access-Control-Allow-Origin"] == ORIGIN
    events = parse_sse([chunk async for chunk in response.streaming_content])
    assert events[-1]["data"]["result"]["statusUpdate"]["status"]["state"] == (
        "TASK_STATE_COMPLETED"
    )


async def test_the_card_is_public_to_every_origin(cors):
    response = await AsyncClient().get(
        "/.well-known/agent-card.json", headers={"Origin": "https://anyone.example"}
    )
    assert response.status_code == 200
    assert response["Access-Control-Allow-Origin"] == "*"
