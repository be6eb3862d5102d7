"""Guards against silent misdeployment: streams under WSGI, a memory bus shared by
processes (E040, W040, W041, docs/deployment.md)."""

import sys
from typing import Any

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register

from a2a_endpoint.conf import DEFAULTS, SETTING_NAME


def _uses_celery(user: dict[str, Any]) -> bool:
    backend = user.get("EXECUTION_BACKEND") or DEFAULTS["EXECUTION_BACKEND"]
    return backend == "celery" or (isinstance(backend, str) and "celery" in backend.lower())


def _cross_process_bus(user: dict[str, Any]) -> bool:
    bus = user.get("EVENT_BUS") or DEFAULTS["EVENT_BUS"]
    if bus == "memory" or (isinstance(bus, str) and bus.endswith("InMemoryEventBus")):
        return False
    if bus == "channels" or (isinstance(bus, str) and bus.endswith("ChannelLayerEventBus")):
        layers = getattr(settings, "CHANNEL_LAYERS", {}) or {}
        backend = layers.get("default", {}).get("BACKEND", "")
        return bool(backend) and not backend.endswith("InMemoryChannelLayer")
    return True  # a custom bus: trust it


def _runserver_serves_wsgi() -> bool:
    """``runserver`` is the command running, and it serves WSGI: Django's own (or
    staticfiles'), not daphne's (first in INSTALLED_APPS), or daphne's with ``--noasgi``."""
    if sys.argv[1:2] != ["runserver"]:
        return False
    from django.core.management import get_commands, load_command_class

    command = load_command_class(get_commands().get("runserver", "django.core"), "runserver")
    asgi = any(cls.__module__.startswith("daphne.") for cls in type(command).__mro__)
    return not asgi or "--noasgi" in sys.argv


def _guard_problems(user: dict[str, Any]) -> list[Error | Warning]:
    """E040: MEMORY_BUS_HEARTBEAT's value; W040: streams under a WSGI runserver."""
    problems: list[Error | Warning] = []
    heartbeat = user.get("MEMORY_BUS_HEARTBEAT", DEFAULTS["MEMORY_BUS_HEARTBEAT"])
    if isinstance(heartbeat, bool) or not isinstance(heartbeat, int | float) or heartbeat < 0:
        problems.append(
            Error(
                f"{SETTING_NAME}['MEMORY_BUS_HEARTBEAT'] must be a number of seconds >= 0, "
                f"not {heartbeat!r}.",
                hint="e.g. 10.0 (the default); 0 turns the heartbeat off.",
                id="a2a_endpoint.E040",
            )
        )
    if user.get("STREAMING", True) and _runserver_serves_wsgi():
        problems.append(
            Warning(
                "STREAMING is on, but this runserver serves WSGI: SendStreamingMessage and "
                "SubscribeToTask will be refused (-32004), as WSGI cannot hold a stream open.",
                hint="Put 'daphne' first in INSTALLED_APPS and set ASGI_APPLICATION (runserver "
                "then serves ASGI), or serve with `daphne myproject.asgi:application`; or set "
                f"{SETTING_NAME}['STREAMING'] to False.",
                id="a2a_endpoint.W040",
            )
        )
    return problems


@register(Tags.compatibility)
def check_guards(app_configs: Any = None, **kwargs: Any) -> list[Error | Warning]:
    user = getattr(settings, SETTING_NAME, None)
    return _guard_problems(user) if isinstance(user, dict) else []


@register(Tags.compatibility, deploy=True)
def check_deploy_guards(app_configs: Any = None, **kwargs: Any) -> list[Warning]:
    """W041 (``check --deploy``): an in-process bus with DEBUG off, which serves one web
    process only. With the Celery backend it is error E009 already."""
    user = getattr(settings, SETTING_NAME, None)
    if not isinstance(user, dict) or settings.DEBUG or _uses_celery(user):
        return []
    if _cross_process_bus(user):
        return []
    return [
        Warning(
            "The event bus is in-process (EVENT_BUS 'memory', or Channels' "
            "InMemoryChannelLayer): with more than one web process, streams and blocking "
            "sends miss the events of tasks that run in another process.",
            hint="Set EVENT_BUS to 'channels' with a channels_redis CHANNEL_LAYERS backend, or "
            "silence a2a_endpoint.W041 if this project runs one web process (a second one "
            "logs an ERROR and /healthz reports it: docs/deployment.md).",
            id="a2a_endpoint.W041",
        )
    ]
