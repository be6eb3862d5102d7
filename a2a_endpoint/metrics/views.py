"""GET /metrics: the Prometheus exposition, for a scraper holding ``METRICS_TOKEN``, a staff
user, or anyone while ``DEBUG`` is on and no token is set (docs/metrics.md)."""

from __future__ import annotations

import hmac
import logging

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.http import require_safe

from a2a_endpoint.conf import app_settings
from a2a_endpoint.metrics.exposition import render

logger = logging.getLogger("a2a_endpoint.metrics")

__all__ = ["metrics"]


def _bearer(request: HttpRequest) -> str | None:
    scheme, _, credentials = request.headers.get("Authorization", "").partition(" ")
    return credentials.strip() if scheme.lower() == "bearer" else None


def _is_staff(request: HttpRequest) -> bool:
    user = getattr(request, "user", None)  # set by AuthenticationMiddleware, if installed
    return bool(user is not None and user.is_active and user.is_staff)


def _refusal(request: HttpRequest) -> HttpResponse | None:
    """None when the caller may read the metrics; else a 401 (a token is configured: the
    scraper must send it) or a 403 (no token: only staff users, or DEBUG)."""
    token = app_settings.METRICS_TOKEN
    offered = _bearer(request)
    if token and offered is not None and hmac.compare_digest(offered.encode(), token.encode()):
        return None
    if _is_staff(request) or (not token and settings.DEBUG):
        return None
    if token:
        response = HttpResponse("A valid bearer token is required.\n", status=401)
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    return HttpResponse(
        "The metrics are served to staff users, and to scrapers once "
        "A2A_ENDPOINT['METRICS_TOKEN'] is set.\n",
        status=403,
    )


@require_safe
def metrics(request: HttpRequest) -> HttpResponse:
    """The exposition of this process, or of all processes sharing PROMETHEUS_MULTIPROC_DIR.

    404 when ``METRICS`` is off; 503 (logged) when the multiprocess files cannot be read.
    """
    if not app_settings.METRICS:
        raise Http404("Metrics are off (A2A_ENDPOINT['METRICS'])")
    refusal = _refusal(request)
    if refusal is not None:
        refusal["Content-Type"] = "text/plain; charset=utf-8"
        return refusal
    try:
        body, content_type = render(request.headers.get("Accept"))
    except Exception:
        logger.exception("Could not read the metrics")
        return HttpResponse(
            "The metrics could not be read (see the server log).\n",
            status=503,
            content_type="text/plain; charset=utf-8",
        )
    response = HttpResponse(body, content_type=content_type)
    response["Cache-Control"] = "no-store"
    return response
