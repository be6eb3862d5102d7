"""A page object for the demo page: drive it and read what it shows, through Selenium."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from selenium.common.exceptions import TimeoutException
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

# Long enough for a slow CI machine; every wait polls and returns as soon as it holds.
WAIT_SECONDS = 20.0
POLL_SECONDS = 0.05

# What a person sees, read from the DOM in one round trip (one consistent moment).
_SNAPSHOT_JS = """
const q = (id) => document.querySelector(`[data-testid="${id}"]`);
const shown = (node) => node.getClientRects().length > 0;  // laid out, so on screen
const artifacts = Array.from(document.querySelectorAll('[data-testid="artifact"]'), (a) => ({
  id: a.dataset.artifactId,
  name: a.querySelector(".name").textContent,
  chunks: Number(a.dataset.chunks),
  complete: a.dataset.complete === "true",
  label: a.querySelector(".pill").textContent,
  text: a.querySelector('[data-testid="artifact-content"]').textContent,
}));
const log = Array.from(document.querySelectorAll('[data-testid="log-entry"]'), (li) => ({
  kind: li.dataset.kind,
  who: li.querySelector(".who").textContent,
  text: li.querySelector(".text").textContent,
}));
return {
  state: q("state").dataset.state,
  taskId: q("task-id").textContent,
  contextId: q("context-id").textContent,
  progress: Number(q("progress").dataset.progress),
  progressVisible: shown(q("progress")),
  // The bar's drawn width has caught up with its value (its CSS transition is over).
  barSettled: Math.abs(q("progress").querySelector(".bar").getBoundingClientRect().width
    - q("progress").querySelector(".track").getBoundingClientRect().width
      * Number(q("progress").dataset.progress) / 100) < 1,
  question: shown(q("input-panel")) ? q("input-question").textContent : null,
  error: shown(q("error")) ? q("error").textContent : null,
  sendEnabled: !q("send-button").disabled,
  cancelEnabled: !q("cancel-button").disabled,
  artifacts,
  log,
};
"""


@dataclass(frozen=True)
class Account:
    """A user of the server: a password for the admin and a DRF token for the API."""

    username: str
    password: str
    token: str


@dataclass(frozen=True)
class Artifact:
    id: str
    name: str
    chunks: int
    complete: bool
    label: str
    text: str


@dataclass(frozen=True)
class Snapshot:
    """The page's visible state at one moment."""

    state: str
    task_id: str
    context_id: str
    progress: int
    progress_visible: bool
    bar_settled: bool
    question: str | None
    error: str | None
    send_enabled: bool
    cancel_enabled: bool
    artifacts: list[Artifact]
    log: list[dict[str, str]]

    def artifact(self, name: str) -> Artifact | None:
        return next((artifact for artifact in self.artifacts if artifact.name == name), None)

    def log_texts(self, kind: str | None = None) -> list[str]:
        return [entry["text"] for entry in self.log if kind is None or entry["kind"] == kind]


