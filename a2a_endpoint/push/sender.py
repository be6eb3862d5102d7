"""The push sender: POST what a task's webhooks are owed, config by config, in event order.

Each config is sent to by one sender at a time (a lease on its row), lowest event number
first; a try that fails for a reason that may pass (a network error, 408, 429, 5xx, a host
that does not resolve now) is retried with exponential backoff and jitter, and the events
after it wait their turn. A delivery that is refused for good (another 4xx or 3xx: no
redirect is followed; a URL the SSRF guard refuses), or that ran out of tries
(``PUSH_MAX_ATTEMPTS``) or time (``PUSH_MAX_AGE``), is dead-lettered and the next event goes.

At least once: a delivery is marked delivered only after its webhook answered 2xx, so a
sender that dies in between (a killed worker) leaves it pending, and once its lease lapses
a sweeper hands it to another sender, which sends it again. Receivers dedupe on
``X-A2A-Task-Id`` and ``X-A2A-Event-Seq``.

Nothing here logs a config's token or credentials, nor stores them in an error.
"""

from __future__ import annotations

import asyncio
import email.utils
import functools
import ipaddress
import logging
import random
import ssl
import time
from datetime import datetime, timedelta
from urllib.parse import urlsplit, urlunsplit

import certifi
import httpx
import msgspec
from django.utils import timezone

from a2a_endpoint import __version__, logs, metrics
from a2a_endpoint.conf import app_settings
from a2a_endpoint.push.ssrf import Address, Destination, RefusedURL, check_url
from a2a_endpoint.store import Attempt, OwedDelivery, TaskStore

logger = logging.getLogger("a2a_endpoint.push")

__all__ = ["CONTENT_TYPE", "deliver_task", "lease_seconds", "webhook_policy"]

CONTENT_TYPE = "application/a2a+json"
#: The most of a webhook's answer that is read (kept, shortened, as the last error).
MAX_ANSWER_BYTES = 1024
RETRYABLE_STATUS = frozenset({408, 429})

PENDING, DELIVERED, DEAD = "pending", "delivered", "dead"
#: The ``outcome`` label of a try (``a2a_push_deliveries_total``) by the state it left.
OUTCOMES = {DELIVERED: "delivered", PENDING: "retried", DEAD: "dead"}


def webhook_policy() -> dict[str, object]:
    """The SSRF guard's settings, as :func:`~a2a_endpoint.push.ssrf.check_url` takes them."""
    return {
        "allow_http": bool(app_settings.PUSH_ALLOW_HTTP),
        "allowed_hosts": tuple(app_settings.PUSH_ALLOWED_HOSTS),
        "allow_private_networks": bool(app_settings.PUSH_ALLOW_PRIVATE_NETWORKS),
    }


def lease_seconds() -> float:
    """How long a sender holds a config: one try at most, with a margin (renewed per try)."""
    return float(app_settings.PUSH_CONNECT_TIMEOUT) + float(app_settings.PUSH_TIMEOUT) + 5.0


class _Result(msgspec.Struct, frozen=True):
    """What one POST came to, before it is weighed against the tries left."""

    delivered: bool = False
    transient: bool = False
    status: int | None = None
    error: str = ""
    retry_after: float | None = None
    tried: bool = True


# --- deciding -------------------------------------------------------------------------------


def backoff(attempt: int) -> float:
    """Seconds before try ``attempt + 1``: exponential, capped, with jitter (half to full)."""
    ceiling = min(
        float(app_settings.PUSH_RETRY_MAX_DELAY),
        float(app_settings.PUSH_RETRY_DELAY) * 2 ** max(attempt - 1, 0),
    )
    return random.uniform(ceiling / 2, ceiling)


def weigh(due: OwedDelivery, result: _Result, now: datetime) -> Attempt:
    """The delivery's state after ``result``: delivered, retried at a time, or dead."""
    if result.delivered:
        return Attempt(DELIVERED, status=result.status)
    attempts = due.attempts + (1 if result.tried else 0)
    if not result.transient:
        return Attempt(DEAD, status=result.status, error=result.error)
    if attempts >= int(app_settings.PUSH_MAX_ATTEMPTS):
        error = f"{result.error} (gave up after {attempts} tries)"
        return Attempt(DEAD, status=result.status, error=error)
    delay = result.retry_after if result.retry_after is not None else backoff(attempts)
    delay = min(delay, float(app_settings.PUSH_RETRY_MAX_DELAY))
    retry_at = now + timedelta(seconds=delay)
    if retry_at > due.give_up_at:
        error = f"{result.error} (gave up: PUSH_MAX_AGE reached)"
        return Attempt(DEAD, status=result.status, error=error)
    return Attempt(PENDING, status=result.status, error=result.error, retry_at=retry_at)


