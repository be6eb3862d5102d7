"""System checks: misconfiguration of A2A_ENDPOINT is reported at startup, with a hint.

The settings' checks live here; ``retention``, ``logs`` and ``guards`` hold their own
(the metrics' are ``a2a_endpoint.metrics.checks``). Importing this package registers them.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register
from django.utils.module_loading import import_string

from a2a_endpoint.checks.guards import (
    _cross_process_bus,
    _uses_celery,
    check_deploy_guards,
    check_guards,
)
from a2a_endpoint.checks.logs import _log_problems
from a2a_endpoint.checks.retention import _retention_errors
from a2a_endpoint.conf import DEFAULTS, SETTING_NAME
from a2a_endpoint.metrics import checks as metrics_checks  # noqa: F401  (registers E030-W039)


def _agent_errors(path: Any) -> list[Error]:
    if not path:
        return [
            Error(
                f"{SETTING_NAME}['AGENT'] is not set.",
                hint="Name your AgentExecutor subclass, e.g. 'myproject.agents.MyAgent'.",
                id="a2a_endpoint.E001",
            )
        ]
    try:
        agent = import_string(path) if isinstance(path, str) else path
    except ImportError as exc:
        return [
            Error(
                f"{SETTING_NAME}['AGENT'] cannot be imported: {exc}",
                hint="Check the dotted path and that its module imports cleanly.",
                id="a2a_endpoint.E002",
            )
        ]
    from a2a_endpoint.execution.executor import AgentExecutor

    if not (isinstance(agent, type) and issubclass(agent, AgentExecutor)):
        return [
            Error(
                f"{SETTING_NAME}['AGENT'] ({path}) is not an AgentExecutor subclass.",
                hint="Subclass a2a_endpoint.execution.AgentExecutor.",
                id="a2a_endpoint.E003",
            )
        ]
    return []


def _extension_errors(extensions: Any) -> list[Error]:
    valid = isinstance(extensions, list | tuple) and all(
        isinstance(ext, dict) and isinstance(ext.get("uri"), str) and ext["uri"]
        for ext in extensions
    )
    if valid:
        return []
    return [
        Error(
            f"{SETTING_NAME}['EXTENSIONS'] must be a list of dicts, each with a 'uri'.",
            hint='e.g. [{"uri": "https://example.com/ext/v1", "required": False}]',
            id="a2a_endpoint.E007",
        )
    ]


def _card_errors() -> list[Error]:
    """Build the card once, so a malformed CARD fails at startup, not on the first GET."""
    import msgspec

    from a2a_endpoint.service.agent_card import build_agent_card

    try:
        build_agent_card("http://localhost/a2a/")
    except (msgspec.ValidationError, TypeError, ValueError) as exc:
        return [
            Error(
                f"{SETTING_NAME}['CARD'] does not make a valid agent card: {exc}",
                hint="CARD uses the ProtoJSON names of AgentCard (camelCase), e.g. skills need "
                "id, name, description and tags.",
                id="a2a_endpoint.E008",
            )
        ]
    return []


def _celery_errors(user: dict[str, Any]) -> list[Error | Warning]:
    """The Celery backend needs Celery, a cross-process bus, and a real database server."""
    if not _uses_celery(user):
        return []
    problems: list[Error | Warning] = []
    try:
        import celery  # noqa: F401
    except ImportError:
        problems.append(
            Error(
                "EXECUTION_BACKEND is 'celery' but Celery is not installed.",
                hint="pip install 'a2a-endpoint[celery]'",
                id="a2a_endpoint.E010",
            )
        )
    if not _cross_process_bus(user):
        problems.append(
            Error(
                "The Celery backend needs a cross-process event bus: worker events would "
                "never reach the web processes.",
                hint='Set EVENT_BUS to "channels" with a channels_redis CHANNEL_LAYERS backend '
                "(not InMemoryChannelLayer).",
                id="a2a_endpoint.E009",
            )
        )
    engine = settings.DATABASES.get("default", {}).get("ENGINE", "")
    if engine.endswith("sqlite3"):
        problems.append(
            Warning(
                "SQLite with the Celery backend: workers and web processes write one file.",
                hint="Use PostgreSQL in production (DATABASE_URL).",
                id="a2a_endpoint.W001",
            )
        )
    return problems


def _access_problems() -> list[Error | Warning]:
    """The DRF classes import; the endpoint is not open by accident; the card tells how to
    authenticate with each class."""
    from a2a_endpoint import security

    try:
        classes = security.authentication_classes()
        security.permission_classes()
        security.throttle_classes()
    except ImportError as exc:
        return [
            Error(
                f"An authentication, permission or throttle class cannot be imported: {exc}",
                hint=f"Check {SETTING_NAME}['AUTHENTICATION_CLASSES'], 'PERMISSION_CLASSES', "
                "'THROTTLE_CLASSES' and REST_FRAMEWORK's defaults.",
                id="a2a_endpoint.E011",
            )
        ]
    problems: list[Error | Warning] = []
    if security.is_open() and not settings.DEBUG:
        problems.append(
            Warning(
                "The A2A endpoint is open to anonymous callers with DEBUG off: anyone can "
                "send messages, and all anonymous callers share one owner (they see and "
                "cancel each other's tasks).",
                hint=f"Set {SETTING_NAME}['PERMISSION_CLASSES'] to "
                "['rest_framework.permissions.IsAuthenticated'] (the default), or silence "
                "a2a_endpoint.W010 if the endpoint is meant to be public.",
                id="a2a_endpoint.W010",
            )
        )
    card = getattr(settings, SETTING_NAME, {}).get("CARD") or {}
    undescribed = [cls for cls in classes if security.describe(cls) is None]
    if undescribed and "securitySchemes" not in card:
        names = ", ".join(f"{cls.__module__}.{cls.__qualname__}" for cls in undescribed)
        problems.append(
            Warning(
                f"The agent card cannot say how to authenticate with {names}.",
                hint="Give the class an a2a_security_scheme attribute (a SecurityScheme, "
                f"e.g. {{'apiKeySecurityScheme': {{'location': 'header', 'name': 'X-API-Key'}}}})"
                f", or set {SETTING_NAME}['CARD']['securitySchemes'] (docs/security.md).",
                id="a2a_endpoint.W011",
            )
        )
    return problems


def _push_warnings(user: dict[str, Any]) -> list[Warning]:
    """W012: push webhooks that may reach the server's own network, with DEBUG off."""
    loosened = [key for key in ("PUSH_ALLOW_HTTP", "PUSH_ALLOW_PRIVATE_NETWORKS") if user.get(key)]
    if not loosened or settings.DEBUG or not user.get("PUSH_NOTIFICATIONS", True):
        return []
    return [
        Warning(
            f"{SETTING_NAME}: {' and '.join(loosened)} on with DEBUG off: clients can make "
            "this server POST to plain-http or internal addresses (SSRF guard loosened).",
            hint="Turn them off in production, or use PUSH_ALLOWED_HOSTS to name the "
            "internal receivers that are meant to be reached (docs/push.md).",
            id="a2a_endpoint.W012",
        )
    ]


