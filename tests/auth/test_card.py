"""The card says how to authenticate (securitySchemes from the DRF classes), and the
extended agent card is served to authenticated callers (A2A §8.3.3, §3.1.11)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from a2a import types as sdk
from django.test import AsyncClient, override_settings
from google.protobuf.json_format import ParseDict
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from a2a_endpoint.testing import jsonrpc_request
from a2a_endpoint.types import Caller
from tests.auth.conftest import API_KEY, BASIC, BEARER, JWT, SESSION, TOKEN, User
from tests.conftest import RpcClient

pytestmark = pytest.mark.django_db(transaction=True)

# The normative A2A v1.0.1 JSON schema (a2a.json of the specification), kept beside the tests.
SCHEMA = json.loads((Path(__file__).parent / "a2a-v1.0.1.schema.json").read_text())


def _registry() -> Registry:
    """The schema's definitions under the file names its ``$ref``s use: "Agent Card" is
    lf.a2a.v1.AgentCard.jsonschema.json, "Struct" is google.protobuf.Struct.jsonschema.json."""
    resources = []
    for title, definition in SCHEMA["definitions"].items():
        name = title.replace(" ", "")
        package = "google.protobuf" if name in {"Struct", "Timestamp", "Value"} else "lf.a2a.v1"
        uri = f"{package}.{name}.jsonschema.json"
        resources.append((uri, Resource.from_contents(definition, DRAFT202012)))
    return Registry().with_resources(resources)


REGISTRY = _registry()


def validate(card: dict[str, Any]) -> None:
    """Valid against the v1.0 JSON schema, and parsed strictly by the a2a-sdk."""
    schema = {"$ref": "lf.a2a.v1.AgentCard.jsonschema.json"}
    validator = Draft202012Validator(schema, registry=REGISTRY)
    errors = sorted(validator.iter_errors(card), key=str)
    assert not errors, [f"{list(e.absolute_path)}: {e.message}" for e in errors]
    ParseDict(card, sdk.AgentCard())  # raises on any unknown field or wrong type


async def public_card() -> dict[str, Any]:
    response = await AsyncClient().get("/.well-known/agent-card.json")
    assert response.status_code == 200
    card = msgspec.json.decode(response.content)
    validate(card)
    return card


async def test_each_class_is_a_scheme_and_any_one_will_do(endpoint):
    endpoint(AUTHENTICATION_CLASSES=[BEARER, TOKEN, BASIC, SESSION, JWT, API_KEY])
    card = await public_card()
    assert card["securitySchemes"] == {
        "bearer": {
            "httpAuthSecurityScheme": {
                "scheme": "Bearer",
                "description": "Authorization: Bearer <token>",
            }
        },
        "token": {
            "httpAuthSecurityScheme": {
                "scheme": "Token",
                "description": "Authorization: Token <token>",
            }
        },
        "basic": {"httpAuthSecurityScheme": {"scheme": "Basic"}},
        "session": {
            "apiKeySecurityScheme": {
                "location": "cookie",
                "name": "sessionid",
                "description": "A Django session; requests also need the CSRF token header "
                "(X-CSRFToken).",
            }
        },
        "jwt": {"httpAuthSecurityScheme": {"scheme": "Bearer", "bearerFormat": "JWT"}},
        "apiKey": {"apiKeySecurityScheme": {"location": "header", "name": "X-API-Key"}},
    }
    assert card["securityRequirements"] == [
        {"schemes": {name: {}}} for name in ["bearer", "token", "basic", "session", "jwt", "apiKey"]
    ]


async def test_defaults_to_drf_default_classes(endpoint):
    endpoint(AUTHENTICATION_CLASSES=None)
    with override_settings(REST_FRAMEWORK={"DEFAULT_AUTHENTICATION_CLASSES": [BASIC]}):
        card = await public_card()
    assert list(card["securitySchemes"]) == ["basic"]
    card = await public_card()  # DRF's own defaults again: session, basic
    assert list(card["securitySchemes"]) == ["session", "basic"]


async def test_an_open_endpoint_requires_nothing(endpoint):
    endpoint(
        AUTHENTICATION_CLASSES=[BEARER],
        PERMISSION_CLASSES=["rest_framework.permissions.AllowAny"],
    )
    card = await public_card()
    assert list(card["securitySchemes"]) == ["bearer"]
    assert "securityRequirements" not in card  # [] is omitted in ProtoJSON


async def test_the_card_setting_overrides_what_is_derived(endpoint, settings):
    schemes = {
        "oidc": {"openIdConnectSecurityScheme": {"openIdConnectUrl": "https://id.example/.wk"}}
    }
    requirements = [{"schemes": {"oidc": {"list": ["openid"]}}}]
    card_setting = {
        **settings.A2A_ENDPOINT["CARD"],
        "securitySchemes": schemes,
        "securityRequirements": requirements,
    }
    endpoint(CARD=card_setting)
    card = await public_card()
    assert card["securitySchemes"] == schemes
    assert card["securityRequirements"] == requirements


async def test_the_sdk_client_reads_the_schemes(endpoint):
    import httpx
    from a2a.client import A2ACardResolver
    from django.core.asgi import get_asgi_application

    endpoint(AUTHENTICATION_CLASSES=[BEARER, JWT])
    transport = httpx.ASGITransport(app=get_asgi_application())
    async with httpx.AsyncClient(transport=transport) as http:
        resolved = await A2ACardResolver(http, "http://testserver").get_agent_card()
    assert resolved.security_schemes["bearer"].http_auth_security_scheme.scheme == "Bearer"
    assert resolved.security_schemes["jwt"].http_auth_security_scheme.bearer_format == "JWT"
    assert [list(r.schemes) for r in resolved.security_requirements] == [["bearer"], ["jwt"]]


# --- the extended card ------------------------------------------------------------------


EXTENDED = {
    "description": "What signed-in callers see.",
    "skills": [{"id": "secret", "name": "Secret", "description": "Members only.", "tags": ["x"]}],
    "provider": {"organization": "Example Org", "url": "https://example.com/members"},
}


async def extended(client: RpcClient) -> dict[str, Any]:
    card = await client.result("GetExtendedAgentCard")
    validate(card)
    return card


async def test_extended_card_merges_over_the_public_card(endpoint, alice: User):
    endpoint(EXTENDED_CARD=EXTENDED)
    public = await public_card()
    assert public["capabilities"]["extendedAgentCard"] is True
    assert "secret" not in [skill["id"] for skill in public["skills"]]
    card = await extended(alice.client())
    assert card["name"] == public["name"]  # from the public card
    assert card["description"] == EXTENDED["description"]
    assert [skill["id"] for skill in card["skills"]] == ["secret"]
    assert card["provider"] == EXTENDED["provider"]
    assert card["supportedInterfaces"] == public["supportedInterfaces"]
    assert card["securitySchemes"] == public["securitySchemes"]
    assert card["capabilities"]["extendedAgentCard"] is True


def per_caller(caller: Caller) -> dict[str, Any] | None:
    from django.contrib.auth import get_user_model

    # May use the ORM: it runs in a thread.
    username = get_user_model().objects.get(pk=caller.owner.removeprefix("user:")).username
    if username == "bob":
        return None
    return {"description": f"Card for {username}"}


async def test_extended_card_per_caller_and_not_configured_for_some(endpoint, alice, bob):
    endpoint(EXTENDED_CARD="tests.auth.test_card.per_caller")
    assert (await extended(alice.client()))["description"] == "Card for alice"
    error = await bob.client().error("GetExtendedAgentCard")
    assert error["code"] == -32007
    assert error["data"][0]["reason"] == "EXTENDED_AGENT_CARD_NOT_CONFIGURED"


async def test_without_the_setting_the_capability_is_off_and_the_method_unsupported(
    endpoint, alice
):
    card = await public_card()
    assert card["capabilities"].get("extendedAgentCard", False) is False
    error = await alice.client().error("GetExtendedAgentCard", {})
    assert error["code"] == -32004  # A2A §3.3.4: the capability is not declared


async def test_extended_card_needs_an_authenticated_caller_even_on_an_open_endpoint(
    endpoint, alice
):
    endpoint(
        EXTENDED_CARD=EXTENDED,
        PERMISSION_CLASSES=["rest_framework.permissions.AllowAny"],
        AUTHENTICATION_CLASSES=[BEARER],
    )
    response = await RpcClient().post(jsonrpc_request("GetExtendedAgentCard", id=9))
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Bearer"
    body = msgspec.json.decode(response.content)
    assert body["id"] == 9
    assert body["error"]["code"] == -31401
    # In a batch the other answers stand: the refusal is that request's error.
    batch = [jsonrpc_request("GetExtendedAgentCard", id=1), jsonrpc_request("ListTasks", {}, 2)]
    answers = msgspec.json.decode((await RpcClient().post(batch)).content)
    assert answers[0]["error"]["code"] == -31401
    assert "result" in answers[1]
    assert (await extended(alice.client()))["description"] == EXTENDED["description"]


async def test_a_broken_extended_card_setting_is_an_internal_error(endpoint, alice, caplog):
    endpoint(EXTENDED_CARD={"skills": "not a list"})
    error = await alice.client().error("GetExtendedAgentCard")
    assert error["code"] == -32603
    assert "EXTENDED_CARD" in caplog.text


# --- caching headers of the public card ---------------------------------------------------


async def test_the_card_has_last_modified_and_answers_if_modified_since(endpoint):
    first = await AsyncClient().get("/.well-known/agent-card.json")
    last_modified = first["Last-Modified"]
    assert last_modified.endswith(" GMT")
    again = await AsyncClient().get(
        "/.well-known/agent-card.json", headers={"If-Modified-Since": last_modified}
    )
    assert again.status_code == 304
    older = await AsyncClient().get(
        "/.well-known/agent-card.json",
        headers={"If-Modified-Since": "Mon, 01 Jan 2001 00:00:00 GMT"},
    )
    assert older.status_code == 200
    # With If-None-Match, the ETag decides (RFC 9110 §13.2.2).
    stale = await AsyncClient().get(
        "/.well-known/agent-card.json",
        headers={"If-Modified-Since": last_modified, "If-None-Match": '"other"'},
    )
    assert stale.status_code == 200
