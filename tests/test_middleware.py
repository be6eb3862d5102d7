"""a2a_endpoint.middleware and .asgi: Django's stock middleware, inline unless it may block.

Every ``process_*`` call of Django's base classes is recorded with the thread it ran on: under
an async client, the calls that cannot block must run on the loop's thread (no hop), those
that may (a session to save, a form to parse, messages to store) in Django's worker thread,
and the responses must be the ones Django's classes give. The drop-ins are listed in
``MIDDLEWARE`` here (the test client builds its own handler); ``a2a_endpoint.asgi``'s handler
loads them for Django's paths.
"""

from __future__ import annotations

import threading
from datetime import timedelta
from email.utils import parsedate_to_datetime

import msgspec
import pytest
from django.contrib import messages
from django.contrib.auth import middleware as auth
from django.contrib.messages import middleware as message_middleware
from django.contrib.sessions import middleware as sessions
from django.core.handlers import base as handlers_base
from django.http import HttpRequest, HttpResponse
from django.middleware import clickjacking, common, csrf, security
from django.test import AsyncClient, Client
from django.urls import path
from django.utils.module_loading import import_string

from a2a_endpoint import models
from a2a_endpoint.asgi import DROP_INS, ASGIHandler
from a2a_endpoint.middleware import InlineMiddlewareMixin
from a2a_endpoint.testing import jsonrpc_request, user_message
from tests.asgi_client import asgi_request
from tests.urls import urlpatterns as test_urlpatterns

pytestmark = [pytest.mark.django_db(transaction=True)]

NAMES = (
    "SecurityMiddleware",
    "SessionMiddleware",
    "CommonMiddleware",
    "CsrfViewMiddleware",
    "AuthenticationMiddleware",
    "MessageMiddleware",
    "XFrameOptionsMiddleware",
)
OURS = [f"a2a_endpoint.middleware.{name}" for name in NAMES]
STOCK = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]
BASES = {
    security.SecurityMiddleware: ("process_request", "process_response"),
    sessions.SessionMiddleware: ("process_request", "process_response"),
    common.CommonMiddleware: ("process_request", "process_response"),
    csrf.CsrfViewMiddleware: ("process_request", "process_view", "process_response"),
    auth.AuthenticationMiddleware: ("process_request",),
    message_middleware.MessageMiddleware: ("process_request", "process_response"),
    clickjacking.XFrameOptionsMiddleware: ("process_response",),
}
EVERY_CALL = {f"{base.__name__}.{name}" for base, names in BASES.items() for name in names}


def add_message(request: HttpRequest) -> HttpResponse:
    messages.info(request, "saved for later")
    return HttpResponse(b"added")


def read_messages(request: HttpRequest) -> HttpResponse:
    return HttpResponse("|".join(str(message) for message in messages.get_messages(request)))


urlpatterns = [
    path("messages/add/", add_message),
    path("messages/read/", read_messages),
    *test_urlpatterns,
]


class Calls:
    """``process_*`` calls of Django's middleware, each with the thread it ran on.

    By default only the calls made by our drop-ins count: a view decorated with
    ``csrf_protect`` (the admin's login) calls Django's CSRF class itself, in the view.
    """

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, bool]] = []

    def clear(self) -> None:
        self.calls.clear()

    def names(self, *, drop_ins: bool = True) -> set[str]:
        return {name for name, _, ours in self.calls if ours or not drop_ins}

    def off_thread(self, loop_thread: int, *, drop_ins: bool = True) -> set[str]:
        return {
            name
            for name, ident, ours in self.calls
            if ident != loop_thread and (ours or not drop_ins)
        }


@pytest.fixture
def calls(monkeypatch) -> Calls:
    recorded = Calls()
    for base, names in BASES.items():
        for name in names:
            original = getattr(base, name)

            def spy(self, *args, __original=original, __name=f"{base.__name__}.{name}"):
                ours = isinstance(self, InlineMiddlewareMixin)
                recorded.calls.append((__name, threading.get_ident(), ours))
                return __original(self, *args)

            monkeypatch.setattr(base, name, spy)
    return recorded


@pytest.fixture
def ours(settings) -> None:
    settings.MIDDLEWARE = OURS
    settings.ROOT_URLCONF = __name__


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user(
        "staff", password="secret-pw", is_staff=True, is_superuser=True
    )


