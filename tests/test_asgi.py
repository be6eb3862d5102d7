"""a2a_endpoint.asgi: request threads taken from a pool and given back, one per running request.

Sync views run in their request's thread (Django's thread-sensitive executor), so a view
that reports which thread it ran on shows the handler's choice. Each thread is marked with
a number the first time a view runs on it: an ident can be reused by a later thread, a mark
cannot.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time

import msgspec
import pytest
from django.core.handlers.asgi import ASGIHandler as DjangoASGIHandler
from django.http import HttpRequest, HttpResponse
from django.urls import path

from a2a_endpoint.asgi import ASGIHandler
from a2a_endpoint.testing import jsonrpc_request, user_message
from tests.asgi_client import asgi_request
from tests.urls import urlpatterns as test_urlpatterns

_marks = threading.local()
_counter = itertools.count(1)
_gate: dict[str, threading.Barrier | threading.Event] = {}
_threads: set[threading.Thread] = set()  # the threads barrier_view ran on


def _mark() -> int:
    if not hasattr(_marks, "value"):
        _marks.value = next(_counter)
    return _marks.value


def thread_view(request: HttpRequest) -> HttpResponse:
    return HttpResponse(str(_mark()))


def barrier_view(request: HttpRequest) -> HttpResponse:
    """Returns once as many requests as the barrier's parties are inside it at once."""
    _gate["barrier"].wait()
    _threads.add(threading.current_thread())
    return HttpResponse(str(_mark()))


def hold_view(request: HttpRequest) -> HttpResponse:
    _gate["entered"].set()
    _gate["release"].wait(10)
    return HttpResponse(str(_mark()))


urlpatterns = [
    path("thread/", thread_view),
    path("barrier/", barrier_view),
    path("hold/", hold_view),
    *test_urlpatterns,
]


@pytest.fixture(autouse=True)
def _urls(settings) -> None:
    settings.ROOT_URLCONF = __name__


async def marks(app, route: str, count: int) -> list[int]:
    answers = await asyncio.gather(*(asgi_request(app, route, method="GET") for _ in range(count)))
    assert [answer.status for answer in answers] == [200] * count, answers
    return [int(answer.body) for answer in answers]


def wait_until(condition, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met before the deadline"
        time.sleep(0.01)


async def test_sequential_requests_reuse_one_thread():
    handler = ASGIHandler()
    seen = [(await marks(handler, "/thread/", 1))[0] for _ in range(5)]
    assert len(set(seen)) == 1
    assert len(handler._idle) == 1


async def test_djangos_handler_starts_a_thread_per_request():
    """The control: what the pool saves."""
    seen = [(await marks(DjangoASGIHandler(), "/thread/", 1))[0] for _ in range(3)]
    assert len(set(seen)) == 3


async def test_concurrent_requests_each_have_their_own_thread():
    handler = ASGIHandler()
    _gate["barrier"] = threading.Barrier(3, timeout=5)  # one thread for all would time out
    first = await marks(handler, "/barrier/", 3)
    assert len(set(first)) == 3
    assert len(handler._idle) == 3
    _gate["barrier"] = threading.Barrier(3, timeout=5)
    assert set(await marks(handler, "/barrier/", 3)) == set(first)  # the same three, reused


async def test_idle_threads_beyond_the_limit_end():
    handler = ASGIHandler()
    handler.max_idle_threads = 1
    # This test's own threads (those of earlier tests' handlers may end meanwhile).
    _threads.clear()
    _gate["barrier"] = threading.Barrier(3, timeout=5)
    await marks(handler, "/barrier/", 3)
    assert len(handler._idle) == 1
    assert len(_threads) == 3
    assert all(thread.name.startswith("a2a-request") for thread in _threads)
    await asyncio.to_thread(wait_until, lambda: sum(t.is_alive() for t in _threads) == 1)


async def test_a_cancelled_request_does_not_give_its_thread_back():
    handler = ASGIHandler()
    _gate.update(entered=threading.Event(), release=threading.Event())
    held = asyncio.create_task(asgi_request(handler, "/hold/", method="GET"))
    assert await asyncio.to_thread(_gate["entered"].wait, 5)
    held.cancel()  # as daphne cancels an application whose client is gone
    with pytest.raises(asyncio.CancelledError):
        await held
    assert handler._idle == []  # its view is still running on that thread
    _gate["release"].set()
    assert len(set(await marks(handler, "/thread/", 1))) == 1
    assert len(handler._idle) == 1


@pytest.mark.django_db(transaction=True)
async def test_a_stream_lets_its_thread_go_and_the_pool_stays_sound():
    handler = ASGIHandler()
    await marks(handler, "/thread/", 1)
    [pooled] = handler._idle
    body = msgspec.json.encode(
        jsonrpc_request("SendStreamingMessage", {"message": user_message("echo streamed")})
    )
    answer = await asgi_request(handler, "/a2a/", body)
    assert answer.status == 200
    assert answer.headers[b"Content-Type"] == b"text/event-stream"
    assert b"TASK_STATE_COMPLETED" in answer.body
    # The stream took the pooled thread and let it go (views.py): it is not given back.
    assert handler._idle == []
    assert pooled._shutdown
    assert len(await marks(handler, "/thread/", 1)) == 1
    assert all(not executor._shutdown for executor in handler._idle)


async def test_only_http():
    with pytest.raises(ValueError, match="lifespan"):
        await ASGIHandler()({"type": "lifespan"}, None, None)
