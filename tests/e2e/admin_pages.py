"""Page objects for the task admin (the operator console) in a browser, through Selenium,
and the helpers its browser tests use to set up tasks and follow one from outside."""

from __future__ import annotations

import json
import re
import threading
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

from tests.e2e.demo_page import POLL_SECONDS, WAIT_SECONDS, Account
from tests.integration.servers import DaphneServer, run_django

CHANGELIST = "/admin/a2a_endpoint/task/"

# Run by `manage.py shell -c` in the server's database: tasks of two owners written through
# the store as SendMessage writes them (no job: they stay as they are), one of them finished;
# prints each task's id as "<owner>=<id>".
_SEED_TASKS = """
import uuid
from a2a_endpoint import types
from a2a_endpoint.execution import runtime
from a2a_endpoint.lifecycle import TaskState
store = runtime.get_store()
def task(owner, tenant=""):
    message = types.Message(message_id=str(uuid.uuid4()), role=types.Role.USER,
                            parts=[types.Part(text="hello from " + owner)])
    record = store.create_task(owner=owner, tenant=tenant, context_id=str(uuid.uuid4()),
                               message=message)
    print(owner + "=" + record.id)
    return record.id
task("alice")
done = task("alice")
store.update_status(done, TaskState.COMPLETED)
task("bob", tenant="acme")
"""


def seed_tasks(server: DaphneServer) -> dict[str, list[str]]:
    """Tasks of alice (two, one completed) and bob (tenant acme) in the server's database."""
    output = run_django(["shell", "-c", _SEED_TASKS], server.env)
    tasks: dict[str, list[str]] = {}
    for owner, task_id in re.findall(r"^(\w+)=([0-9a-f-]{36})$", output, re.MULTILINE):
        tasks.setdefault(owner, []).append(task_id)
    assert sum(map(len, tasks.values())) == 3, output
    return tasks


@dataclass
class TaskFollower:
    """A SubscribeToTask stream read in a thread: the states it saw, until a terminal one."""

    endpoint: str
    task_id: str
    states: list[str] = field(default_factory=list)
    opened: threading.Event = field(default_factory=threading.Event)
    ended: threading.Event = field(default_factory=threading.Event)

    def start(self) -> TaskFollower:
        threading.Thread(target=self._read, daemon=True).start()
        assert self.opened.wait(WAIT_SECONDS), "the stream did not open"
        return self

    def _read(self) -> None:
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SubscribeToTask",
            "params": {"id": self.task_id},
        }
        headers = {"A2A-Version": "1.0", "Accept": "text/event-stream"}
        try:
            with httpx.stream(
                "POST", self.endpoint, json=body, headers=headers, timeout=WAIT_SECONDS * 3
            ) as response:
                for line in response.iter_lines():
                    if line.startswith("data:"):
                        # Until the server ends the stream, at the task's terminal state.
                        self._take(json.loads(line.removeprefix("data:")))
        finally:
            self.opened.set()
            self.ended.set()

    def _take(self, answer: dict[str, Any]) -> None:
        result = answer["result"]
        if "task" in result:  # the snapshot, first (A2A §3.1.6)
            self.states.append(result["task"]["status"]["state"])
            self.opened.set()
        elif "statusUpdate" in result:
            self.states.append(result["statusUpdate"]["status"]["state"])


@dataclass(frozen=True)
class TimelineEntry:
    source: str
    number: int
    kind: str
    summary: str


