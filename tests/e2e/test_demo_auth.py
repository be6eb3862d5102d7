"""The demo page against an endpoint closed to anonymous callers (``A2A_OPEN_ENDPOINT=0``).

Without credentials every call is HTTP 401 with a JSON-RPC error, which the page shows with a
hint; with an API token in the header field (kept in the tab's sessionStorage) or a session
from the admin (with its CSRF token), the page works as it does on the open endpoint.
"""

from __future__ import annotations

import pytest

from tests.e2e.demo_page import Account, DemoPage, Snapshot, jsonrpc
from tests.integration.servers import DaphneServer, run_django

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

TOKEN_KEY = "a2a-demo.api-token"  # the page's sessionStorage key
UNAUTHENTICATED = "JSON-RPC error -31401: Authentication credentials were not provided."


def stored_tasks(server: DaphneServer) -> int:
    """How many tasks the server's database holds (whoever owns them)."""
    script = "from a2a_endpoint.models import Task; print('tasks=%d' % Task.objects.count())"
    output = run_django(["shell", "-c", script], server.env)
    return int(output.rsplit("tasks=", 1)[1].split()[0])


def completed_echo(demo: DemoPage, text: str) -> Snapshot:
    """Send ``text`` to the echo skill; the page once the task completed, as on the open server."""
    demo.pick_skill("echo")
    demo.send(text)
    done = demo.wait_for(
        lambda s: s.error is not None or (s.state == "COMPLETED" and s.send_enabled),
        "COMPLETED (or an error)",
    )
    assert done.error is None, done.error
    echo = done.artifact("echo")
    assert echo is not None
    assert (echo.text, echo.chunks, echo.complete) == (text, 1, True)
    assert echo.label == "complete"
    return done


def test_without_credentials_the_error_is_shown_and_no_task_is_made(
    closed_demo: DemoPage, closed_demo_server: DaphneServer
) -> None:
    closed_demo.pick_skill("echo")
    closed_demo.send("hello without a token")

    shown = closed_demo.wait_for(lambda s: s.error is not None, "the error")
    assert shown.error is not None
    lines = shown.error.splitlines()
    assert lines[0] == UNAUTHENTICATED
    assert "reason: UNAUTHENTICATED" in lines
    assert lines[-1].startswith("This endpoint needs a caller: enter an API token")
    assert "<" not in shown.error  # a readable message, never an HTML page
    assert "unexpected" not in shown.error.lower()
    assert shown.log_texts("error") == [shown.error]
    # Refused before any method ran: no task, in the page or on the server.
    assert (shown.state, shown.task_id, shown.context_id) == ("IDLE", "—", "—")
    assert shown.artifacts == []
    assert shown.send_enabled
    assert not shown.cancel_enabled
    assert stored_tasks(closed_demo_server) == 0


def test_with_a_token_the_echo_demo_completes(
    closed_demo: DemoPage, closed_demo_server: DaphneServer, demo_account: Account
) -> None:
    closed_demo.set_token(demo_account.token)

    done = completed_echo(closed_demo, "hello with a token")

    assert not done.progress_visible
    # The task belongs to the token's user: the same token reads it back.
    task = jsonrpc(
        closed_demo_server.url("/a2a/"),
        "GetTask",
        {"id": done.task_id, "historyLength": 0},
        token=demo_account.token,
    )
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"


def test_the_token_is_kept_in_session_storage_only_and_can_be_cleared(
    closed_demo: DemoPage, demo_account: Account
) -> None:
    closed_demo.set_token(demo_account.token)

    storage = closed_demo.storage()
    assert storage["session"] == {TOKEN_KEY: demo_account.token}
    assert storage["local"] == {}  # nothing in localStorage, the token least of all
    cookies = [cookie["value"] for cookie in closed_demo.driver.get_cookies()]
    assert demo_account.token not in cookies
    assert closed_demo.element("token-input").get_attribute("type") == "password"

    # Kept for the tab: a reload finds it again (and still never in localStorage).
    closed_demo.open()
    assert closed_demo.token_field() == demo_account.token
    assert closed_demo.storage() == {"local": {}, "session": {TOKEN_KEY: demo_account.token}}

    closed_demo.clear_token()

    assert closed_demo.token_field() == ""
    assert closed_demo.storage() == {"local": {}, "session": {}}
    closed_demo.pick_skill("echo")
    closed_demo.send("hello after clearing")
    shown = closed_demo.wait_for(lambda s: s.error is not None, "the error")
    assert shown.error is not None
    assert shown.error.startswith(UNAUTHENTICATED)
    assert shown.task_id == "—"


def test_unary_calls_send_the_token_too(closed_demo: DemoPage, demo_account: Account) -> None:
    closed_demo.set_token(demo_account.token)
    closed_demo.pick_skill("long_job")
    closed_demo.send("")
    closed_demo.wait_for(lambda s: s.progress > 0, "the progress bar to advance")

    closed_demo.cancel()  # CancelTask: a plain JSON answer, not a stream

    canceled = closed_demo.wait_for(
        lambda s: s.error is not None or (s.state == "CANCELED" and s.send_enabled),
        "CANCELED and the stream closed (or an error)",
    )
    assert canceled.error is None, canceled.error
    assert canceled.state == "CANCELED"
    assert not canceled.cancel_enabled


def test_a_wrong_token_is_refused_with_a_hint(closed_demo: DemoPage) -> None:
    closed_demo.set_token("not-a-valid-token")
    closed_demo.pick_skill("echo")
    closed_demo.send("hello with a wrong token")

    shown = closed_demo.wait_for(lambda s: s.error is not None, "the error")
    assert shown.error is not None
    lines = shown.error.splitlines()
    assert lines[0] == "JSON-RPC error -31401: Invalid token."
    assert lines[-1] == (
        "The API token was not accepted: check it, or clear it to use your admin session."
    )
    assert shown.task_id == "—"


def test_an_admin_session_works_without_a_token(
    closed_demo: DemoPage, closed_demo_server: DaphneServer, demo_account: Account
) -> None:
    # Signed in to the admin in the same browser: the page calls as that user, with the
    # csrftoken cookie's value in X-CSRFToken (DRF's SessionAuthentication checks it).
    closed_demo.sign_in_to_admin(demo_account)
    closed_demo.open()
    assert closed_demo.token_field() == ""

    done = completed_echo(closed_demo, "hello from my session")

    task = jsonrpc(
        closed_demo_server.url("/a2a/"),
        "GetTask",
        {"id": done.task_id, "historyLength": 0},
        token=demo_account.token,  # the same user: it owns the task
    )
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
