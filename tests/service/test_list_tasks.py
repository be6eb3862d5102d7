"""ListTasks through the endpoint: filters, keyset paging, artifacts, history, scoping."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from asgiref.sync import sync_to_async

from a2a_endpoint import models
from a2a_endpoint.lifecycle import TaskState
from a2a_endpoint.types import format_timestamp
from tests.service.builders import stored_task

pytestmark = [pytest.mark.django_db(transaction=True)]

T0 = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)


def make(**fields) -> str:
    return stored_task(**fields)


amake = sync_to_async(make)


@sync_to_async
def newest_first(ids: list[str]) -> list[str]:
    """The order the spec requires: status timestamp descending, then id (our tie-break)."""
    rows = models.Task.objects.filter(pk__in=ids).order_by("-status_timestamp", "-id")
    return [str(pk) for pk in rows.values_list("pk", flat=True)]


def ids(page: dict) -> list[str]:
    return [task["id"] for task in page["tasks"]]


async def test_empty_list_has_all_four_fields(rpc):
    page = await rpc.result("ListTasks", {})
    assert page == {"tasks": [], "nextPageToken": "", "pageSize": 50, "totalSize": 0}


async def test_paging_visits_every_task_once_newest_first(rpc):
    # Three of the seven share a timestamp, so the id tie-break decides between them.
    stamps = [T0, T0 + timedelta(seconds=5), T0 + timedelta(seconds=5), T0 + timedelta(seconds=5)]
    stamps += [T0 + timedelta(seconds=9), T0 - timedelta(days=1), T0 + timedelta(minutes=1)]
    created = [await amake(status_timestamp=stamp) for stamp in stamps]
    seen: list[str] = []
    token, pages = "", 0
    while True:
        page = await rpc.result("ListTasks", {"pageSize": 3, "pageToken": token})
        pages += 1
        assert page["pageSize"] == 3
        assert page["totalSize"] == 7
        assert "nextPageToken" in page
        assert len(page["tasks"]) <= 3
        seen += ids(page)
        token = page["nextPageToken"]
        if not token:
            break
        assert pages < 5, "paging does not end"
    assert pages == 3
    assert sorted(seen) == sorted(created)
    assert seen == await newest_first(created)


async def test_last_full_page_has_an_empty_token(rpc):
    for _ in range(3):
        await amake()
    page = await rpc.result("ListTasks", {"pageSize": 3})
    assert len(page["tasks"]) == 3
    assert page["nextPageToken"] == ""


async def test_default_page_size_is_50(rpc):
    await sync_to_async(lambda: [make(history=1) for _ in range(51)])()
    page = await rpc.result("ListTasks", {})
    assert page["pageSize"] == 50
    assert len(page["tasks"]) == 50
    assert page["totalSize"] == 51
    rest = await rpc.result("ListTasks", {"pageToken": page["nextPageToken"]})
    assert len(rest["tasks"]) == 1
    assert rest["nextPageToken"] == ""
    assert set(ids(page)).isdisjoint(ids(rest))


@pytest.mark.parametrize("size", [1, 100])
async def test_page_size_bounds_are_accepted(rpc, size):
    await amake()
    page = await rpc.result("ListTasks", {"pageSize": size})
    assert page["pageSize"] == size
    assert len(page["tasks"]) == 1


async def test_context_filter(rpc):
    wanted = [await amake(context_id="blue") for _ in range(2)]
    await amake(context_id="red")
    page = await rpc.result("ListTasks", {"contextId": "blue"})
    assert sorted(ids(page)) == sorted(wanted)
    assert page["totalSize"] == 2
    assert {task["contextId"] for task in page["tasks"]} == {"blue"}


async def test_status_filter(rpc):
    asking = await amake(state=TaskState.INPUT_REQUIRED)
    await amake(state=TaskState.COMPLETED)
    await amake(state=TaskState.FAILED)
    page = await rpc.result("ListTasks", {"status": "TASK_STATE_INPUT_REQUIRED"})
    assert ids(page) == [asking]
    assert page["totalSize"] == 1
    everything = await rpc.result("ListTasks", {"status": "TASK_STATE_UNSPECIFIED"})
    assert everything["totalSize"] == 3


async def test_status_timestamp_after_is_inclusive(rpc):
    old = await amake(status_timestamp=T0 - timedelta(hours=1))
    at = await amake(status_timestamp=T0)
    new = await amake(status_timestamp=T0 + timedelta(hours=1))
    page = await rpc.result("ListTasks", {"statusTimestampAfter": format_timestamp(T0)})
    assert ids(page) == [new, at]
    assert old not in ids(page)
    assert page["totalSize"] == 2
    offset = await rpc.result("ListTasks", {"statusTimestampAfter": "2025-06-01T14:30:00+02:00"})
    assert ids(offset) == [new]


async def test_filters_combine(rpc):
    match = await amake(context_id="c", state=TaskState.FAILED, status_timestamp=T0)
    await amake(context_id="c", state=TaskState.COMPLETED, status_timestamp=T0)
    await amake(context_id="d", state=TaskState.FAILED, status_timestamp=T0)
    await amake(context_id="c", state=TaskState.FAILED, status_timestamp=T0 - timedelta(days=1))
    params = {
        "contextId": "c",
        "status": "TASK_STATE_FAILED",
        "statusTimestampAfter": format_timestamp(T0),
    }
    page = await rpc.result("ListTasks", params)
    assert ids(page) == [match]
    assert page["totalSize"] == 1


async def test_artifacts_only_when_asked(rpc):
    for _ in range(2):
        await amake(artifacts=["x", "y"])
    for params in ({}, {"includeArtifacts": False}):
        page = await rpc.result("ListTasks", params)
        assert len(page["tasks"]) == 2
        assert all("artifacts" not in task for task in page["tasks"])
    page = await rpc.result("ListTasks", {"includeArtifacts": True})
    for task in page["tasks"]:
        assert [a["parts"] for a in task["artifacts"]] == [[{"text": "x"}], [{"text": "y"}]]


@pytest.mark.parametrize(("length", "sizes"), [(None, [4, 2]), (0, None), (1, [1, 1]), (3, [3, 2])])
async def test_history_length_per_task(rpc, length, sizes):
    big = await amake(history=4, status_timestamp=T0 + timedelta(seconds=1))
    small = await amake(history=2, status_timestamp=T0)
    params = {} if length is None else {"historyLength": length}
    page = await rpc.result("ListTasks", params)
    assert ids(page) == [big, small]
    if sizes is None:
        assert all("history" not in task for task in page["tasks"])
        return
    assert [len(task["history"]) for task in page["tasks"]] == sizes
    full = [await rpc.result("GetTask", {"id": task_id}) for task_id in (big, small)]
    for task, whole in zip(page["tasks"], full, strict=True):
        assert task["history"] == whole["history"][-len(task["history"]) :]


async def test_only_the_callers_tasks_are_listed(rpc):
    mine = await amake()
    await amake(owner="user:7")
    await amake(owner="user:7", context_id="ctx")
    await amake(tenant="other-tenant")
    page = await rpc.result("ListTasks", {})
    assert ids(page) == [mine]
    assert page["totalSize"] == 1
    assert (await rpc.result("ListTasks", {"contextId": "ctx"}))["totalSize"] == 1