class DemoPage:
    """The page at ``/`` in a browser: actions by ``data-testid``, state via ``snapshot()``."""

    def __init__(self, driver: WebDriver, base_url: str) -> None:
        self.driver = driver
        self.base_url = base_url

    def open(self) -> DemoPage:
        self.driver.get(self.base_url + "/")
        # The page marks itself ready once it has read the card and built the skill picker.
        self.wait_until(
            lambda: self.driver.execute_script("return document.body.dataset.ready === 'true'"),
            "the page to load the agent card",
        )
        return self

    def element(self, testid: str) -> WebElement:
        return self.driver.find_element(By.CSS_SELECTOR, f'[data-testid="{testid}"]')

    def snapshot(self) -> Snapshot:
        raw = self.driver.execute_script(_SNAPSHOT_JS)
        return Snapshot(
            state=raw["state"],
            task_id=raw["taskId"],
            context_id=raw["contextId"],
            progress=int(raw["progress"]),
            progress_visible=raw["progressVisible"],
            bar_settled=raw["barSettled"],
            question=raw["question"],
            error=raw["error"],
            send_enabled=raw["sendEnabled"],
            cancel_enabled=raw["cancelEnabled"],
            artifacts=[Artifact(**artifact) for artifact in raw["artifacts"]],
            log=raw["log"],
        )

    def wait_until(
        self, condition: Callable[[], Any], what: str, timeout: float = WAIT_SECONDS
    ) -> Any:
        """Poll ``condition`` until it is truthy (its value is returned) or fail saying ``what``."""
        wait = WebDriverWait(self.driver, timeout, poll_frequency=POLL_SECONDS)
        return wait.until(lambda _driver: condition(), f"waited {timeout} s for {what}")

    def wait_for(self, check: Callable[[Snapshot], Any], what: str) -> Snapshot:
        """Wait until ``check(snapshot)`` holds; the snapshot that satisfied it."""

        def satisfied() -> Snapshot | None:
            snapshot = self.snapshot()
            return snapshot if check(snapshot) else None

        try:
            return self.wait_until(satisfied, what)
        except TimeoutException as error:
            # Say what the page showed when the wait ran out, not only what was expected.
            raise AssertionError(f"{error.msg}\nThe page showed: {self.snapshot()}") from None

    # --- actions ----------------------------------------------------------------------

    def skills(self) -> list[str]:
        options = self.driver.find_elements(By.CSS_SELECTOR, '[data-testid="skill-option"]')
        return [option.get_attribute("data-skill") or "" for option in options]

    def pick_skill(self, skill_id: str) -> None:
        self.driver.find_element(
            By.CSS_SELECTOR, f'[data-testid="skill-option"][data-skill="{skill_id}"]'
        ).click()

    def send(self, text: str) -> None:
        box = self.element("message-input")
        box.clear()
        box.send_keys(text)
        self.element("send-button").click()

    def answer(self, text: str) -> None:
        box = self.element("answer-input")
        box.clear()
        box.send_keys(text)
        self.element("answer-button").click()

    def cancel(self) -> None:
        self.element("cancel-button").click()

    # --- the caller: API token, admin session ---------------------------------------------

    def set_token(self, token: str) -> None:
        box = self.element("token-input")
        box.clear()
        box.send_keys(token)

    def clear_token(self) -> None:
        self.element("token-clear").click()

    def token_field(self) -> str:
        return self.element("token-input").get_attribute("value") or ""

    def storage(self) -> dict[str, dict[str, str]]:
        """Everything the page's origin keeps in ``localStorage`` and ``sessionStorage``."""
        return self.driver.execute_script(
            "const all = (s) => Object.fromEntries(Array.from({length: s.length},"
            " (_, i) => [s.key(i), s.getItem(s.key(i))]));"
            "return {local: all(localStorage), session: all(sessionStorage)};"
        )

    def forget_caller(self) -> None:
        """Sign out and drop a kept token: clear this origin's cookies and storage.

        Loads a page of the origin (not the demo page) to reach its storage: reloading the
        demo page itself keeps the tab's sessionStorage.
        """
        self.driver.get(self.base_url + "/.well-known/agent-card.json")
        self.driver.execute_script("localStorage.clear(); sessionStorage.clear();")
        self.driver.delete_all_cookies()

    def sign_in_to_admin(self, account: Account) -> None:
        """Log in with the admin's form, as a person would: a session and a csrftoken cookie."""
        self.driver.get(self.base_url + "/admin/login/?next=/admin/")
        self.driver.find_element(By.ID, "id_username").send_keys(account.username)
        self.driver.find_element(By.ID, "id_password").send_keys(account.password)
        self.driver.find_element(By.CSS_SELECTOR, "form#login-form [type=submit]").click()
        self.wait_until(
            lambda: self.driver.find_elements(By.CSS_SELECTOR, "#logout-form, #user-tools"),
            "the admin's signed-in page",
        )

    def screenshot(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        # Clicking scrolled the page: show it from the top, as a person arriving sees it.
        self.driver.execute_script("window.scrollTo(0, 0); document.activeElement.blur();")
        if not self.driver.save_screenshot(str(path)):
            raise RuntimeError(f"the browser could not save a screenshot to {path}")


def jsonrpc(endpoint: str, method: str, params: dict[str, Any], token: str | None = None) -> Any:
    """Call the server directly (not through the page): the answer's ``result``."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    headers = {"Content-Type": "application/json", "A2A-Version": "1.0"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(endpoint, data=body.encode(), headers=headers, method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        answer = json.load(response)
    assert "result" in answer, answer
    return answer["result"]
