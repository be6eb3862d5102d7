"""The agent card (A2A §8): built from the CARD setting, the agent's skills and what is served."""

from __future__ import annotations

import functools
from typing import Any

import msgspec
from django.core.signals import setting_changed

from a2a_endpoint import types
from a2a_endpoint.conf import SETTING_NAME, app_settings

PROTOCOL_VERSION = "1.0"
SUPPORTED_MAJOR_VERSIONS = frozenset({"1"})

# Served right now; a capability is declared true only once its methods work (A2A §3.3.4).
CAPABILITIES = {"pushNotifications": False, "extendedAgentCard": False}


def _skills(card: dict[str, Any]) -> list[Any]:
    if "skills" in card:
        return list(card["skills"])
    agent = app_settings.AGENT
    return list(getattr(agent, "skills", []) or [])


@functools.lru_cache(maxsize=16)
def build_agent_card(jsonrpc_url: str) -> types.AgentCard:
    """The public card, with ``jsonrpc_url`` as the JSON-RPC interface (absolute URL)."""
    card: dict[str, Any] = {
        "version": "1.0.0",
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        **app_settings.CARD,
    }
    card["skills"] = _skills(card)
    card["capabilities"] = {
        "streaming": bool(app_settings.STREAMING),
        **CAPABILITIES,
        "extensions": list(app_settings.EXTENSIONS),
    }
    card["supportedInterfaces"] = [
        {"url": jsonrpc_url, "protocolBinding": "JSONRPC", "protocolVersion": PROTOCOL_VERSION}
    ]
    return msgspec.convert(card, types.AgentCard)


def required_extensions() -> frozenset[str]:
    return frozenset(ext["uri"] for ext in app_settings.EXTENSIONS if ext.get("required"))


def declared_extensions() -> frozenset[str]:
    return frozenset(ext["uri"] for ext in app_settings.EXTENSIONS)


def _reset(*, setting: str, **kwargs: Any) -> None:
    if setting == SETTING_NAME:
        build_agent_card.cache_clear()


setting_changed.connect(_reset)