def send_message(text: str = "echo hello") -> bytes:
    return msgspec.json.encode(jsonrpc_request("SendMessage", {"message": user_message(text)}))


def strip_cookie_values(response: HttpResponse) -> dict[str, str]:
    headers = {name: value for name, value in response.items() if name != "Set-Cookie"}
    headers["cookies"] = ",".join(sorted(response.cookies))
    return headers


@pytest.mark.parametrize("middleware", ["ours", "stock"])
async def test_a_json_rpc_call_makes_no_thread_hop_with_ours(settings, calls, middleware):
    settings.MIDDLEWARE = OURS if middleware == "ours" else STOCK
    response = await AsyncClient(enforce_csrf_checks=True).post(
        "/a2a/", send_message(), content_type="application/json"
    )
    assert response.status_code == 200
    assert "result" in msgspec.json.decode(response.content)
    # csrf_exempt view: the CSRF check is not made, but its process_view runs.
    drop_ins = middleware == "ours"
    assert calls.names(drop_ins=drop_ins) == EVERY_CALL
    off_thread = calls.off_thread(threading.get_ident(), drop_ins=drop_ins)
    if middleware == "ours":
        assert off_thread == set()
    else:  # the control: Django's classes hop for every call, the spy sees it
        assert off_thread == EVERY_CALL


async def test_headers_are_djangos(settings):
    settings.ROOT_URLCONF = __name__
    answers = {}
    for name, middleware in (("stock", STOCK), ("ours", OURS)):
        settings.MIDDLEWARE = middleware
        answers[name] = await AsyncClient().get("/admin/login/")
    assert answers["ours"].status_code == answers["stock"].status_code == 200
    ours, stock = (strip_cookie_values(answers[name]) for name in ("ours", "stock"))
    # Expires is "now" (never cache): the clock may tick between the two answers.
    expires = [parsedate_to_datetime(headers.pop("Expires")) for headers in (ours, stock)]
    assert abs(expires[0] - expires[1]) <= timedelta(seconds=2)
    assert ours == stock
    assert ours["X-Frame-Options"] == "DENY"
    assert ours["X-Content-Type-Options"] == "nosniff"
    assert "Cookie" in ours["Vary"]
    assert ours["cookies"] == "csrftoken"


async def test_login_saves_the_session_in_a_thread(ours, calls, user):
    client = AsyncClient(enforce_csrf_checks=True)
    page = await client.get("/admin/login/")
    token = page.cookies["csrftoken"].value
    calls.clear()
    login = await client.post(
        "/admin/login/?next=/admin/",
        {"username": "staff", "password": "secret-pw", "csrfmiddlewaretoken": token},
    )
    assert login.status_code == 302, login.content[:300]
    assert login["Location"] == "/admin/"
    # The form is parsed for the CSRF check and the new session is saved: both in the thread.
    off_thread = calls.off_thread(threading.get_ident())
    assert off_thread == {"CsrfViewMiddleware.process_view", "SessionMiddleware.process_response"}

    assert (await client.get("/admin/")).status_code == 200
    # The session authenticates JSON-RPC calls (with the CSRF token, as DRF's session
    # authentication requires): the task belongs to the user.
    calls.clear()
    response = await client.post(
        "/a2a/",
        send_message(),
        content_type="application/json",
        headers={"X-CSRFToken": client.cookies["csrftoken"].value},
    )
    task_id = msgspec.json.decode(response.content)["result"]["task"]["id"]
    assert await models.Task.objects.filter(id=task_id, owner=f"user:{user.pk}").aexists()
    assert calls.off_thread(threading.get_ident()) == set()


async def test_csrf_is_still_enforced(ours, user):
    client = AsyncClient(enforce_csrf_checks=True)
    await client.get("/admin/login/")
    refused = await client.post("/admin/login/", {"username": "staff", "password": "secret-pw"})
    assert refused.status_code == 403
    assert b"CSRF" in refused.content


async def test_csrf_token_in_the_session(ours, settings, calls, user):
    settings.CSRF_USE_SESSIONS = True
    client = AsyncClient(enforce_csrf_checks=True)
    page = await client.get("/admin/login/")
    assert "csrftoken" not in page.cookies
    token = page.context["csrf_token"]
    login = await client.post(
        "/admin/login/?next=/admin/",
        {"username": "staff", "password": "secret-pw", "csrfmiddlewaretoken": token},
    )
    assert login.status_code == 302
    assert {"CsrfViewMiddleware.process_request", "CsrfViewMiddleware.process_response"} <= (
        calls.off_thread(threading.get_ident())
    )


