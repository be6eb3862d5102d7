"""The sample project's agent for the A2A conformance kit: what each messageId prefix does."""

from __future__ import annotations

import base64
import uuid
from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings

from a2a_endpoint.testing import user_message

pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def tck_agent():
    with override_settings(
        A2A_ENDPOINT={**settings.A2A_ENDPOINT, "AGENT": "project.agents.tck.TckAgent"}
    ):
        yield


async def send(rpc, prefix: str) -> dict[str, Any]:
    message = user_message("tck", messageId=f"{prefix}-{uuid.uuid4().hex}")
    return await rpc.result("SendMessage", {"message": message})


@pytest.mark.parametrize(
    ("prefix", "parts"),
    [
        ("tck-artifact-text", [{"text": "Generated text content"}]),
        (
            "tck-artifact-file",
            [
                {
                    "raw": base64.b64encode(b"tck").decode(),
                    "filename": "output.txt",
                    "mediaType": "text/plain",
                }
            ],
        ),
        (
            "tck-artifact-file-url",
            [
                {
                    "url": "https://example.com/output.txt",
                    "filename": "output.txt",
                    "mediaType": "text/plain",
                }
            ],
        ),
        ("tck-artifact-data", [{"data": {"key": "value", "count": 42}}]),
        ("tck-stream-001", [{"text": "Stream hello from TCK"}]),
        ("tck-stream-artifact-chunked", [{"text": "chunk-1 "}, {"text": "chunk-2"}]),
    ],
)
async def test_artifact_scenarios_complete_with_their_parts(rpc, prefix, parts):
    task = (await send(rpc, prefix))["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert [artifact["parts"] for artifact in task["artifacts"]] == [parts]


@pytest.mark.parametrize(
    ("prefix", "state", "text"),
    [
        ("tck-complete-task", "TASK_STATE_COMPLETED", "Hello from TCK"),
        ("tck-input-required", "TASK_STATE_INPUT_REQUIRED", "Input required"),
        ("tck-reject-task", "TASK_STATE_REJECTED", "rejected"),
        ("tck-something-else", "TASK_STATE_COMPLETED", "Unhandled messageId prefix: "),
    ],
)
async def test_state_scenarios(rpc, prefix, state, text):
    task = (await send(rpc, prefix))["task"]
    assert task["status"]["state"] == state
    assert task["status"]["message"]["parts"][0]["text"].startswith(text)


async def test_the_message_response_scenario_answers_with_a_message(rpc):
    answer = await send(rpc, "tck-message-response")
    assert answer["message"]["parts"] == [{"text": "Direct message response"}]