class AdminConsole:
    """The task admin's list and pages in a browser, by their admin markup and ``data-testid``."""

    def __init__(self, driver: WebDriver, base_url: str) -> None:
        self.driver = driver
        self.base_url = base_url

    def wait_until(self, condition: Callable[[], Any], what: str) -> Any:
        wait = WebDriverWait(self.driver, WAIT_SECONDS, poll_frequency=POLL_SECONDS)
        return wait.until(lambda _driver: condition(), f"waited {WAIT_SECONDS} s for {what}")

    def css(self, selector: str) -> list[WebElement]:
        return self.driver.find_elements(By.CSS_SELECTOR, selector)

    def _navigate(self, act: Callable[[], None], what: str) -> None:
        """Do ``act`` (a click, a submit) and wait until the next page has replaced this one."""
        page = self.driver.find_element(By.TAG_NAME, "html")

        def replaced() -> bool:
            try:
                page.tag_name  # noqa: B018  (raises once the old page is gone)
            except Exception:
                return self.driver.execute_script("return document.readyState") == "complete"
            return False

        act()
        self.wait_until(replaced, what)

    # --- signing in, the list --------------------------------------------------------------

    def sign_in(self, account: Account) -> None:
        self.driver.get(self.base_url + "/admin/login/?next=" + CHANGELIST)
        self.driver.find_element(By.ID, "id_username").send_keys(account.username)
        self.driver.find_element(By.ID, "id_password").send_keys(account.password)
        submit = self.driver.find_element(By.CSS_SELECTOR, "form#login-form [type=submit]")
        self._navigate(submit.click, "the task list after signing in")

    def open_list(self, **query: str) -> None:
        self.driver.get(self.base_url + CHANGELIST + "?" + urllib.parse.urlencode(query))

    def listed_ids(self) -> list[str]:
        return [cell.text for cell in self.css("#result_list tbody th.field-id a")]

    def count_label(self) -> str:
        return self.css('[data-testid="task-count"]')[0].text

    def state_choices(self) -> dict[str, str]:
        """The state filter's links: label with its count → the link's query."""
        links = self.css('#changelist-filter details[data-filter-title^="state"] li a')
        return {link.text: link.get_attribute("href") or "" for link in links}

    def pick_state(self, label: str) -> None:
        link = next(
            link
            for link in self.css('#changelist-filter details[data-filter-title^="state"] li a')
            if link.text.startswith(label + " (")
        )
        self._navigate(link.click, f"the list of {label} tasks")

    def type_filter(self, parameter: str, value: str) -> None:
        form = self.css(f'form[data-testid="filter-{parameter}"]')[0]
        box = form.find_element(By.CSS_SELECTOR, f'input[name="{parameter}"]')
        box.clear()
        box.send_keys(value)
        button = form.find_element(By.CSS_SELECTOR, "input[type=submit]")
        self._navigate(button.click, f"the list filtered by {parameter}")

    def open_task(self, task_id: str) -> None:
        link = self.driver.find_element(By.LINK_TEXT, task_id)
        self._navigate(link.click, "the task's page")

    # --- a task's page ----------------------------------------------------------------------

    def field(self, name: str) -> str:
        """A read-only field of the task page, as shown."""
        return self.css(f".field-{name} .readonly")[0].text

    def timeline(self) -> list[TimelineEntry]:
        rows = self.css('[data-testid="timeline-entry"]')
        return [
            TimelineEntry(
                source=row.get_attribute("data-source") or "",
                number=int(row.get_attribute("data-number") or 0),
                kind=row.find_elements(By.TAG_NAME, "td")[1].text,
                summary=row.find_element(By.CSS_SELECTOR, '[data-testid="timeline-summary"]').text,
            )
            for row in rows
        ]

    def payload(self, index: int) -> WebElement:
        """The ``<pre>`` of the payload of the timeline's entry ``index``."""
        details = self.css('[data-testid="timeline-payload"]')[index]
        return details.find_element(By.TAG_NAME, "pre")

    def expand_payload(self, index: int) -> str:
        details = self.css('[data-testid="timeline-payload"]')[index]
        details.find_element(By.TAG_NAME, "summary").click()
        pre = details.find_element(By.TAG_NAME, "pre")
        self.wait_until(pre.is_displayed, "the payload to unfold")
        return pre.text

    def cancel_button(self) -> WebElement | None:
        found = self.css('[data-testid="cancel-task"]')
        return found[0] if found else None

    def cancel(self) -> None:
        button = self.cancel_button()
        assert button is not None, "no Cancel task button"
        self._navigate(button.click, "the task's page after Cancel task")

    def messages(self) -> list[str]:
        return [item.text for item in self.css("ul.messagelist li")]
