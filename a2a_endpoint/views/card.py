"""The public agent card at ``/.well-known/agent-card.json``, with caching headers."""

from __future__ import annotations

import functools
import hashlib
import time
from typing import Any

import msgspec
from django.core.signals import setting_changed
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.cache import get_conditional_response
from django.utils.http import http_date
from django.views import View

from a2a_endpoint.conf import SETTING_NAME, app_settings
from a2a_endpoint.service.agent_card import build_agent_card


def _reset(*, setting: str, **kwargs: Any) -> None:
    if setting in {SETTING_NAME, "REST_FRAMEWORK"}:
        _card.cache_clear()


setting_changed.connect(_reset)


def jsonrpc_url(request: HttpRequest) -> str:
    path = reverse("a2a_endpoint:jsonrpc")
    base = app_settings.BASE_URL
    return base.rstrip("/") + path if base else request.build_absolute_uri(path)


@functools.lru_cache(maxsize=16)
def _card(jsonrpc_url: str) -> tuple[bytes, str, int]:
    """The card's body, ETag and Last-Modified: when this process first built it (the card
    only changes with the settings, i.e. with a restart)."""
    body = msgspec.json.encode(build_agent_card(jsonrpc_url))
    etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
    return body, etag, int(time.time())


class AgentCardView(View):
    """GET /.well-known/agent-card.json: the public agent card with caching headers."""

    http_method_names = ["get", "head"]

    def get(self, request: HttpRequest) -> HttpResponse:
        body, etag, last_modified = _card(jsonrpc_url(request))
        # Django's RFC 9110 §13.1.2 rules: weak comparison (W/"..."), "*", lists of tags;
        # If-Modified-Since only without If-None-Match.
        response = get_conditional_response(
            request, etag=etag, last_modified=last_modified
        ) or HttpResponse(body, content_type="application/json")
        response["ETag"] = etag
        response["Last-Modified"] = http_date(last_modified)
        response["Cache-Control"] = f"public, max-age={int(app_settings.CARD_MAX_AGE)}"
        response["Access-Control-Allow-Origin"] = "*"
        return response
