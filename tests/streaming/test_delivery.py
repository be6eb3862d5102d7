"""Each event exactly once and in order: the snapshot race, dropped bus messages, resume."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from a2a_endpoint.execution import runtime
from a2a_endpoint.lifecycle import TaskState
from a2a_endpoint.store import StoredEvent, TaskStore
from a2a_endpoint.testing import user_message
from tests.service.builders import a2a_settings, agent_message, poll_task, wait_for
from tests.streaming.client import (
    as_logged,
    assert_consecutive,
    event_log,
    json_error,
    send_streaming,
    seqs,
    state_of,
    subscribe,
)

pytestmark = [pytest.mark.django_db(transaction=True)]

WORKING = "TASK_STATE_WORKING"
COMPLETED = "TASK_STATE_COMPLETED"


def texts(events: list[dict[str, Any]]) -> list[str]:
    """The status message texts the events carry (a snapshot's current status included)."""
    found = []
    for event in events:
        message = event["body"].get("status", {}).get("message")
        if message:
            found.append(message["parts"][0]["text"])
    return found


# --- the snapshot/live race (A2A §3.1.6) ------------------------------------------------------


@pytest.mark.parametrize("when", ["before", "after"])
async def test_event_committed_while_the_snapshot_is_read_arrives_once(
    rpc, held, gates, bus, monkeypatch, when
):
    task_id, name = await held("burst 2")
    read_snapshot = TaskStore.snapshot

    def race() -> None:
        runtime.get_store().update_status(task_id, TaskState.WORKING, agent_message("racer"))

    def racing(self: TaskStore, *args: Any, **kwargs: Any) -> Any:
        # The stream is subscribed already; an update commits (and is published) right
        # before or right after the snapshot is read, in the snapshot's own thread.
        if when == "before":
            race()
        snapshot = read_snapshot(self, *args, **kwargs)
        if when == "after":
            race()
        return snapshot

    monkeypatch.setattr(TaskStore, "snapshot", racing)
    stream = await subscribe(rpc, task_id)
    snapshot = await stream.event()
    # Before: the snapshot holds it and its live copy must be dropped; after: it comes live.
    assert snapshot["seq"] == (3 if when == "before" else 2)
    assert texts([snapshot]) == (["racer"] if when == "before" else [f"holding {name}"])
    gates.open(name)
    events = [snapshot, *await stream.rest()]
    assert_consecutive(events)  # seq 3 once: no gap, no repeat
    assert texts(events).count("racer") == 1
    assert texts(events)[-3:] == ["step 1", "step 2", "done"]
    assert as_logged(events[1:]) == (await event_log(task_id))[snapshot["seq"] :]


# --- dropped bus messages are filled from the log -----------------------------------------------


Dropper = Callable[[StoredEvent], bool]


def drop_published(monkeypatch: pytest.MonkeyPatch, drop: Dropper) -> list[StoredEvent]:
    """Make the bus lose the events ``drop`` picks (as a full channel-layer channel would).

    The store hands each committed event to the bus's ``publish``; wrap that hand-over.
    """
    store = runtime.get_store()
    publish = store.publisher
    assert publish is not None
    dropped: list[StoredEvent] = []

    def lossy(event: StoredEvent) -> None:
        if drop(event):
            dropped.append(event)
        else:
            publish(event)

    monkeypatch.setattr(store, "publisher", lossy)
    return dropped


async def test_dropped_event_is_filled_from_the_log_in_order(rpc, held, gates, bus, monkeypatch):
    task_id, name = await held("burst 3")
    dropped = drop_published(monkeypatch, lambda event: event.seq == 3)
    stream = await subscribe(rpc, task_id)
    snapshot = await stream.event()
    assert snapshot["seq"] == 2
    gates.open(name)
    events = await stream.rest()
    assert [event.seq for event in dropped] == [3]
    # Seq 4 arriving reveals the gap: 3 comes from the log, before 4.
    assert seqs(events) == [3, 4, 5, 6]
    assert as_logged(events) == (await event_log(task_id))[2:]


@pytest.mark.parametrize("method", ["SubscribeToTask", "SendStreamingMessage"])
async def test_dropped_last_event_still_ends_the_stream(
    rpc, start, gates, bus, monkeypatch, method
):
    # Settings first: changing them rebuilds the runtime (and its store).
    with a2a_settings(SSE_KEEPALIVE=0.2):
        dropped = drop_published(monkeypatch, lambda event: event.state.is_terminal)
        name = gates.new()
        if method == "SubscribeToTask":
            task_id = await start(f"hold {name}")
            await poll_task(rpc, task_id, WORKING)
            stream = await subscribe(rpc, task_id)
        else:
            stream = await send_streaming(rpc, f"hold {name}")
        first = await stream.event()
        gates.open(name)
        # Nothing more comes on the bus: the idle stream finds the end in the log.
        events = [first, *await stream.rest()]
    assert [event.state for event in dropped] == [TaskState.COMPLETED]
    assert state_of(events[-1]) == COMPLETED
    assert events[-1]["seq"] == dropped[0].seq
    assert_consecutive(events)


# --- resuming with Last-Event-ID (SSE) ----------------------------------------------------------


async def read_until(stream: Any, seq: int) -> list[dict[str, Any]]:
    """The stream's next events, up to and including ``seq``."""
    events = [await stream.event()]
    while events[-1]["seq"] < seq:
        events.append(await stream.event())
    return events


async def wait_seq(task_id: str, seq: int) -> None:
    async def logged() -> bool:
        return len(await event_log(task_id)) >= seq

    await wait_for(logged)


async def test_resume_continues_after_the_last_event_seen(rpc, held, gates, bus):
    # 1 created, 2 holding g1 | 3-4 steps, 5 holding g2 | 6-7 steps, 8 completed.
    second = gates.new()
    task_id, first = await held(f"burst 2 hold {second} burst 2")
    stream = await subscribe(rpc, task_id)
    snapshot = await stream.event()
    gates.open(first)
    seen = [snapshot, *await read_until(stream, 4)]
    await stream.aclose()
    await wait_seq(task_id, 5)  # held at the second gate

    resumed = await subscribe(rpc, task_id, **{"Last-Event-ID": "4"})
    head = await resumed.event()
    assert head["kind"] == "statusUpdate"  # no snapshot: the event after 4, from the log
    assert head["seq"] == 5
    gates.open(second)
    events = [head, *await resumed.rest()]
    log = await event_log(task_id)
    assert seqs(seen) == [2, 3, 4]
    assert as_logged(events) == log[4:]  # 5..8
    # Both connections together: every event after the snapshot once, in order.
    assert as_logged(seen[1:] + events) == log[2:]
    assert state_of(events[-1]) == COMPLETED


async def test_resume_of_a_task_that_finished_meanwhile(rpc, held, gates, bus):
    task_id, name = await held("burst 3")
    stream = await subscribe(rpc, task_id)
    assert (await stream.event())["seq"] == 2
    gates.open(name)
    assert seqs(await read_until(stream, 3)) == [3]
    await stream.aclose()
    await poll_task(rpc, task_id, COMPLETED)
    resumed = await subscribe(rpc, task_id, **{"Last-Event-ID": "3"})
    events = await resumed.rest()  # the rest of the log, then closed at the terminal event
    assert seqs(events) == [4, 5, 6]
    assert as_logged(events) == (await event_log(task_id))[3:]
    assert state_of(events[-1]) == COMPLETED


async def test_resume_from_zero_replays_the_whole_log(rpc):
    task = (await rpc.result("SendMessage", {"message": user_message("chunks")}))["task"]
    events = await (await subscribe(rpc, task["id"], **{"Last-Event-ID": "0"})).rest()
    assert as_logged(events) == await event_log(task["id"])
    assert events[0]["kind"] == "task"


async def test_resume_after_the_final_event_of_a_terminal_task_is_32004(rpc):
    task = (await rpc.result("SendMessage", {"message": user_message("chunks")}))["task"]
    final = (await event_log(task["id"]))[-1][0]
    headers = {"Last-Event-ID": str(final)}
    error = await json_error(rpc, "SubscribeToTask", {"id": task["id"]}, **headers)
    assert error["code"] == -32004


async def test_last_event_id_beyond_the_log_is_invalid_params(rpc, held):
    # An id the task never had cannot be resumed after: nothing may be skipped silently.
    task_id, _ = await held()
    last = (await event_log(task_id))[-1][0]
    headers = {"Last-Event-ID": str(last + 1)}
    error = await json_error(rpc, "SubscribeToTask", {"id": task_id}, **headers)
    assert error["code"] == -32602
    assert error["data"][0]["fieldViolations"][0]["field"] == "Last-Event-ID"


@pytest.mark.parametrize("value", ["abc", "-1", "1.5"])
async def test_malformed_last_event_id_is_invalid_params(rpc, held, value):
    task_id, _ = await held()
    headers = {"Last-Event-ID": value}
    error = await json_error(rpc, "SubscribeToTask", {"id": task_id}, request_id="r", **headers)
    assert error["code"] == -32602
    assert error["data"][0]["fieldViolations"][0]["field"] == "Last-Event-ID"


async def test_a_failing_bus_loses_messages_not_tasks(rpc, monkeypatch, bus):
    # A broken bus (e.g. Redis unreachable) must be as a dropped message: the task is
    # committed, its job still starts, and streams find its events in the log.
    with a2a_settings(SSE_KEEPALIVE=0.1):
        store = runtime.get_store()

        def unreachable(event: StoredEvent) -> None:
            raise ConnectionError("the channel layer is down")

        monkeypatch.setattr(store, "publisher", unreachable)
        events = await (await send_streaming(rpc, "chunks")).rest()
    assert_consecutive(events)
    assert state_of(events[-1]) == COMPLETED
    assert as_logged(events[1:]) == (await event_log(events[0]["body"]["id"]))[1:]
