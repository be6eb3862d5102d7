"""Fixtures for the browser tests: the sample project under daphne and headless Chromium."""

from __future__ import annotations

import os
import re
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.remote.webdriver import WebDriver

from tests.e2e.demo_page import Account, DemoPage
from tests.integration.servers import DaphneServer, django_env, live_processes, run_django

SERVER_SETTINGS = "project.settings"
SERVER_APPLICATION = "project.asgi:application"
# Short steps keep the test quick; ten of them still leave time to see progress and cancel.
LONG_JOB_STEP_SECONDS = "0.3"
VIEWPORT = (1280, 800)
CHROMIUM_FLAGS = [
    "--headless=new",
    "--no-sandbox",  # CI runs as root, where Chromium's sandbox cannot start
    "--disable-gpu",
    "--disable-dev-shm-usage",  # containers have a small /dev/shm
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    f"--window-size={VIEWPORT[0]},{VIEWPORT[1]}",
]


def _executable(env_name: str, *names: str) -> str | None:
    """The program named by ``env_name``, else the first of ``names`` on PATH or in /usr/bin."""
    if os.environ.get(env_name):
        return shutil.which(os.environ[env_name])  # None unless it exists and runs
    for name in names:
        found = shutil.which(name) or shutil.which(name, path="/usr/bin")
        if found:
            return found
    return None


