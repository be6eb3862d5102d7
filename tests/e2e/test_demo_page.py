"""The demo page at ``/`` in headless Chromium against a live daphne serving the sample project.

The page is a plain A2A client: these tests click and type like a person, then check what the
page shows and, where it matters, what the server says through its own JSON-RPC endpoint.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from selenium.webdriver.remote.webdriver import WebDriver

from tests.e2e.demo_page import DemoPage, Snapshot, jsonrpc
from tests.e2e.proxy import CuttableProxy
from tests.integration.servers import DaphneServer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

LONG_JOB_STEPS = 10


def report_text(chunks: int) -> str:
    """What the long job's ``report`` artifact holds after ``chunks`` chunks."""
    return "".join(f"Step {step}: done.\n" for step in range(1, chunks + 1))


def server_task(server: DaphneServer, task_id: str) -> dict:
    return jsonrpc(server.url("/a2a/"), "GetTask", {"id": task_id, "historyLength": 0})


def test_skill_picker_is_built_from_the_agent_card(demo: DemoPage) -> None:
    assert demo.skills() == ["echo", "long_job", "multi_turn", "fail"]
    snapshot = demo.snapshot()
    assert snapshot.state == "IDLE"
    assert snapshot.send_enabled
    assert not snapshot.cancel_enabled


def test_long_job_streams_progress_and_chunks_then_cancel(
    demo: DemoPage, demo_server: DaphneServer, screenshot_path: Path | None
) -> None:
    demo.pick_skill("long_job")
    demo.send("Build the report")

    first = demo.wait_for(lambda s: s.progress > 0, "the progress bar to advance")
    assert first.state == "WORKING"
    assert first.progress_visible
    assert first.cancel_enabled
    assert not first.send_enabled  # the stream is open
    # Live, not one burst at the end: the bar moves again while the job still runs.
    later = demo.wait_for(
        lambda s: s.progress > first.progress and s.artifact("report"), "more progress"
    )
    report = later.artifact("report")
    assert report is not None
    assert (report.complete, report.label) == (False, "streaming…")
    assert report.text == report_text(report.chunks)
    assert f"Step {later.progress // 10}/10 ({later.progress}%)" in later.log_texts()
    if screenshot_path is not None:
        demo.wait_for(lambda s: s.progress >= 40 and s.bar_settled, "the bar to show 40% or more")
        demo.screenshot(screenshot_path)

    demo.cancel()

    demo.wait_for(lambda s: s.state == "CANCELED", "the CANCELED state")
    # The stream closed at the terminal event (Send is enabled again) and Cancel is done.
    canceled = demo.wait_for(lambda s: s.send_enabled, "the stream to close")
    assert canceled.state == "CANCELED"
    assert not canceled.cancel_enabled
    assert canceled.error is None
    assert 0 < canceled.progress < 100
    # Every chunk arrived once, in order, and the page shows what the server stored.
    task = server_task(demo_server, canceled.task_id)
    assert task["status"]["state"] == "TASK_STATE_CANCELED"
    stored = "".join(part["text"] for part in task["artifacts"][0]["parts"])
    report = canceled.artifact("report")
    assert report is not None
    assert (report.complete, report.label) == (False, "incomplete")  # canceled midway
    assert report.text == stored == report_text(report.chunks)
    assert report.chunks < LONG_JOB_STEPS


def test_cancel_from_another_client_arrives_on_the_stream(
    demo: DemoPage, demo_server: DaphneServer
) -> None:
    demo.pick_skill("long_job")
    demo.send("")
    working = demo.wait_for(lambda s: s.progress > 0, "the progress bar to advance")

    jsonrpc(demo_server.url("/a2a/"), "CancelTask", {"id": working.task_id})

    canceled = demo.wait_for(
        lambda s: s.state == "CANCELED" and s.send_enabled, "CANCELED from the stream"
    )
    assert not canceled.cancel_enabled
    assert canceled.error is None
    assert canceled.log_texts()[-1] == "Task canceled."


