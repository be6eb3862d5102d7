"""The package smoke test's requests, run by a fresh virtualenv's python outside the checkout.

    python probe.py client          Django's test client: card, 401, SendMessage, GetTask, admin
    python probe.py http BASE_URL   a live server: card, SendMessage, SendStreamingMessage (SSE)
    python probe.py celery          the Celery backend's modules import and register their jobs

Each check raises AssertionError (exit status 1) with what it got.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request
import uuid
from importlib import metadata
from typing import Any

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "smoke_site.settings")
django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.test import Client  # noqa: E402
from django.urls import reverse  # noqa: E402
from rest_framework.authtoken.models import Token  # noqa: E402

import a2a_endpoint  # noqa: E402

RPC_HEADERS = {"A2A-Version": "1.0"}


def check(condition: bool, what: str, got: Any) -> None:
    if not condition:
        raise AssertionError(f"{what}; got: {got!r}")


def installed_copy() -> None:
    """The package must come from the virtualenv, not from a source tree."""
    where = os.path.realpath(a2a_endpoint.__file__)
    check(where.startswith(os.path.realpath(sys.prefix)), "a2a_endpoint inside the venv", where)
    print(f"a2a-endpoint {metadata.version('a2a-endpoint')} from {where}")


def make_token() -> str:
    user, _ = get_user_model().objects.get_or_create(
        username="smoke", defaults={"is_staff": True, "is_superuser": True}
    )
    token, _ = Token.objects.get_or_create(user=user)
    return token.key


def send_message(text: str, method: str = "SendMessage") -> dict[str, Any]:
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"message": message}}


def check_card(card: dict[str, Any]) -> None:
    check(card.get("name") == "Smoke", "the card's name", card)
    check([s["id"] for s in card.get("skills", [])] == ["echo"], "the card's skills", card)
    urls = [i.get("url", "") for i in card.get("supportedInterfaces", [])]
    check(any(u.endswith("/a2a/") for u in urls), "the card names the JSON-RPC endpoint", urls)


def check_echo_task(answer: dict[str, Any], text: str) -> str:
    task = answer.get("result", {}).get("task", {})
    check(task.get("status", {}).get("state") == "TASK_STATE_COMPLETED", "a completed task", answer)
    parts = [p for a in task.get("artifacts", []) for p in a.get("parts", [])]
    check(parts == [{"text": text}], "the echoed artifact", task.get("artifacts"))
    return task["id"]


def client_checks(token: str) -> None:
    client = Client(headers=RPC_HEADERS)
    card = client.get("/.well-known/agent-card.json")
    check(card.status_code == 200, "GET the card: 200", card.status_code)
    check_card(card.json())

    anonymous = client.post("/a2a/", send_message("hi"), content_type="application/json")
    check(anonymous.status_code == 401, "an anonymous SendMessage: 401", anonymous.content)
    check(anonymous.json()["error"]["code"] == -31401, "error -31401", anonymous.content)

    auth = {"Authorization": f"Bearer {token}"}
    sent = client.post(
        "/a2a/", send_message("hello"), content_type="application/json", headers=auth
    )
    check(sent.status_code == 200, "SendMessage: 200", sent.content)
    task_id = check_echo_task(sent.json(), "hello")
    get = {"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task_id}}
    got = client.post("/a2a/", get, content_type="application/json", headers=auth)
    check(got.json()["result"]["id"] == task_id, "GetTask finds the task", got.content)
    admin_checks(task_id)
    print(f"test client: card, 401, SendMessage and GetTask ({task_id}), admin pages: OK")


def admin_checks(task_id: str) -> None:
    """The admin's pages render from the installed package's templates."""
    client = Client()
    client.force_login(get_user_model().objects.get(username="smoke"))
    listing = client.get(reverse("admin:a2a_endpoint_task_changelist"))
    check(listing.status_code == 200, "the admin's task list: 200", listing.status_code)
    check(task_id in listing.content.decode(), "the task on the admin's list", task_id)
    page = client.get(reverse("admin:a2a_endpoint_task_change", args=[task_id]))
    check(page.status_code == 200, "the admin's task page: 200", page.status_code)


def post(base_url: str, body: dict[str, Any], token: str) -> urllib.request.Request:
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    data = json.dumps(body).encode()
    return urllib.request.Request(f"{base_url}/a2a/", data, {**headers, **RPC_HEADERS})


def read_sse(response: Any) -> list[dict[str, Any]]:
    """The data of each event, until the server closes the stream."""
    return [
        json.loads(line[5:])
        for line in response.read().decode().splitlines()
        if line.startswith("data:")
    ]


def http_checks(base_url: str, token: str) -> None:
    with urllib.request.urlopen(f"{base_url}/.well-known/agent-card.json", timeout=10) as answer:
        check(answer.status == 200, "GET the card: 200", answer.status)
        check_card(json.load(answer))
    with urllib.request.urlopen(post(base_url, send_message("over http"), token), timeout=30) as r:
        task_id = check_echo_task(json.load(r), "over http")
    stream = post(base_url, send_message("streamed", "SendStreamingMessage"), token)
    with urllib.request.urlopen(stream, timeout=30) as response:
        kind = response.headers.get("Content-Type", "")
        check(kind.startswith("text/event-stream"), "an SSE answer", kind)
        events = [event["result"] for event in read_sse(response)]
    check(bool(events) and "task" in events[0], "the stream starts with the task", events)
    last = events[-1].get("statusUpdate", {}).get("status", {}).get("state")
    check(last == "TASK_STATE_COMPLETED", "the stream ends with COMPLETED", events[-1])
    print(f"{base_url}: card, SendMessage ({task_id}), a stream of {len(events)} events: OK")


def celery_checks() -> None:
    from celery import current_app

    import a2a_endpoint.tasks  # noqa: F401  (the Celery jobs: shared tasks)

    names = {name for name in current_app.tasks if name.startswith("a2a_endpoint.")}
    check("a2a_endpoint.run_agent_task" in names, "the agent job registered", sorted(names))
    print(f"celery: {', '.join(sorted(names))}: OK")


def main(argv: list[str]) -> None:
    installed_copy()
    mode = argv[1] if len(argv) > 1 else ""
    if mode == "client":
        client_checks(make_token())
    elif mode == "http":
        http_checks(argv[2].rstrip("/"), make_token())
    elif mode == "celery":
        celery_checks()
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    try:
        main(sys.argv)
    except urllib.error.HTTPError as exc:
        raise AssertionError(f"{exc.url}: HTTP {exc.code}: {exc.read()[:500]!r}") from exc
