"""``GET /healthz``: can this web process serve? The database, the channel layer, the broker.

For load balancers, process supervisors and orchestrators' probes; include it in any
project with ``path("healthz", a2a_endpoint.health.healthz)``. It answers 200 with
``{"status": "ok", "database": "ok", "channel_layer": "ok" | "not configured", "broker":
"ok" | "not configured"}``, or 503 with ``"status": "error"`` and ``"error"`` for the part
that failed; details go to the log (``a2a_endpoint.health``), not to the client.

Every check runs concurrently, off the event loop where it blocks, and each takes at most
``CHECK_TIMEOUT`` seconds, so a probe is answered within about that long whatever hangs.
With the in-memory bus, a process that finds others sharing its database (their events
never reach each other: ``streaming.presence``) answers 200 with ``"status": "degraded"``
and an ``"event_bus"`` entry that says so: a 503 would take every such process out of the
balancer at once (each sees the others), turning missed stream events into an outage.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import uuid
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.signals import setting_changed
from django.db import connection
from django.dispatch import receiver
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

from a2a_endpoint.execution import runtime
from a2a_endpoint.streaming.presence import presence

__all__ = ["CHECK_TIMEOUT", "healthz"]

logger = logging.getLogger("a2a_endpoint.health")

#: Seconds each check may take before it counts as failed (a probe must answer quickly).
CHECK_TIMEOUT = 3.0
OK = "ok"
FAILED = "error"
NOT_CONFIGURED = "not configured"
DEGRADED = "degraded"


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
    """A message through the channel layer and back, as the A2A event bus receives them.

    A round trip, not a ping: it proves this process can both publish task events and read
    them (channels_redis), as the streams of a multi-process deployment must. With the
    channel-layer bus the message goes to the bus's own reader (``EventBus.ping``): a receive
    of the health check's own would wait behind that reader for good (channels_redis lets one
    receive of a layer wait in Redis at a time), and a stuck reader is what must show here.
    """
    if not getattr(settings, "CHANNEL_LAYERS", None):
        return NOT_CONFIGURED
    try:
        if not await runtime.get_event_bus().ping(CHECK_TIMEOUT):
            await _round_trip(_private_layer())  # the layer is configured, the bus is another
    except Exception:
        logger.warning("Health check: the channel layer did not answer", exc_info=True)
        return FAILED
    return OK


async def broker_status() -> str:
    """A fresh connection to the execution backend's broker (``ExecutionBackend.ping``):
    "not configured" for a backend without one (the inline backend)."""
    try:
        async with asyncio.timeout(CHECK_TIMEOUT):  # whatever the backend does with it
            reached = await runtime.get_backend().ping(CHECK_TIMEOUT)
    except Exception:
        logger.warning("Health check: the broker did not answer", exc_info=True)
        return FAILED
    return OK if reached else NOT_CONFIGURED


@functools.cache
def _private_layer() -> Any:
    """A layer instance of the health check's own: it shares no receive lock with the
    project's other users of the default layer."""
    from channels.layers import DEFAULT_CHANNEL_LAYER, channel_layers

    return channel_layers.make_backend(DEFAULT_CHANNEL_LAYER)


@receiver(setting_changed)
def _forget_private_layer(*, setting: str, **kwargs: Any) -> None:
    if setting == "CHANNEL_LAYERS":
        _private_layer.cache_clear()


async def _round_trip(layer: Any) -> None:
    nonce = uuid.uuid4().hex
    async with asyncio.timeout(CHECK_TIMEOUT):
        channel = await layer.new_channel("healthz.")
        await layer.send(channel, {"type": "healthz.ping", "nonce": nonce})
        message = await layer.receive(channel)
    if message.get("nonce") != nonce:
        raise ValueError(f"the channel layer returned another message: {message!r}")


async def sharing_processes() -> list[str]:
    """With the in-memory bus, the other processes serving this database (a heartbeat is
    taken when one is due); none with another bus."""
    try:
        async with asyncio.timeout(CHECK_TIMEOUT):
            return await presence.beat()
    except TimeoutError:
        return presence.others  # the database is slow: its own check says so


def _shared_bus(others: list[str]) -> str:
    return f"memory bus shared by {len(others) + 1} processes: streams will miss events"


@never_cache
@require_safe
async def healthz(request: HttpRequest) -> JsonResponse:
    """200 when every configured part answers, else 503 (the checks run concurrently)."""
    database, channel_layer, broker, others = await asyncio.gather(
        database_status(), channel_layer_status(), broker_status(), sharing_processes()
    )
    healthy = database == OK and {channel_layer, broker} <= {OK, NOT_CONFIGURED}
    body = {
        "status": (DEGRADED if others else OK) if healthy else FAILED,
        "database": database,
        "channel_layer": channel_layer,
        "broker": broker,
    }
    if others:
        body["event_bus"] = _shared_bus(others)
    return JsonResponse(body, status=200 if healthy else 503)
