"""The Django ceiling: the sample project's settings and middleware, a constant async view.

``bench.ceiling_django`` is a settings module (``bench.settings``, so the same middleware,
database and channel layer as ``ours-prod``) whose URLconf answers ``POST /a2a/`` with the
ceiling's constant JSON-RPC response from an async view, touching no database. Under daphne it
measures what Django's ASGI handler and the project's middleware cost per request before any
A2A work: the upper bound of any JSON-RPC view in this project.
"""

from django.http import HttpRequest, HttpResponse
from django.urls import path
from django.views.decorators.csrf import csrf_exempt

from bench.ceiling import BODY
from bench.settings import *  # noqa: F403

ROOT_URLCONF = "bench.ceiling_django"


@csrf_exempt
async def constant(request: HttpRequest) -> HttpResponse:
    request.read()
    return HttpResponse(BODY, content_type="application/json")


async def ready(request: HttpRequest) -> HttpResponse:
    return HttpResponse(b"ok", content_type="text/plain")


urlpatterns = [path("a2a/", constant), path("", ready)]
