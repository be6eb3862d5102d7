"""System checks of the metrics settings and environment (a2a_endpoint.E030 to E039, W030
to W039), registered when ``a2a_endpoint.checks`` is imported (the app's ``ready``)."""

from __future__ import annotations

import os
from typing import Any

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register

from a2a_endpoint.conf import DEFAULTS, SETTING_NAME
from a2a_endpoint.metrics.multiprocess import ENV

#: Shorter bearer tokens can be guessed: 16 characters of ``secrets.token_urlsafe`` are 96 bits.
MIN_TOKEN_LENGTH = 16


def _token_problems(token: Any) -> list[Error | Warning]:
    if token is None:
        return []
    if not isinstance(token, str) or not token or token != token.strip():
        return [
            Error(
                f"{SETTING_NAME}['METRICS_TOKEN'] must be None or a non-empty string without "
                "surrounding spaces.",
                hint="e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))'; the "
                "scraper sends it as 'Authorization: Bearer <token>'.",
                id="a2a_endpoint.E031",
            )
        ]
    if len(token) < MIN_TOKEN_LENGTH:
        return [
            Warning(
                f"{SETTING_NAME}['METRICS_TOKEN'] has {len(token)} characters: it can be guessed.",
                hint=f"Use at least {MIN_TOKEN_LENGTH} random characters, e.g. "
                "python -c 'import secrets; print(secrets.token_urlsafe(32))'.",
                id="a2a_endpoint.W031",
            )
        ]
    return []


def _directory_problems() -> list[Error | Warning]:
    path = os.environ.get(ENV)
    if path is None or (path and os.path.isdir(path) and os.access(path, os.W_OK | os.X_OK)):
        return []
    return [
        Warning(
            f"{ENV}={path!r} is not a writable directory: this process records no "
            "metrics, and the metrics view answers 503.",
            hint="Create it before the processes start (systemd: RuntimeDirectory=, as "
            "deploy/systemd's units do), writable by their user.",
            id="a2a_endpoint.W032",
        )
    ]


def metrics_problems(user: dict[str, Any]) -> list[Error | Warning]:
    """E030, E031, W031 and W032 for the ``A2A_ENDPOINT`` dict ``user`` and this process's
    environment."""
    enabled = user.get("METRICS")
    enabled = DEFAULTS["METRICS"] if enabled is None else enabled
    problems: list[Error | Warning] = []
    if not isinstance(enabled, bool):
        problems.append(
            Error(
                f"{SETTING_NAME}['METRICS'] must be True or False.",
                hint="False records no metrics and turns the metrics view off (404).",
                id="a2a_endpoint.E030",
            )
        )
    problems += _token_problems(user.get("METRICS_TOKEN"))
    if enabled is not False:
        problems += _directory_problems()
    return problems


@register(Tags.compatibility)
def check_metrics(app_configs: Any = None, **kwargs: Any) -> list[Error | Warning]:
    user = getattr(settings, SETTING_NAME, None)
    if not isinstance(user, dict):
        return []  # a2a_endpoint.E000, from the settings check
    return metrics_problems(user)
