"""What one request may make the server build: batch items, ListTasks pages, answer bytes.

A batch of 500 items was accepted, and one of 100 ``ListTasks {"pageSize": 100}`` built a
1.2 GB answer. Now a batch holds at most ``MAX_BATCH_ITEMS`` requests, a ListTasks page stops
before ``MAX_RESPONSE_BYTES`` (fewer tasks, and a page token for the rest), and a batch
whose answers passed it runs none of its remaining requests.
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.db import connection

from a2a_endpoint import models, types
from a2a_endpoint.lifecycle import TaskState
from a2a_endpoint.store import TaskStore
from a2a_endpoint.testing import jsonrpc_request, user_message
from tests.service.builders import a2a_settings, stored_task

pytestmark = [pytest.mark.django_db(transaction=True)]

ARTIFACT = "x" * 3000  # each task's artifact: about 3 kB of JSON


async def tasks_with_artifacts(count: int) -> list[str]:
    def make() -> str:
        task_id = stored_task(state=TaskState.WORKING)
        artifact = types.Artifact(artifact_id="big", parts=[types.Part(text=ARTIFACT)])
        TaskStore().add_artifact(task_id, artifact, append=False, last_chunk=True)
        return task_id

    return [await sync_to_async(make)() for _ in range(count)]


async def answer_of(rpc, body: Any) -> tuple[Any, int]:
    response = await rpc.post(body)
    assert response.status_code == 200, response.content
    return msgspec.json.decode(response.content), len(response.content)


async def test_a_batch_over_max_batch_items_is_one_invalid_request_and_runs_nothing(rpc):
    message = user_message("echo not run")
    batch = [
        jsonrpc_request("SendMessage", {"message": message}, 0),
        *(jsonrpc_request("GetTask", {"id": "nope"}, n) for n in range(1, 51)),
    ]
    answer, _ = await answer_of(rpc, batch)
    assert answer["id"] is None
    assert answer["error"]["code"] == -32600
    assert answer["error"]["message"] == "A batch may hold at most 50 requests; this one holds 51"
    assert not await models.Task.objects.filter(origin_message_id=message["messageId"]).aexists()
    answers, _ = await answer_of(rpc, batch[1:])  # fifty: served
    assert len(answers) == 50
    assert {item["error"]["code"] for item in answers} == {-32001}


async def test_max_batch_items_is_a_setting(rpc):
    with a2a_settings(MAX_BATCH_ITEMS=2):
        answer, _ = await answer_of(rpc, [jsonrpc_request("ListTasks", {}, n) for n in range(3)])
    assert "at most 2 requests" in answer["error"]["message"]


async def test_a_list_tasks_page_stops_before_max_response_bytes(rpc):
    """Fewer tasks than pageSize, and a token that pages through the rest: every task once,
    in order, each page within the budget (one task at least, however large)."""
    ids = list(reversed(await tasks_with_artifacts(7)))  # newest first
    listed: list[str] = []
    sizes: list[int] = []
    params: dict[str, Any] = {"pageSize": 100, "includeArtifacts": True}
    with a2a_settings(MAX_RESPONSE_BYTES=10_000):
        while True:
            page = await rpc.result("ListTasks", params)
            assert (page["pageSize"], page["totalSize"]) == (100, 7)
            assert 1 <= len(page["tasks"]) <= 3  # about 3 kB each
            listed += [task["id"] for task in page["tasks"]]
            sizes.append(len(msgspec.json.encode(page["tasks"])))
            if not page["nextPageToken"]:
                break
            params["pageToken"] = page["nextPageToken"]
    assert listed == ids
    assert max(sizes) <= 10_000


def list_all(budget: int) -> list[list[str]]:
    """Every ListTasks page of the store's own caller, as task ids."""
    store = TaskStore()
    request = types.ListTasksRequest(page_size=100, include_artifacts=True)
    pages: list[list[str]] = []
    with a2a_settings(MAX_RESPONSE_BYTES=budget):
        while True:
            page = store.list_tasks("anonymous", "", request)
            pages.append([task.id for task in page.tasks])
            if not page.next_page_token:
                return pages
            request = msgspec.structs.replace(request, page_token=page.next_page_token)


@pytest.mark.parametrize("vendor", ["postgresql", "sqlite"])
def test_both_list_tasks_paths_cut_pages_alike(monkeypatch, vendor):
    """The one-statement page of PostgreSQL and the ORM page of other databases."""
    ids = list(reversed(async_to_sync(tasks_with_artifacts)(7)))
    monkeypatch.setattr(connection, "vendor", vendor)
    pages = list_all(10_000)
    assert [task for page in pages for task in page] == ids
    assert all(1 <= len(page) <= 3 for page in pages)
    assert len(pages) >= 3
    # A budget smaller than any task: one task a page, never none.
    assert list_all(10) == [[task] for task in ids]


async def test_a_batch_of_large_pages_stops_at_max_response_bytes(rpc):
    await tasks_with_artifacts(6)
    page = {"pageSize": 100, "includeArtifacts": True}
    with a2a_settings(MAX_RESPONSE_BYTES=12_000):
        answers, size = await answer_of(
            rpc, [jsonrpc_request("ListTasks", page, n) for n in range(50)]
        )
    assert len(answers) == 50
    ran = [answer for answer in answers if "result" in answer]
    refused = answers[len(ran) :]
    assert 1 <= len(ran) <= 2  # the page that passed the budget is the last one run
    assert all(answer["error"]["code"] == -32600 for answer in refused)
    assert all("Not run" in answer["error"]["message"] for answer in refused)
    assert [answer["id"] for answer in answers] == list(range(50))
    assert size <= 2 * 12_000 + 50 * 200  # the budget, one page past it, the refusals


async def test_a_batch_does_not_hold_up_the_process_s_other_requests(rpc):
    """A batch runs its requests one after another, each off the event loop: a GetTask sent
    while a batch of large pages runs is answered before the batch."""
    await tasks_with_artifacts(20)
    task_id = await sync_to_async(stored_task)(state=TaskState.WORKING)
    finished: list[str] = []
    page = {"pageSize": 100, "includeArtifacts": True}
    batch = [jsonrpc_request("ListTasks", page, n) for n in range(50)]

    async def run_batch() -> None:
        await answer_of(rpc, batch)
        finished.append("batch")

    async def get_task() -> None:
        await asyncio.sleep(0)  # the batch has started
        assert (await rpc.result("GetTask", {"id": task_id}))["id"] == task_id
        finished.append("get")

    await asyncio.gather(run_batch(), get_task())
    assert finished == ["get", "batch"]