def _unavailable(reason: str) -> NoReturn:
    """Fail in CI (where ``.ci/run`` installs the browser), skip on a laptop without it."""
    if os.environ.get("A2A_REQUIRE_SERVICES") == "1":
        pytest.fail(f"{reason} (A2A_REQUIRE_SERVICES=1)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def browser_binaries() -> tuple[str, str]:
    """Paths of Chromium and its chromedriver (Debian: ``apt install chromium chromium-driver``)."""
    chromium = _executable("A2A_E2E_CHROMIUM", "chromium", "chromium-browser", "google-chrome")
    driver = _executable("A2A_E2E_CHROMEDRIVER", "chromedriver")
    if chromium is None or driver is None:
        _unavailable("Chromium and chromedriver are needed (apt install chromium chromium-driver)")
    return chromium, driver


def _demo_env(workdir: Path, *, open_endpoint: bool) -> dict[str, str]:
    """The sample project's environment: DEBUG defaults, a fresh SQLite file in ``workdir``.

    ``A2A_OPEN_ENDPOINT`` is always explicit, so that a value exported in the shell running
    the tests cannot close the open server (or open the closed one).
    """
    return django_env(
        SERVER_SETTINGS,
        A2A_DEMO_DB=str(workdir / "db.sqlite3"),
        DEMO_LONG_JOB_STEP_SECONDS=LONG_JOB_STEP_SECONDS,
        A2A_OPEN_ENDPOINT="1" if open_endpoint else "0",
    )


@pytest.fixture(scope="module")
def demo_server(
    browser_binaries: tuple[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DaphneServer]:
    """The sample project (DemoAgent) under daphne, on a fresh SQLite file of its own.

    Open to anonymous callers, as ``make run`` is (DEBUG on).
    """
    workdir = tmp_path_factory.mktemp("demo-server")
    env = _demo_env(workdir, open_endpoint=True)
    run_django(["migrate", "--noinput"], env)
    with DaphneServer(SERVER_APPLICATION, env=env, log_dir=workdir, name="demo-daphne") as server:
        yield server


# Run by `manage.py shell -c` in the closed server's database: a staff user (so that it can
# sign in to the admin) with a DRF token; prints the token's key on a line of its own.
_CREATE_ACCOUNT = """
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token
user = get_user_model().objects.create_user({username!r}, password={password!r}, is_staff=True)
print("token=" + Token.objects.create(user=user).key)
"""


@pytest.fixture(scope="module")
def closed_demo_server(
    browser_binaries: tuple[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DaphneServer]:
    """The sample project with ``A2A_OPEN_ENDPOINT=0``: every call needs a token or a session."""
    workdir = tmp_path_factory.mktemp("closed-demo-server")
    env = _demo_env(workdir, open_endpoint=False)
    run_django(["migrate", "--noinput"], env)
    with DaphneServer(
        SERVER_APPLICATION, env=env, log_dir=workdir, name="closed-demo-daphne"
    ) as server:
        yield server


@pytest.fixture(scope="module")
def demo_account(closed_demo_server: DaphneServer) -> Account:
    """A user of the closed server (in its database, through the server's environment)."""
    username, password = "demo-user", secrets.token_urlsafe(12)
    script = _CREATE_ACCOUNT.format(username=username, password=password)
    output = run_django(["shell", "-c", script], closed_demo_server.env)
    found = re.search(r"^token=(\w+)$", output, re.MULTILINE)
    assert found, f"no token in the output of manage.py shell:\n{output}"
    return Account(username=username, password=password, token=found[1])


#: The operator console's server (test_admin_console.py): a long job of ten 5 s steps, which
#: runs long enough to be found and canceled from the admin.
CONSOLE_LONG_JOB_STEP_SECONDS = "5"

_CREATE_SUPERUSER = """
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token
user = get_user_model().objects.create_superuser({username!r}, password={password!r})
print("token=" + Token.objects.create(user=user).key)
"""


@pytest.fixture(scope="module")
def console_server(
    browser_binaries: tuple[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DaphneServer]:
    """The sample project (open, as ``make run`` is) for the admin console's tests."""
    workdir = tmp_path_factory.mktemp("console-server")
    env = _demo_env(workdir, open_endpoint=True)
    env["DEMO_LONG_JOB_STEP_SECONDS"] = CONSOLE_LONG_JOB_STEP_SECONDS
    run_django(["migrate", "--noinput"], env)
    with DaphneServer(
        SERVER_APPLICATION, env=env, log_dir=workdir, name="console-daphne"
    ) as server:
        yield server


@pytest.fixture(scope="module")
def console_superuser(console_server: DaphneServer) -> Account:
    """A superuser of the console's server, who signs in to the admin."""
    username, password = "operator", secrets.token_urlsafe(12)
    script = _CREATE_SUPERUSER.format(username=username, password=password)
    output = run_django(["shell", "-c", script], console_server.env)
    found = re.search(r"^token=(\w+)$", output, re.MULTILINE)
    assert found, f"no token in the output of manage.py shell:\n{output}"
    return Account(username=username, password=password, token=found[1])


@pytest.fixture(scope="module")
def browser(
    browser_binaries: tuple[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[WebDriver]:
    """One headless Chromium for the module, with a fresh profile; always quit at the end."""
    chromium, driver_path = browser_binaries
    workdir = tmp_path_factory.mktemp("chromium")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in [*CHROMIUM_FLAGS, f"--user-data-dir={workdir / 'profile'}"]:
        options.add_argument(flag)
    # The page's console (errors included) goes under a failed test's report.
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(executable_path=driver_path, log_output=str(workdir / "chromedriver.log"))
    driver = webdriver.Chrome(options=options, service=service)
    try:
        fit_viewport(driver, *VIEWPORT)
        yield driver
    finally:
        driver.quit()  # ends Chromium and stops chromedriver


def fit_viewport(driver: WebDriver, width: int, height: int) -> None:
    """Size the window so that the page itself (not the window) is ``width`` x ``height``."""
    driver.set_window_size(width, height)
    inner = driver.execute_script("return [window.innerWidth, window.innerHeight]")
    driver.set_window_size(2 * width - inner[0], 2 * height - inner[1])


@pytest.fixture
def demo(browser: WebDriver, demo_server: DaphneServer) -> DemoPage:
    """The demo page, freshly loaded (a new page per test: no state carried over)."""
    return DemoPage(browser, demo_server.base_url).open()


@pytest.fixture
def closed_demo(browser: WebDriver, closed_demo_server: DaphneServer) -> DemoPage:
    """The demo page of the closed server, signed out and with no token kept.

    A reload keeps the tab's sessionStorage and the browser's cookies (a token or an admin
    session from an earlier test): both are cleared for the server's origin first.
    """
    page = DemoPage(browser, closed_demo_server.base_url)
    page.forget_caller()
    return page.open()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """On failure, show the server log and the browser console under the report."""
    report = yield
    if report.failed:
        for process in live_processes():
            report.sections.append(
                (f"{process.name} output ({process.log_path})", process.log_text())
            )
        driver = getattr(item, "funcargs", {}).get("browser")
        if driver is not None:
            try:
                lines = [f"{e['level']} {e['message']}" for e in driver.get_log("browser")]
            except Exception as error:  # the browser may be what broke
                lines = [f"(no console log: {error!r})"]
            report.sections.append(("browser console", "\n".join(lines) or "(empty)"))
    return report


@pytest.fixture
def screenshot_path() -> Path | None:
    """``docs/demo.png`` when ``A2A_UPDATE_SCREENSHOT=1`` asks to regenerate it, else None."""
    if os.environ.get("A2A_UPDATE_SCREENSHOT") != "1":
        return None
    return Path(__file__).resolve().parents[2] / "docs" / "demo.png"