def test_dropped_stream_resumes_with_subscribe_to_task(
    browser: WebDriver, demo_server: DaphneServer
) -> None:
    with CuttableProxy(demo_server.host, demo_server.port) as proxy:
        # Through the proxy: the card, built from the request's host, names it as endpoint.
        demo = DemoPage(browser, proxy.base_url).open()
        demo.pick_skill("long_job")
        demo.send("")
        demo.wait_for(lambda s: s.progress >= 20, "20% progress")

        assert proxy.cut() >= 1

        done = demo.wait_for(
            lambda s: s.state == "COMPLETED" and s.send_enabled, "COMPLETED after the cut"
        )
    assert done.error is None
    assert done.log_texts("system") == ["Connection lost: resubscribing."]
    # Resumed after the last event seen (Last-Event-ID), not from a snapshot: every progress
    # message of the gap is there, once, and every chunk once, in order.
    steps = [text for text in done.log_texts() if text.startswith("Step ")]
    percents = [step * 10 for step in range(1, LONG_JOB_STEPS + 1)]
    assert steps == [f"Step {p // 10}/10 ({p}%)" for p in percents]
    report = done.artifact("report")
    assert report is not None
    assert (report.chunks, report.complete) == (LONG_JOB_STEPS, True)
    assert report.text == report_text(LONG_JOB_STEPS)
    assert done.progress == 100


def test_multi_turn_answers_input_required_questions(demo: DemoPage) -> None:
    demo.pick_skill("multi_turn")
    demo.send("Hi there")

    asked = demo.wait_for(lambda s: s.question is not None, "the first question")
    assert asked.question == "What is your name?"
    assert asked.state == "INPUT_REQUIRED"
    assert asked.cancel_enabled  # an interrupted task can still be canceled
    assert not asked.progress_visible  # this demo reports no progress

    demo.answer("Ada")
    colour = "Nice to meet you, Ada. What is your favourite colour?"
    again = demo.wait_for(lambda s: s.question == colour, "the second question")
    assert again.task_id == asked.task_id  # the answer continued the same task

    demo.answer("Blue")
    done = demo.wait_for(lambda s: s.state == "COMPLETED" and s.send_enabled, "COMPLETED")
    assert done.task_id == asked.task_id
    assert done.question is None
    assert done.log_texts()[-1] == "Hello Ada! Blue is a fine colour."
    assert done.log_texts("user") == ["Hi there", "Ada", "Blue"]
    assert not done.cancel_enabled


def test_echo_completes_with_a_finished_artifact(demo: DemoPage) -> None:
    demo.pick_skill("echo")
    demo.send("hello from the browser")

    done = demo.wait_for(lambda s: s.state == "COMPLETED" and s.send_enabled, "COMPLETED")
    echo = done.artifact("echo")
    assert echo is not None
    assert (echo.text, echo.chunks, echo.complete) == ("hello from the browser", 1, True)
    assert echo.label == "complete"
    assert not done.progress_visible  # echo reports no progress


def test_agent_failure_is_shown(demo: DemoPage) -> None:
    demo.pick_skill("fail")
    demo.send("please fail")

    failed = demo.wait_for(lambda s: s.state == "FAILED" and s.send_enabled, "FAILED")
    assert failed.log_texts()[-1] == (
        "This demo always fails: this is how an agent reports an error."
    )
    assert not failed.cancel_enabled


def test_jsonrpc_error_is_shown_readably(demo: DemoPage) -> None:
    # A message over the server's MAX_REQUEST_BYTES (1 MiB): the endpoint refuses it with a
    # JSON-RPC error body (HTTP 413), which the page must show, code and message.
    demo.driver.execute_script(
        "document.querySelector('[data-testid=\"message-input\"]').value = 'x'.repeat(1100000);"
    )
    demo.element("send-button").click()

    shown: Snapshot = demo.wait_for(lambda s: s.error is not None, "the error")
    assert shown.error is not None
    assert shown.error.startswith("JSON-RPC error -32600: Request body is larger than")
    assert shown.send_enabled
    assert shown.state == "IDLE"
