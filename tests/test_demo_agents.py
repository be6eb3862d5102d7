"""The sample project's demo agents, driven through the JSON-RPC endpoint."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from django.core.checks import Error
from django.test import override_settings

from a2a_endpoint import models
from a2a_endpoint.checks import check_settings
from a2a_endpoint.execution import runtime
from a2a_endpoint.testing import user_message
from project import settings as project_settings
from project.agents import LongJobDemo

pytestmark = [pytest.mark.django_db(transaction=True)]

# The project's own setting (its real card), with test-friendly timeouts.
DEMO_SETTINGS = {
    **project_settings.A2A_ENDPOINT,
    "BLOCKING_TIMEOUT": 10,
    "CANCEL_GRACE_PERIOD": 0.5,
}
SKILLS = ["echo", "long_job", "multi_turn", "fail"]


@pytest.fixture(autouse=True)
def demo_agent(monkeypatch):
    monkeypatch.setattr(LongJobDemo, "step_seconds", 0.01)
    with override_settings(A2A_ENDPOINT=DEMO_SETTINGS):
        yield


def skill_message(skill: str, text: str = "go", **fields: Any) -> dict[str, Any]:
    return user_message(text, metadata={"skill": skill}, **fields)


async def send(rpc, message: dict[str, Any], **configuration: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"message": message}
    if configuration:
        params["configuration"] = configuration
    return (await rpc.result("SendMessage", params))["task"]


def status_text(task: dict[str, Any]) -> str:
    return task["status"]["message"]["parts"][0]["text"]


async def wait_for(condition: Callable[[], Awaitable[bool]], timeout: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await condition():
        assert loop.time() < deadline, "condition not met before the deadline"
        await asyncio.sleep(0.02)


async def events_of(task_id: str) -> list[dict[str, Any]]:
    rows = models.TaskEvent.objects.filter(task_id=task_id).order_by("seq")
    return [row.payload async for row in rows]


# --- echo and routing -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "echoed"),
    [
        pytest.param(user_message("hello"), "hello", id="plain-text"),
        pytest.param(user_message("/echo hi there"), "hi there", id="command"),
        pytest.param(skill_message("echo", "hello"), "hello", id="metadata"),
        pytest.param(user_message("/nope x"), "/nope x", id="unknown-command-is-text"),
    ],
)
async def test_echo(rpc, message, echoed):
    task = await send(rpc, message)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    [artifact] = task["artifacts"]
    assert artifact["name"] == "echo"
    assert artifact["parts"] == [{"text": echoed}]


async def test_unknown_skill_in_metadata_is_rejected(rpc):
    task = await send(rpc, skill_message("translate"))
    assert task["status"]["state"] == "TASK_STATE_REJECTED"
    assert "'translate'" in status_text(task)
    for skill in SKILLS:
        assert skill in status_text(task)


# --- long_job -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "message",
    [
        pytest.param(skill_message("long_job"), id="metadata"),
        pytest.param(user_message("/long_job"), id="command"),
    ],
)
async def test_long_job_reports_progress_and_a_chunked_report(rpc, message):
    task = await send(rpc, message)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert status_text(task) == "The report is ready."
    [report] = task["artifacts"]
    assert report["name"] == "report"
    assert report["parts"] == [{"text": f"Step {n}: done.\n"} for n in range(1, 11)]

    events = await events_of(task["id"])
    progress = [
        event["statusUpdate"]["status"]["message"]
        for event in events
        if "statusUpdate" in event
        and event["statusUpdate"]["status"]["state"] == "TASK_STATE_WORKING"
        and "progress" in (event["statusUpdate"]["status"]["message"].get("metadata") or {})
    ]
    assert [m["metadata"]["progress"] for m in progress] == list(range(10, 101, 10))
    assert progress[2]["parts"] == [{"text": "Step 3/10 (30%)"}]
    chunks = [event["artifactUpdate"] for event in events if "artifactUpdate" in event]
    assert len(chunks) == 10
    assert {chunk["artifact"]["artifactId"] for chunk in chunks} == {report["artifactId"]}
    assert [chunk.get("append", False) for chunk in chunks] == [False] + [True] * 9
    assert [chunk.get("lastChunk", False) for chunk in chunks] == [False] * 9 + [True]
    stored = await models.Artifact.objects.aget(task_id=task["id"])
    assert stored.complete


async def test_cancel_stops_a_running_long_job(rpc, monkeypatch):
    monkeypatch.setattr(LongJobDemo, "step_seconds", 30.0)  # 5 minutes unless canceled
    # No forced stop within the test: the job must end by itself when it is canceled.
    with override_settings(A2A_ENDPOINT={**DEMO_SETTINGS, "CANCEL_GRACE_PERIOD": 60}):
        await _cancel_long_job(rpc)


async def _cancel_long_job(rpc) -> None:
    task = await send(rpc, skill_message("long_job"), returnImmediately=True)

    async def working() -> bool:
        current = await rpc.result("GetTask", {"id": task["id"]})
        return current["status"]["state"] == "TASK_STATE_WORKING"

    await wait_for(working)
    canceled = await rpc.result("CancelTask", {"id": task["id"]})
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"

    backend = runtime.get_backend()

    async def stopped() -> bool:
        return not backend.running(task["id"])

    # A step lasts 30 s: the job ends this soon only because it waits on the cancel signal.
    await wait_for(stopped, timeout=3.0)
    final = await rpc.result("GetTask", {"id": task["id"]})
    assert final["status"]["state"] == "TASK_STATE_CANCELED"
    assert final.get("artifacts", []) == []


# --- multi_turn and fail --------------------------------------------------------------------


async def test_multi_turn_asks_twice_then_greets(rpc):
    task = await send(rpc, skill_message("multi_turn", "hi"))
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert status_text(task) == "What is your name?"

    task = await send(rpc, user_message("Ada", taskId=task["id"]))
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert status_text(task) == "Nice to meet you, Ada. What is your favourite colour?"

    task = await send(rpc, user_message("Green", taskId=task["id"]))
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert status_text(task) == "Hello Ada! Green is a fine colour."
    roles = [message["role"] for message in task["history"]]
    assert roles == ["ROLE_USER", "ROLE_AGENT"] * 3


async def test_fail_shows_the_agent_error(rpc):
    task = await send(rpc, skill_message("fail"))
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    assert status_text(task) == "This demo always fails: this is how an agent reports an error."


# --- the card and the project setting -----------------------------------------------------------


async def test_card_lists_every_demo_skill(rpc):
    response = await rpc.http.get("/.well-known/agent-card.json")
    assert response.status_code == 200
    card = response.json()
    assert card["name"] == project_settings.A2A_ENDPOINT["CARD"]["name"]
    assert card["provider"]["organization"]
    assert card["documentationUrl"]
    assert [skill["id"] for skill in card["skills"]] == SKILLS
    for skill in card["skills"]:
        assert skill["name"]
        assert skill["description"]
        assert skill["tags"]
        assert skill["examples"]


def test_project_setting_passes_the_system_checks():
    with override_settings(A2A_ENDPOINT=project_settings.A2A_ENDPOINT):
        problems = check_settings()
    assert [problem for problem in problems if isinstance(problem, Error)] == []
