"""``GET /healthz``: can this web process serve? It checks the database and the channel layer.

For load balancers, process supervisors and the deployment guide's smoke test: 200 with
``{"status": "ok", "database": "ok", "channel_layer": "ok" | "not configured"}``, or 503
naming the part that failed (details go to the log, not to the client).
"""

from __future__ import annotations

import asyncio
import logging
import uuid

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

logger = logging.getLogger("project.health")

#: Seconds each check may take before it counts as failed (a probe must answer quickly).
CHECK_TIMEOUT = 3.0
OK = "ok"
FAILED = "error"
NOT_CONFIGURED = "not configured"


def _select_one() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()


async def database_status() -> str:
    """``SELECT 1`` on the default database, through the request's ORM connection."""
    try:
        async with asyncio.timeout(CHECK_TIMEOUT):
            await sync_to_async(_select_one)()
    except Exception:
        logger.warning("Health check: the database did not answer", exc_info=True)
        return FAILED
    return OK


async def channel_layer_status() -> str:
    """Send a message to a fresh channel of the default layer and receive it back.

    A round trip, not a ping: it proves this process can both publish task events and read
    them (channels_redis), as the streams of a multi-process deployment must.
    """
    if not getattr(settings, "CHANNEL_LAYERS", None):
        return NOT_CONFIGURED
    from channels.layers import get_channel_layer

    nonce = uuid.uuid4().hex
    try:
        layer = get_channel_layer()
        async with asyncio.timeout(CHECK_TIMEOUT):
            channel = await layer.new_channel("healthz.")
            await layer.send(channel, {"type": "healthz.ping", "nonce": nonce})
            message = await layer.receive(channel)
    except Exception:
        logger.warning("Health check: the channel layer did not answer", exc_info=True)
        return FAILED
    if message.get("nonce") != nonce:
        logger.warning("Health check: the channel layer returned another message: %r", message)
        return FAILED
    return OK


@never_cache
@require_safe
async def healthz(request: HttpRequest) -> JsonResponse:
    """200 when every configured part answers, else 503 (both checks run concurrently)."""
    database, channel_layer = await asyncio.gather(database_status(), channel_layer_status())
    healthy = database == OK and channel_layer in {OK, NOT_CONFIGURED}
    body = {
        "status": OK if healthy else FAILED,
        "database": database,
        "channel_layer": channel_layer,
    }
    return JsonResponse(body, status=200 if healthy else 503)