def retry_after(value: str | None, now: float | None = None) -> float | None:
    """``Retry-After`` (RFC 9110 §10.2.3) in seconds: a number, or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - (time.time() if now is None else now), 0.0)


# --- sending --------------------------------------------------------------------------------


def _netloc(address: Address, port: int) -> str:
    host = f"[{address}]" if isinstance(address, ipaddress.IPv6Address) else str(address)
    return f"{host}:{port}"


def _host_header(destination: Destination) -> str:
    host = destination.host
    if ":" in host:  # an IPv6 literal
        host = f"[{host}]"
    default = 443 if destination.scheme == "https" else 80
    return host if destination.port == default else f"{host}:{destination.port}"


def _headers(due: OwedDelivery) -> dict[str, str]:
    headers = {
        "Content-Type": CONTENT_TYPE,
        "User-Agent": f"a2a-endpoint/{__version__}",
        # For receivers to dedupe (at least once) and order (per config, seq grows).
        "X-A2A-Task-Id": due.task_id,
        "X-A2A-Event-Seq": str(due.seq),
        "X-A2A-Push-Config-Id": due.config_id,
        "X-A2A-Delivery-Attempt": str(due.attempts + 1),
    }
    if due.auth_scheme:
        headers["Authorization"] = f"{due.auth_scheme} {due.auth_credentials}".rstrip()
    if due.token:
        headers["X-A2A-Notification-Token"] = due.token
    return headers


def _redacted(text: str, due: OwedDelivery) -> str:
    """``text`` (a webhook's answer) with the config's secrets masked, if it echoed them."""
    for secret in (due.auth_credentials, due.token):
        if secret:
            text = text.replace(secret, "***")
    return text


async def _read_answer(response: httpx.Response) -> str:
    """At most MAX_ANSWER_BYTES of the body (the total deadline is the caller's)."""
    read = bytearray()
    async for chunk in response.aiter_raw():
        read.extend(chunk)
        if len(read) >= MAX_ANSWER_BYTES:
            break
    return bytes(read[:MAX_ANSWER_BYTES]).decode("utf-8", "replace")


def _classify(response: httpx.Response, answer: str, due: OwedDelivery) -> _Result:
    status = response.status_code
    if 200 <= status < 300:
        return _Result(delivered=True, status=status)
    detail = " ".join(_redacted(answer, due).split())[:200]
    error = f"HTTP {status}" + (f": {detail}" if detail else "")
    if 300 <= status < 400:
        where = response.headers.get("location", "")
        return _Result(status=status, error=f"HTTP {status}: redirects are not followed ({where})")
    transient = status in RETRYABLE_STATUS or status >= 500
    wait = retry_after(response.headers.get("retry-after")) if transient else None
    return _Result(transient=transient, status=status, error=error, retry_after=wait)


async def _post(client: httpx.AsyncClient, due: OwedDelivery, destination: Destination) -> _Result:
    """POST the event to the checked addresses in turn (the next on a refused connection),
    all of it within PUSH_TIMEOUT: a webhook that answers a byte at a time is cut off too."""
    total = float(app_settings.PUSH_TIMEOUT)
    try:
        async with asyncio.timeout(total):
            return await _post_to(client, due, destination)
    except TimeoutError:
        return _Result(transient=True, error=f"no whole answer within PUSH_TIMEOUT ({total:g} s)")


async def _post_to(
    client: httpx.AsyncClient, due: OwedDelivery, destination: Destination
) -> _Result:
    headers = {**_headers(due), "Host": _host_header(destination)}
    parts = urlsplit(destination.url)
    timeout = httpx.Timeout(
        float(app_settings.PUSH_TIMEOUT), connect=float(app_settings.PUSH_CONNECT_TIMEOUT)
    )
    # TLS is checked against the URL's host, not the address connected to.
    extensions = {"sni_hostname": destination.host} if destination.scheme == "https" else {}
    error = "no address to connect to"
    for address in destination.addresses:
        url = urlunsplit(
            (parts.scheme, _netloc(address, destination.port), parts.path or "/", parts.query, "")
        )
        try:
            async with client.stream(
                "POST",
                url,
                content=due.body,
                headers=headers,
                timeout=timeout,
                extensions=extensions,
            ) as response:
                answer = await _read_answer(response)
        except httpx.ConnectError as exc:
            error = f"cannot connect to {address}: {exc}"
            continue
        except httpx.TransportError as exc:
            return _Result(transient=True, error=f"{type(exc).__name__}: {exc}"[:300])
        return _classify(response, answer, due)
    return _Result(transient=True, error=error[:300])


class Webhook:
    """The HTTP client of one config's drain, on an event loop of its own (asyncio's timeout
    is what bounds a whole POST). Its pooled connections, keyed by the address connected to,
    only ever carry this config's host name."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._client = httpx.AsyncClient(follow_redirects=False, trust_env=False, verify=_tls())

    def post(self, due: OwedDelivery, destination: Destination) -> _Result:
        return self._loop.run_until_complete(_post(self._client, due, destination))

    def close(self) -> None:
        try:
            self._loop.run_until_complete(self._client.aclose())
        finally:
            self._loop.close()


def send(webhook: Webhook, due: OwedDelivery) -> _Result:
    """One try of ``due``: the URL checked again (DNS may have changed), then the POST."""
    if due.body is None:
        return _Result(error="the event is no longer stored", tried=False)
    try:
        destination = check_url(due.url, **webhook_policy())  # type: ignore[arg-type]
    except RefusedURL as exc:
        return _Result(transient=exc.transient, error=f"refused: {exc.reason}", tried=False)
    return webhook.post(due, destination)


# --- draining -------------------------------------------------------------------------------


def _drain(store: TaskStore, config_pk: int, webhook: Webhook, leased_at: float) -> float | None:
    """Send the config's due events in order while holding its lease; seconds until the
    next one is due, or None when nothing is left."""
    lease = lease_seconds()
    renew_at = leased_at + lease / 2
    while (due := store.next_owed_delivery(config_pk)) is not None:
        now = timezone.now()
        if due.next_attempt_at > now:
            return (due.next_attempt_at - now).total_seconds()
        if due.give_up_at <= now:
            store.record_push_attempt(
                due.pk, Attempt(DEAD, error="gave up: PUSH_MAX_AGE reached"), tried=False
            )
            metrics.push_delivery("dead")
            continue
        if time.monotonic() >= renew_at:  # less than half the lease left: a try may need all
            store.renew_push_lease(config_pk, lease)
            renew_at = time.monotonic() + lease / 2
        result = send(webhook, due)
        attempt = weigh(due, result, timezone.now())
        store.record_push_attempt(due.pk, attempt, tried=result.tried)
        _log(due, attempt)
        metrics.push_delivery(OUTCOMES.get(attempt.state, attempt.state))
    return None


def _log(due: OwedDelivery, attempt: Attempt) -> None:
    if attempt.state == DELIVERED:
        logger.debug(
            "Delivered event %s of task %s to config %r", due.seq, due.task_id, due.config_id
        )
    elif attempt.state == DEAD:
        logger.warning(
            "Push delivery of event %s of task %s to config %r dead-lettered: %s",
            due.seq,
            due.task_id,
            due.config_id,
            attempt.error,
        )
    else:
        logger.info(
            "Push delivery of event %s of task %s to config %r failed (%s); retry at %s",
            due.seq,
            due.task_id,
            due.config_id,
            attempt.error,
            attempt.retry_at,
        )


@functools.cache
def _tls() -> ssl.SSLContext:
    """One TLS context per process (httpx's default: certifi's CAs, hostnames checked).

    Building it loads the CA bundle, tens of milliseconds: per client it was most of a
    delivery's cost (bench.push).
    """
    return ssl.create_default_context(cafile=certifi.where())


def _deliver_leased(store: TaskStore, config_pk: int, leased_at: float) -> float | None:
    """Send what a config this sender leased is owed, then release it; seconds until a
    retry is due (the caller schedules it), or None."""
    webhook = Webhook()
    try:
        while True:
            wait = _drain(store, config_pk, webhook, leased_at)
            if wait is not None:
                store.release_push_config(config_pk)
                return wait
            # Released unless an event was owed since the last look: its wake-up found the
            # lease taken and left it to this sender, which goes on.
            if store.release_push_config(config_pk, unless_owed=True):
                return None
    finally:
        webhook.close()


def deliver_task(store: TaskStore, task_id: str) -> float | None:
    """Send what every webhook of ``task_id`` is owed, unless another sender holds it;
    seconds until the first retry is due, or None. Its log lines carry the task id."""
    with logs.scope(fresh=True, task_id=task_id, method="push"):
        return _deliver_owed(store, task_id)


def _deliver_owed(store: TaskStore, task_id: str) -> float | None:
    leased_at = time.monotonic()
    leased = store.lease_owed_push_configs(task_id, lease_seconds())
    waits: list[float] = []
    try:
        while leased:
            wait = _deliver_leased(store, leased[0], leased_at)
            leased.pop(0)
            if wait is not None:
                waits.append(wait)
    finally:
        for config_pk in leased:  # a failure: the others' leases need not lapse first
            store.release_push_config(config_pk)
    return min(waits, default=None)
