"""The lines a2a_endpoint writes itself: one access line per request, a job's start and end.

Access lines go to ``a2a_endpoint.requests``, job lines to ``a2a_endpoint.jobs``, at INFO.
They name the caller by its owner id and never carry a body, a credential or a message's
text. Responses are duck-typed (``status_code``, ``streaming``, ``content``): this package
sits below the transport and does not import ``django.http``.
"""

from __future__ import annotations

import functools
import json
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

from a2a_endpoint.conf import app_settings
from a2a_endpoint.logs.context import current, incoming_request_id, scope

requests_logger = logging.getLogger("a2a_endpoint.requests")
jobs_logger = logging.getLogger("a2a_endpoint.jobs")


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 1)


def outcome_of(payload: Any) -> dict[str, Any]:
    """``outcome`` ("ok" or "error") and the error ``code`` of a JSON-RPC answer; a batch's
    ``codes``, one per answer in the answer's order (0: a success)."""
    answers = payload if isinstance(payload, list) else [payload]
    codes = [
        (answer.get("error") or {}).get("code", 0) if isinstance(answer, dict) else 0
        for answer in answers
    ]
    outcome = "error" if any(codes) else "ok"
    if isinstance(payload, list):
        return {"outcome": outcome, "codes": codes}
    return {"outcome": outcome, "code": codes[0] or None}


def log_access(method: str, status: int, started: float, **fields: Any) -> None:
    """The access line of one HTTP request: ``method`` (``batch``: ``methods``), HTTP
    ``status`` and the time since ``started`` (``time.perf_counter()``); ``fields`` are
    ``outcome``, ``code``, ``codes``, ``events`` …"""
    if not requests_logger.isEnabledFor(logging.INFO):
        return
    duration_ms = _ms(started)
    code = f" {fields['code']}" if fields.get("code") else ""
    named = f"{method} [{', '.join(fields['methods'])}]" if "methods" in fields else method
    requests_logger.info(
        "%s %s%s %s %.1f ms",
        named,
        fields.get("outcome", ""),
        code,
        status,
        duration_ms,
        extra={"method": method, "status": status, "duration_ms": duration_ms, **fields},
    )


def log_response(response: Any, started: float, access: dict[str, Any]) -> None:
    """The access line of ``response``; ``access``: what the transport noted (method,
    outcome), else the outcome is read from the (small) JSON error body of a refusal."""
    if getattr(response, "streaming", False):
        access["outcome"] = "stream"
    elif response.status_code == 204:
        access["outcome"] = "notification"
    elif "outcome" not in access:  # refused, or an error before a stream: a small JSON body
        try:
            access.update(outcome_of(json.loads(response.content)))
        except ValueError:
            access["outcome"] = "error"
    log_access(access.pop("method", "?"), response.status_code, started, **access)


def logged_stream(
    chunks: AsyncIterator[bytes], started: float, method: str
) -> AsyncIterator[bytes]:
    """A stream's frames, pulled in the log context of the request that opened it (taken
    now: the stream is read after the view returned), and a line when it ends (closed by
    either side): its duration and the events it sent."""
    return _logged_stream(chunks, started, method, current())


async def _logged_stream(
    chunks: AsyncIterator[bytes], started: float, method: str, fields: dict[str, Any]
) -> AsyncIterator[bytes]:
    events = 0
    try:
        while True:
            # Per step, not around the loop: the scope is left in the context it was entered.
            with scope(fresh=True, **fields):
                try:
                    chunk = await anext(chunks)
                except StopAsyncIteration:
                    break
            events += not chunk.startswith(b":")  # comments (keep-alives) are no events
            yield chunk
    finally:
        with scope(fresh=True, **fields):
            log_access(method, 200, started, outcome="stream ended", events=events)
            aclose = getattr(chunks, "aclose", None)
            if aclose is not None:
                await aclose()


def access_logged(post: Any) -> Any:
    """Decorates a view's ``post``: the request's id in the log context and in the
    response's ``REQUEST_ID_HEADER``, and one access line per request.

    The view notes what it learns for the line in ``request._a2a_access`` (method, outcome).
    """

    @functools.wraps(post)
    async def logged(view: Any, request: Any) -> Any:
        started = time.perf_counter()
        header = app_settings.REQUEST_ID_HEADER
        request_id = incoming_request_id(request.headers.get(header) if header else None)
        access: dict[str, Any] = {}
        request._a2a_access = access
        with scope(fresh=True, request_id=request_id):
            try:
                response = await post(view, request)
            except Exception:
                log_access(access.get("method", "?"), 500, started, outcome="exception")
                raise
            response[header or "X-Request-ID"] = request_id
            if getattr(response, "streaming", False):
                response.streaming_content = logged_stream(
                    response.streaming_content, started, access.get("method", "?")
                )
            log_response(response, started, access)
        return response

    return logged


def log_job_start(attempt: int) -> None:
    """A job starts (its task id, job id and caller are in the context)."""
    jobs_logger.info("Job started (attempt %d)", attempt)


def log_job_finish(started: float, state: str | None, stopped: bool) -> None:
    """A job ends: the last state it wrote (None: none) and whether it was stopped."""
    duration_ms = _ms(started)
    jobs_logger.info(
        "Job %s: %s in %.1f ms",
        "stopped" if stopped else "finished",
        state or "no state written",
        duration_ms,
        extra={"state": state, "stopped": stopped, "duration_ms": duration_ms},
    )
