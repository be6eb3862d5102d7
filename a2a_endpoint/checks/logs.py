"""Checks of the structured logs' settings (E050, E051, W050, docs/logging.md)."""

import re
from typing import Any

from django.conf import settings
from django.core.checks import Error, Warning
from django.utils.module_loading import import_string

from a2a_endpoint.conf import SETTING_NAME

_HEADER_NAME = re.compile(r"[A-Za-z0-9-]{1,64}")


def _uses_formatter(logging_setting: Any) -> bool:
    """Some formatter of ``LOGGING`` is a2a_endpoint.logs.Formatter (or a subclass)."""
    from a2a_endpoint.logs import Formatter

    formatters = (logging_setting or {}).get("formatters") or {}
    for config in formatters.values():
        named = config.get("()") or config.get("class") if isinstance(config, dict) else None
        try:
            cls = import_string(named) if isinstance(named, str) else named
        except ImportError:
            continue
        if isinstance(cls, type) and issubclass(cls, Formatter):
            return True
    return False


def _log_problems(user: dict[str, Any]) -> list[Error | Warning]:
    """E050, E051, W050: the structured logs' settings (docs/logging.md)."""
    from a2a_endpoint.logs import FORMATS

    problems: list[Error | Warning] = []
    log_format = user.get("LOG_FORMAT")
    if log_format is not None and log_format not in FORMATS:
        problems.append(
            Error(
                f"{SETTING_NAME}['LOG_FORMAT'] is {log_format!r}: it must be one of {FORMATS}.",
                hint='"text" (the default) for people, "json" (one object a line) for a log stack.',
                id="a2a_endpoint.E050",
            )
        )
    elif log_format == "json" and not _uses_formatter(getattr(settings, "LOGGING", None)):
        problems.append(
            Warning(
                f"{SETTING_NAME}['LOG_FORMAT'] is 'json' but no formatter in LOGGING is "
                "a2a_endpoint.logs.Formatter: the switch changes no line.",
                hint='Name {"()": "a2a_endpoint.logs.Formatter"} in LOGGING["formatters"], '
                "or use a2a_endpoint.logs.logging_config() (docs/logging.md).",
                id="a2a_endpoint.W050",
            )
        )
    header = user.get("REQUEST_ID_HEADER")
    named = isinstance(header, str) and _HEADER_NAME.fullmatch(header)
    if header not in (None, "") and not named:
        problems.append(
            Error(
                f"{SETTING_NAME}['REQUEST_ID_HEADER'] is {header!r}: not an HTTP header name.",
                hint='e.g. "X-Request-ID" (the default) or "X-Correlation-ID"; "" ignores '
                "incoming ids (every request gets a new one).",
                id="a2a_endpoint.E051",
            )
        )
    return problems