async def test_session_saved_on_every_request(ours, settings, calls, user):
    settings.SESSION_SAVE_EVERY_REQUEST = True
    client = AsyncClient()
    await client.aforce_login(user)
    calls.clear()
    response = await client.post("/a2a/", send_message(), content_type="application/json")
    assert "result" in msgspec.json.decode(response.content)
    assert calls.off_thread(threading.get_ident()) == {"SessionMiddleware.process_response"}


async def test_messages_stored_in_the_session_go_through_the_thread(ours, settings, calls, user):
    settings.MESSAGE_STORAGE = "django.contrib.messages.storage.session.SessionStorage"
    client = AsyncClient()
    await client.aforce_login(user)
    calls.clear()
    assert (await client.get("/messages/add/")).content == b"added"
    assert calls.off_thread(threading.get_ident()) == {
        "MessageMiddleware.process_response",
        "SessionMiddleware.process_response",
    }
    assert (await client.get("/messages/read/")).content == b"saved for later"
    assert (await client.get("/messages/read/")).content == b""


async def test_common_and_security_redirects(ours, settings):
    assert (await AsyncClient().get("/admin")).headers["Location"] == "/admin/"
    settings.SECURE_SSL_REDIRECT = True
    redirect = await AsyncClient().get("/admin/login/")
    assert redirect.status_code == 301
    assert redirect["Location"] == "https://testserver/admin/login/"


def test_sync_mode_is_djangos(ours, calls, user):
    client = Client(enforce_csrf_checks=True)
    page = client.get("/admin/login/")
    login = client.post(
        "/admin/login/?next=/admin/",
        {
            "username": "staff",
            "password": "secret-pw",
            "csrfmiddlewaretoken": page.cookies["csrftoken"].value,
        },
    )
    assert login.status_code == 302
    assert client.get("/admin/").status_code == 200
    # WSGI: every call in the request's own thread, as Django's classes do.
    assert calls.names() == EVERY_CALL
    assert calls.off_thread(threading.get_ident()) == set()


def test_every_stock_class_has_its_drop_in() -> None:
    from a2a_endpoint import middleware

    assert sorted(middleware.__all__) == sorted(NAMES)
    for name, stock in zip(NAMES, STOCK, strict=True):
        ours_class = getattr(middleware, name)
        assert stock.rpartition(".")[2] == name
        assert issubclass(ours_class, import_string(stock))
        assert issubclass(ours_class, middleware.InlineMiddlewareMixin)


async def test_asgi_handler_loads_the_drop_ins_for_djangos_paths(settings, calls):
    settings.MIDDLEWARE = [*STOCK, "django.middleware.gzip.GZipMiddleware"]
    original = handlers_base.import_string
    handler = ASGIHandler()
    assert handlers_base.import_string is original  # patched only while the handler loads
    status, headers, body = await asgi_request(handler, "/a2a/", send_message())
    assert status == 200
    assert "result" in msgspec.json.decode(body)
    assert headers[b"X-Frame-Options"] == b"DENY"
    # Every call of the seven was made by a drop-in, on the loop's thread.
    assert calls.names() == EVERY_CALL
    assert calls.off_thread(threading.get_ident()) == set()
    assert calls.names(drop_ins=False) == EVERY_CALL  # no stock instance in the chain


async def test_django_handler_keeps_djangos_classes(settings, calls):
    """The control for the test above: Django's own handler hops for every call."""
    from django.core.handlers.asgi import ASGIHandler as DjangoASGIHandler

    settings.MIDDLEWARE = STOCK
    status, _, _ = await asgi_request(DjangoASGIHandler(), "/a2a/", send_message())
    assert status == 200
    assert calls.names() == set()
    assert calls.off_thread(threading.get_ident(), drop_ins=False) == EVERY_CALL


def test_drop_ins_map_every_stock_path() -> None:
    assert sorted(DROP_INS) == sorted(STOCK)
    for stock, drop_in in DROP_INS.items():
        assert issubclass(import_string(drop_in), import_string(stock))
