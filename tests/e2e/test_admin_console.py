"""The task admin as an operator console, in headless Chromium against the sample project
under daphne: sign in, filter the list, open a task, read its timeline, cancel it.

The tests click and type like an operator, then check what the pages show and, where it
matters, what the server says through its own JSON-RPC endpoint and event stream.
"""

from __future__ import annotations

import time
import uuid

import pytest
from selenium.webdriver.remote.webdriver import WebDriver

from tests.e2e.admin_pages import AdminConsole, TaskFollower, seed_tasks
from tests.e2e.demo_page import WAIT_SECONDS, Account, jsonrpc
from tests.integration.servers import DaphneServer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def tasks(console_server: DaphneServer) -> dict[str, list[str]]:
    return seed_tasks(console_server)


@pytest.fixture
def console(
    browser: WebDriver, console_server: DaphneServer, console_superuser: Account
) -> AdminConsole:
    browser.delete_all_cookies()
    page = AdminConsole(browser, console_server.base_url)
    page.sign_in(console_superuser)
    return page


def start_long_job(server: DaphneServer) -> str:
    """A long_job task sent by an anonymous client, as soon as it is WORKING."""
    message = {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"text": "Build the report"}],
        "metadata": {"skill": "long_job"},
    }
    params = {"message": message, "configuration": {"returnImmediately": True}}
    task_id = jsonrpc(server.url("/a2a/"), "SendMessage", params)["task"]["id"]
    deadline = time.monotonic() + WAIT_SECONDS
    while task_state(server, task_id) != "TASK_STATE_WORKING":
        assert time.monotonic() < deadline, "the long job did not start"
        time.sleep(0.05)
    return task_id


def task_state(server: DaphneServer, task_id: str) -> str:
    task = jsonrpc(server.url("/a2a/"), "GetTask", {"id": task_id, "historyLength": 0})
    return task["status"]["state"]


def test_the_list_filters_by_owner_state_and_tenant(
    console: AdminConsole, tasks: dict[str, list[str]]
) -> None:
    alice, bob = tasks["alice"], tasks["bob"]
    assert set(alice + bob) <= set(console.listed_ids())

    console.type_filter("owner__exact", "alice")
    assert sorted(console.listed_ids()) == sorted(alice)
    assert console.count_label() == "2 tasks"
    choices = console.state_choices()
    assert "Completed (1)" in choices
    assert "Submitted (1)" in choices

    console.pick_state("Completed")
    assert console.listed_ids() == [alice[1]]  # the finished one
    assert console.count_label() == "1 task"

    console.open_list()
    console.type_filter("tenant__exact", "acme")
    assert console.listed_ids() == bob


def test_a_task_page_shows_its_timeline_and_cancels_it(
    console: AdminConsole, console_server: DaphneServer
) -> None:
    task_id = start_long_job(console_server)
    console.open_list()
    console.pick_state("Working")
    assert task_id in console.listed_ids()
    console.open_task(task_id)

    entries = console.timeline()
    assert [(e.source, e.kind, e.summary) for e in entries[:2]] == [
        ("message", "user", "Build the report"),
        ("event", "task", "created, Submitted: Build the report"),
    ]
    assert any(e.kind == "statusUpdate" and "Working" in e.summary for e in entries)
    assert console.field("state") == "Working"
    # Payloads start folded; one click unfolds one.
    assert not console.payload(1).is_displayed()
    payload = console.expand_payload(1)
    assert '"task": {' in payload
    assert task_id in payload
    assert not console.payload(0).is_displayed()

    follower = TaskFollower(console_server.url("/a2a/"), task_id).start()
    console.cancel()

    assert console.messages() == [f"Canceled task {task_id}."]
    assert console.field("state") == "Canceled"
    button = console.cancel_button()
    assert button is not None
    assert not button.is_enabled()  # a finished task: nothing to cancel
    assert console.timeline()[-1].summary == "→ Canceled"
    # Through the service, as CancelTask: a stream following the task saw it end.
    assert follower.ended.wait(WAIT_SECONDS)
    assert follower.states[-1] == "TASK_STATE_CANCELED"
    assert task_state(console_server, task_id) == "TASK_STATE_CANCELED"
