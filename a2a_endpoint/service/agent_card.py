"""The agent card (A2A §8): built from the CARD setting, the agent's skills and what is served."""

from __future__ import annotations

import functools
from typing import Any

import msgspec
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed

from a2a_endpoint import security, types
from a2a_endpoint.conf import SETTING_NAME, app_settings

PROTOCOL_VERSION = "1.0"
SUPPORTED_MAJOR_VERSIONS = frozenset({"1"})


def _skills(card: dict[str, Any]) -> list[Any]:
    if "skills" in card:
        return list(card["skills"])
    agent = app_settings.AGENT
    return list(getattr(agent, "skills", []) or [])


def _public_card(jsonrpc_url: str) -> dict[str, Any]:
    card: dict[str, Any] = {
        "version": "1.0.0",
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        **app_settings.CARD,
    }
    card["skills"] = _skills(card)
    card["capabilities"] = {
        "streaming": bool(app_settings.STREAMING),
        "pushNotifications": bool(app_settings.PUSH_NOTIFICATIONS),
        "extendedAgentCard": bool(app_settings.EXTENDED_CARD),
        "extensions": list(app_settings.EXTENSIONS),
    }
    card["supportedInterfaces"] = [
        {"url": jsonrpc_url, "protocolBinding": "JSONRPC", "protocolVersion": PROTOCOL_VERSION}
    ]
    # How to authenticate (A2A §8.3.3), from the authentication classes unless CARD says.
    if "securitySchemes" not in card:
        card["securitySchemes"] = security.security_schemes()
    if "securityRequirements" not in card:
        card["securityRequirements"] = security.security_requirements(card["securitySchemes"])
    return card


@functools.lru_cache(maxsize=16)
def build_agent_card(jsonrpc_url: str) -> types.AgentCard:
    """The public card, with ``jsonrpc_url`` as the JSON-RPC interface (absolute URL)."""
    return msgspec.convert(_public_card(jsonrpc_url), types.AgentCard)


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` merged into ``base``: objects key by key, anything else replaced."""
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def extended_agent_card(caller: types.Caller, jsonrpc_url: str) -> types.AgentCard | None:
    """The card for an authenticated ``caller`` (A2A §3.1.11): ``EXTENDED_CARD`` merged over
    the public card, or None when its callable has none for this caller.

    May run the project's callable (which may use the ORM): call it off the event loop.
    """
    extended = app_settings.EXTENDED_CARD
    if callable(extended):
        extended = extended(caller)
    if extended is None:
        return None
    public = _public_card(jsonrpc_url)
    card = _merge(public, dict(extended))
    # What is served is not the extended card's to change.
    card["supportedInterfaces"] = public["supportedInterfaces"]
    card["capabilities"]["extendedAgentCard"] = True
    try:
        return msgspec.convert(card, types.AgentCard)
    except msgspec.ValidationError as exc:
        raise ImproperlyConfigured(f"A2A_ENDPOINT['EXTENDED_CARD'] is not a card: {exc}") from exc


def required_extensions() -> frozenset[str]:
    return frozenset(ext["uri"] for ext in app_settings.EXTENSIONS if ext.get("required"))


def declared_extensions() -> frozenset[str]:
    return frozenset(ext["uri"] for ext in app_settings.EXTENSIONS)


def _reset(*, setting: str, **kwargs: Any) -> None:
    if setting in {SETTING_NAME, "REST_FRAMEWORK"}:
        build_agent_card.cache_clear()


setting_changed.connect(_reset)
