"""The public agent card at /.well-known/agent-card.json (A2A §8): content, caching, SDK parse."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from a2a import types as sdk
from django.conf import settings
from django.test import AsyncClient, Client, override_settings
from google.protobuf.json_format import ParseDict

from a2a_endpoint.testing import jsonrpc_request, user_message

CARD_URL = "/.well-known/agent-card.json"
SKILL = {"id": "sum", "name": "Sum", "description": "Adds numbers.", "tags": ["math"]}
EXTENSIONS = [
    {"uri": "https://ex/a", "description": "Extension A", "required": True},
    {"uri": "https://ex/b"},
]


def a2a_settings(**overrides: Any) -> dict[str, Any]:
    return {**settings.A2A_ENDPOINT, **overrides}


def with_card(**card: Any) -> dict[str, Any]:
    return a2a_settings(CARD={**settings.A2A_ENDPOINT["CARD"], **card})


async def fetch(**headers: str) -> Any:
    return await AsyncClient().get(CARD_URL, headers=headers)


async def card(**headers: str) -> dict[str, Any]:
    response = await fetch(**headers)
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    return msgspec.json.decode(response.content)


def keys(value: Any) -> set[str]:
    """Every object key in a JSON value, at any depth."""
    if isinstance(value, dict):
        return set(value).union(*(keys(item) for item in value.values()))
    if isinstance(value, list):
        return set().union(*(keys(item) for item in value))
    return set()


# --- Content ----------------------------------------------------------------------------------


async def test_card_is_protojson_camel_case():
    body = await card()
    assert {"supportedInterfaces", "defaultInputModes", "defaultOutputModes"} <= set(body)
    assert not [key for key in keys(body) if "_" in key]


async def test_jsonrpc_interface_is_absolute_url():
    [interface] = (await card())["supportedInterfaces"]
    assert interface == {
        "url": "http://testserver/a2a/",
        "protocolBinding": "JSONRPC",
        "protocolVersion": "1.0",
    }


def test_interface_url_follows_the_request_host():
    response = Client().get(CARD_URL, headers={"Host": "agent.example.org:8443"})
    interface = msgspec.json.decode(response.content)["supportedInterfaces"][0]
    assert interface["url"] == "http://agent.example.org:8443/a2a/"


@pytest.mark.parametrize("base_url", ["https://agent.example.com", "https://agent.example.com/"])
async def test_base_url_setting_is_used(base_url):
    with override_settings(A2A_ENDPOINT=a2a_settings(BASE_URL=base_url)):
        interface = (await card())["supportedInterfaces"][0]
    assert interface["url"] == "https://agent.example.com/a2a/"


async def test_advertised_url_serves_jsonrpc(rpc):
    url = (await card())["supportedInterfaces"][0]["url"]
    path = url.removeprefix("http://testserver")
    response = await rpc.http.post(
        path, jsonrpc_request("GetExtendedAgentCard", {}), content_type="application/json"
    )
    assert msgspec.json.decode(response.content)["error"]["code"] == -32004


async def test_capabilities_declare_nothing_unserved():
    assert (await card())["capabilities"] == {
        "streaming": True,
        "pushNotifications": True,
        "extendedAgentCard": False,
    }


@pytest.mark.parametrize(
    ("capability", "method", "params", "code", "overrides"),
    [
        (
            "streaming",
            "SendStreamingMessage",
            {"message": user_message("echo x")},
            -32004,
            {"STREAMING": False},
        ),
        ("streaming", "SubscribeToTask", {"id": "t"}, -32004, {"STREAMING": False}),
        (
            "pushNotifications",
            "CreateTaskPushNotificationConfig",
            {"taskId": "t", "url": "https://example.com/hook"},
            -32003,
            {"PUSH_NOTIFICATIONS": False},
        ),
        ("extendedAgentCard", "GetExtendedAgentCard", {}, -32004, {}),
    ],
)
async def test_capabilities_match_what_is_served(rpc, capability, method, params, code, overrides):
    # A2A §3.3.4: a capability is declared true only when its methods work, and vice versa.
    # (Streaming is served by default: tests/streaming/ covers it switched on.)
    with override_settings(A2A_ENDPOINT=a2a_settings(**overrides)):
        declared = (await card())["capabilities"][capability]
        answer = await rpc.call(method, params)
    assert declared is ("result" in answer)
    assert answer["error"]["code"] == code


async def test_declared_extensions():
    with override_settings(A2A_ENDPOINT=a2a_settings(EXTENSIONS=EXTENSIONS)):
        capabilities = (await card())["capabilities"]
    assert capabilities["extensions"] == EXTENSIONS


async def test_skills_come_from_the_agent_class():
    from tests.agents import ScriptedAgent

    assert (await card())["skills"] == ScriptedAgent.skills


async def test_skills_follow_the_agent_setting():
    from a2a_endpoint.testing import EchoAgent

    with override_settings(A2A_ENDPOINT=a2a_settings(AGENT="a2a_endpoint.testing.EchoAgent")):
        assert (await card())["skills"] == EchoAgent.skills


async def test_card_skills_win_over_the_agent_class():
    with override_settings(A2A_ENDPOINT=with_card(skills=[SKILL])):
        assert (await card())["skills"] == [SKILL]


async def test_name_description_version_come_from_card():
    body = await card()
    configured = settings.A2A_ENDPOINT["CARD"]
    assert body["name"] == configured["name"]
    assert body["description"] == configured["description"]
    assert body["version"] == configured["version"]
    with override_settings(A2A_ENDPOINT=with_card(name="Renamed", version="2.3.4")):
        body = await card()
    assert (body["name"], body["version"]) == ("Renamed", "2.3.4")


async def test_other_card_fields_pass_through():
    provider = {"organization": "Example Org", "url": "https://example.org"}
    overrides = {
        "provider": provider,
        "documentationUrl": "https://example.org/docs",
        "defaultInputModes": ["text/plain", "application/json"],
    }
    with override_settings(A2A_ENDPOINT=with_card(**overrides)):
        body = await card()
    assert body["provider"] == provider
    assert body["documentationUrl"] == "https://example.org/docs"
    assert body["defaultInputModes"] == ["text/plain", "application/json"]


# --- HTTP caching -----------------------------------------------------------------------------


async def test_cache_control():
    assert (await fetch())["Cache-Control"] == "public, max-age=300"
    with override_settings(A2A_ENDPOINT=a2a_settings(CARD_MAX_AGE=42)):
        assert (await fetch())["Cache-Control"] == "public, max-age=42"


async def test_etag_is_present_and_stable():
    first, second = await fetch(), await fetch()
    etag = first["ETag"]
    assert etag.startswith('"')
    assert etag.endswith('"')
    assert len(etag) > 2
    assert second["ETag"] == etag
    assert second.content == first.content


async def test_etag_changes_with_the_card():
    before = (await fetch())["ETag"]
    with override_settings(A2A_ENDPOINT=with_card(description="Something else")):
        assert (await fetch())["ETag"] != before


@pytest.mark.parametrize(
    "if_none_match",
    ["{etag}", '"other", {etag}', "W/{etag}", "*"],
)
async def test_matching_if_none_match_is_304(if_none_match):
    etag = (await fetch())["ETag"]
    response = await fetch(**{"If-None-Match": if_none_match.format(etag=etag)})
    assert response.status_code == 304
    assert response.content == b""
    assert response["ETag"] == etag
    assert response["Cache-Control"] == "public, max-age=300"


async def test_card_is_readable_cross_origin():
    # Browser clients fetch the card from other origins; a 304 keeps the header too.
    response = await fetch()
    assert response["Access-Control-Allow-Origin"] == "*"
    revalidated = await fetch(**{"If-None-Match": response["ETag"]})
    assert revalidated.status_code == 304
    assert revalidated["Access-Control-Allow-Origin"] == "*"


async def test_other_if_none_match_is_200():
    response = await fetch(**{"If-None-Match": '"not-the-card"'})
    assert response.status_code == 200
    assert msgspec.json.decode(response.content)["name"]


async def test_head():
    get = await fetch()
    head = await AsyncClient().head(CARD_URL)
    assert head.status_code == 200
    assert head.content == b""
    assert head["ETag"] == get["ETag"]
    assert head["Content-Type"] == "application/json"


@pytest.mark.parametrize("method", ["post", "put", "delete"])
def test_other_methods_are_405(method):
    response = getattr(Client(), method)(CARD_URL)
    assert response.status_code == 405


# --- Interoperability -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides",
    [
        pytest.param({}, id="default"),
        pytest.param(
            {
                "CARD": {
                    **settings.A2A_ENDPOINT["CARD"],
                    "skills": [SKILL],
                    "provider": {"organization": "Example Org", "url": "https://example.org"},
                },
                "EXTENSIONS": EXTENSIONS,
                "BASE_URL": "https://agent.example.com",
            },
            id="full",
        ),
    ],
)
async def test_card_parses_with_the_official_sdk(overrides):
    with override_settings(A2A_ENDPOINT=a2a_settings(**overrides)):
        body = await card()
    parsed = ParseDict(body, sdk.AgentCard(), ignore_unknown_fields=False)
    assert parsed.name == body["name"]
    assert parsed.supported_interfaces[0].protocol_binding == "JSONRPC"
    assert parsed.capabilities.streaming is True
    assert [skill.id for skill in parsed.skills] == [skill["id"] for skill in body["skills"]]
    assert len(parsed.capabilities.extensions) == len(body["capabilities"].get("extensions", []))