@register(Tags.compatibility)
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[Error | Warning]:
    user = getattr(settings, SETTING_NAME, None)
    if not isinstance(user, dict):
        return [
            Error(
                f"The {SETTING_NAME} setting is missing or not a dict.",
                hint=f'Add {SETTING_NAME} = {{"AGENT": "myproject.agents.MyAgent"}} to settings.',
                id="a2a_endpoint.E000",
            )
        ]
    problems: list[Error | Warning] = []
    unknown = sorted(set(user) - set(DEFAULTS))
    if unknown:
        problems.append(
            Error(
                f"Unknown {SETTING_NAME} keys: {', '.join(unknown)}.",
                hint=f"Valid keys: {', '.join(sorted(DEFAULTS))}.",
                id="a2a_endpoint.E004",
            )
        )
    problems += _agent_errors(user.get("AGENT"))
    card = user.get("CARD") or {}
    if not isinstance(card, dict) or not card.get("name") or not card.get("description"):
        problems.append(
            Error(
                f"{SETTING_NAME}['CARD'] needs a 'name' and a 'description'.",
                hint="They are REQUIRED fields of the agent card (A2A §8).",
                id="a2a_endpoint.E005",
            )
        )
    problems += _extension_errors(user.get("EXTENSIONS") or [])
    problems += _celery_errors(user)
    problems += _access_problems()
    problems += _push_warnings(user)
    problems += _log_problems(user)
    problems += _retention_errors(user)
    if not any(isinstance(p, Error) for p in problems):
        problems += _card_errors()
    if not settings.USE_TZ:
        problems.append(
            Error(
                "USE_TZ must be True.",
                hint="A2A timestamps are UTC; a2a_endpoint stores aware datetimes.",
                id="a2a_endpoint.E006",
            )
        )
    return problems


# --- Health and guards (docs/deployment.md): a2a_endpoint.E040-E049, W040-W049 -------------


__all__ = ["check_deploy_guards", "check_guards", "check_settings"]
