"""Prometheus metrics: each moves when its thing happens, recording never breaks a request or a
job, the exposition view's protection and format, multiprocess files, the system checks, and
the Grafana dashboard naming only metrics the exposition has."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest
from asgiref.sync import sync_to_async
from celery.signals import worker_process_shutdown, worker_ready
from django.test import override_settings
from django.utils import timezone
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from a2a_endpoint import metrics, models, types
from a2a_endpoint.lifecycle import TaskState
from a2a_endpoint.metrics import recording
from a2a_endpoint.metrics.checks import check_metrics
from a2a_endpoint.metrics.multiprocess import ENV
from a2a_endpoint.service import RequestHandler
from a2a_endpoint.store import StoredEvent, TaskStore
from a2a_endpoint.streaming.bus import ChannelLayerEventBus, InMemoryEventBus
from a2a_endpoint.testing import WebhookReceiver, jsonrpc_request, user_message
from tests.agents import gate
from tests.service.builders import DEADLINE, a2a_settings, wait_for
from tests.streaming.client import send_streaming, subscribe
from tests.streaming.conftest import IN_MEMORY_LAYER

REPO_ROOT = Path(__file__).resolve().parents[1]
DASHBOARD = REPO_ROOT / "deploy" / "grafana" / "a2a-endpoint.json"
TASK = "00000000-0000-0000-0000-0000000000aa"


def value(name: str, **labels: str) -> float:
    """A sample of this process's default registry (0 while it has none)."""
    return REGISTRY.get_sample_value(name, labels) or 0.0


def requests(method: str, outcome: str) -> float:
    return value("a2a_requests_total", binding="jsonrpc", method=method, outcome=outcome)


class Delta:
    """Samples read before and after: what a step of a test added to them."""

    def __init__(self, *samples: tuple[str, dict[str, str]]) -> None:
        self.samples = samples
        self.before = [value(name, **labels) for name, labels in samples]

    def __call__(self) -> list[float]:
        return [
            value(name, **labels) - before
            for (name, labels), before in zip(self.samples, self.before, strict=True)
        ]


def sample(name: str, **labels: str) -> tuple[str, dict[str, str]]:
    return name, labels


async def send(rpc: Any, text: str, **configuration: Any) -> dict[str, Any]:
    params = {"message": user_message(text), "configuration": configuration}
    return (await rpc.result("SendMessage", params))["task"]


# --- requests -------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
async def test_a_request_is_counted_and_timed_by_method_and_outcome(rpc):
    seconds = sample("a2a_request_duration_seconds_count", binding="jsonrpc", method="SendMessage")
    delta = Delta(
        sample("a2a_requests_total", binding="jsonrpc", method="SendMessage", outcome="ok"),
        sample("a2a_requests_total", binding="jsonrpc", method="GetTask", outcome="-32001"),
        seconds,
    )
    await send(rpc, "noop", returnImmediately=True)
    await rpc.error("GetTask", {"id": str(uuid.uuid4())})
    assert delta() == [1, 1, 1]
    # A blocking send is timed to its answer: the job ran in between.
    held = Delta(sample("a2a_request_duration_seconds_sum", **seconds[1]))
    name = f"g-{uuid.uuid4().hex[:8]}"
    threading.Timer(0.3, gate(name).set).start()
    await send(rpc, f"gate {name}")
    assert held()[0] >= 0.3


async def test_requests_no_method_ran_for_are_counted_as_method_none(rpc):
    delta = Delta(
        *(
            sample("a2a_requests_total", binding="jsonrpc", method="none", outcome=outcome)
            for outcome in ("-32700", "-32600", "-32601", "http_415", "http_405")
        ),
        sample("a2a_requests_total", binding="jsonrpc", method="message/send", outcome="-32601"),
    )
    await rpc.post(b"{not json")
    await rpc.post({"jsonrpc": "2.0", "id": 1})  # no method
    await rpc.post(jsonrpc_request("NoSuchMethod", {}))
    # A v0.3 name under an explicit 1.0 is an unknown method too: counted once, as such.
    await rpc.post(jsonrpc_request("message/send", {}), **{"A2A-Version": "1.0"})
    await rpc.http.post("/a2a/", "x", content_type="text/plain")
    await rpc.http.get("/a2a/")
    assert delta() == [1, 1, 2, 1, 1, 0]


@pytest.mark.django_db
async def test_a_batch_counts_each_of_its_requests(rpc):
    delta = Delta(
        sample("a2a_requests_total", binding="jsonrpc", method="GetTask", outcome="-32001"),
        sample("a2a_requests_total", binding="jsonrpc", method="none", outcome="-32601"),
    )
    unknown = str(uuid.uuid4())
    batch = [jsonrpc_request("GetTask", {"id": unknown}, n) for n in (1, 2)]
    await rpc.post([*batch, jsonrpc_request("Nope", {}, 3)])
    assert delta() == [2, 1]


@pytest.fixture
def broken_get_task(monkeypatch):
    async def get_task(self: RequestHandler, params: Any, caller: types.Caller) -> Any:
        raise RuntimeError("unexpected")

    monkeypatch.setattr(RequestHandler, "get_task", get_task)


@pytest.mark.usefixtures("broken_get_task")
async def test_an_unexpected_error_is_counted_as_internal_error(rpc):
    delta = Delta(
        sample("a2a_requests_total", binding="jsonrpc", method="GetTask", outcome="-32603")
    )
    assert (await rpc.error("GetTask", {"id": "t"}))["code"] == -32603
    assert delta() == [1]


# --- streams --------------------------------------------------------------------------------


def open_streams(method: str) -> float:
    return value("a2a_streams_open", binding="jsonrpc", method=method)


@pytest.mark.django_db(transaction=True)
async def test_an_open_stream_is_counted_until_it_closes_or_its_client_leaves(rpc):
    name = f"g-{uuid.uuid4().hex[:8]}"
    task_id = (await send(rpc, f"hold {name}", returnImmediately=True))["id"]
    before = open_streams("SubscribeToTask"), open_streams("SendStreamingMessage")
    started = Delta(
        sample("a2a_request_duration_seconds_count", binding="jsonrpc", method="SubscribeToTask")
    )
    left = await subscribe(rpc, task_id)
    await left.event()
    streamed = await send_streaming(rpc, "echo hi")
    await streamed.event()
    assert started() == [1]  # timed to the stream's start, not its end
    # SendStreamingMessage of an echo may have finished already; the held task's has not.
    assert open_streams("SubscribeToTask") == before[0] + 1
    await streamed.rest()  # the echo ran to COMPLETED: its stream ended
    assert open_streams("SendStreamingMessage") == before[1]
    await left.aclose()  # the client goes away
    await wait_for(lambda: open_streams("SubscribeToTask") == before[0])
    gate(name).set()


# --- tasks and jobs -------------------------------------------------------------------------


def finished(state: str) -> tuple[str, dict[str, str]]:
    return sample("a2a_tasks_finished_total", state=state)


@pytest.mark.django_db(transaction=True)
async def test_tasks_are_counted_when_created_and_when_they_finish_by_state(rpc):
    delta = Delta(
        sample("a2a_tasks_created_total"),
        finished("completed"),
        finished("failed"),
        finished("canceled"),
        sample("a2a_jobs_queued_total", backend="inline"),
    )
    assert (await send(rpc, "echo hi"))["status"]["state"] == "TASK_STATE_COMPLETED"
    assert (await send(rpc, "fail"))["status"]["state"] == "TASK_STATE_FAILED"
    waiting = await send(rpc, "wait 30", returnImmediately=True)
    canceled = await rpc.result("CancelTask", {"id": waiting["id"]})
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    await wait_for(lambda: delta() == [3, 1, 1, 1, 3])


@pytest.mark.django_db(transaction=True)
async def test_a_running_job_is_counted_until_it_ends_and_its_duration_observed(rpc):
    before = value("a2a_jobs_running")
    duration = Delta(sample("a2a_job_duration_seconds_count"))
    name = f"g-{uuid.uuid4().hex[:8]}"
    await send(rpc, f"gate {name}", returnImmediately=True)
    await wait_for(lambda: value("a2a_jobs_running") == before + 1)
    gate(name).set()
    await wait_for(lambda: value("a2a_jobs_running") == before)
    await wait_for(lambda: duration() == [1])


def stored_task(store: TaskStore) -> str:
    message = msgspec.convert(user_message("hi"), types.Message)
    task_id = store.create_task(owner="o", tenant="", context_id="c", message=message).id
    assert store.claim_job(task_id, "job-1", 30.0) is not None
    store.update_status(task_id, TaskState.WORKING)
    models.Task.objects.filter(pk=task_id).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    return task_id


@pytest.mark.django_db
def test_a_lost_job_is_counted_and_so_is_its_retry(django_capture_on_commit_callbacks):
    store = TaskStore()
    delta = Delta(sample("a2a_jobs_lost_total"), sample("a2a_jobs_retried_total"))
    with django_capture_on_commit_callbacks(execute=True):
        retried = stored_task(store)
        assert store.recover_lost_jobs(retry=True, max_retries=1) == [retried]
    assert delta() == [1, 1]
    with django_capture_on_commit_callbacks(execute=True):
        failed = stored_task(store)
        assert store.recover_lost_jobs(retry=False, max_retries=1) == []
    assert models.Task.objects.get(pk=failed).state == TaskState.FAILED.value
    assert delta() == [2, 1]


# --- event bus ------------------------------------------------------------------------------


async def test_the_memory_bus_counts_publications_and_times_their_delivery():
    delta = Delta(
        sample("a2a_bus_published_total", bus="memory"),
        sample("a2a_bus_delivery_lag_seconds_count", bus="memory"),
    )
    bus = InMemoryEventBus()
    async with bus.subscribe(TASK) as updates:
        # From another thread, as a job publishes: handed to this loop, then delivered.
        await sync_to_async(bus.publish, thread_sensitive=False)(
            StoredEvent(TASK, 1, TaskState.WORKING, {})
        )
        await updates.get()
    bus.publish(StoredEvent(TASK, 2, TaskState.WORKING, {}))  # nobody listens: published only
    assert delta() == [2, 1]
    quiet = InMemoryEventBus(metrics_label=None)  # another bus's in-process fan-out
    quiet.publish(StoredEvent(TASK, 3, TaskState.WORKING, {}))
    assert delta() == [2, 1]


async def test_the_channels_bus_counts_its_messages_once_not_its_local_fan_out():
    delta = Delta(
        sample("a2a_bus_published_total", bus="channels"),
        sample("a2a_bus_delivery_lag_seconds_count", bus="channels"),
        sample("a2a_bus_published_total", bus="memory"),
        sample("a2a_bus_delivery_lag_seconds_count", bus="memory"),
    )
    with override_settings(CHANNEL_LAYERS=IN_MEMORY_LAYER):
        bus = ChannelLayerEventBus()
        async with bus.subscribe(TASK) as first, bus.subscribe(TASK) as second:
            await sync_to_async(bus.publish, thread_sensitive=False)(
                StoredEvent(TASK, 1, TaskState.WORKING, {})
            )
            loop = asyncio.get_running_loop()
            assert await first.get_until(loop.time() + DEADLINE) is not None
            assert await second.get_until(loop.time() + DEADLINE) is not None
    assert delta() == [1, 1, 0, 0]


# --- push deliveries ------------------------------------------------------------------------


FAST_PUSH = {
    "PUSH_ALLOW_HTTP": True,
    "PUSH_ALLOW_PRIVATE_NETWORKS": True,
    "PUSH_RETRY_DELAY": 0.05,
    "PUSH_RETRY_MAX_DELAY": 0.2,
    "PUSH_MAX_ATTEMPTS": 3,
}


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with a2a_settings(**FAST_PUSH), WebhookReceiver() as running:
        yield running


def pushes(outcome: str) -> tuple[str, dict[str, str]]:
    return sample("a2a_push_deliveries_total", outcome=outcome)


@pytest.mark.django_db(transaction=True)
async def test_push_tries_are_counted_delivered_retried_and_dead(rpc, receiver):
    delta = Delta(pushes("delivered"), pushes("retried"), pushes("dead"))
    receiver.answer_next(503)  # the task's first event: retried, then delivered
    config = {"taskPushNotificationConfig": {"url": receiver.url()}}
    first = await events_of((await send(rpc, "noop", **config))["id"])
    await wait_for(lambda: delta() == [first, 1, 0])
    receiver.answer_next(400)  # refused for good: dead at once, the next event goes
    second = await events_of((await send(rpc, "noop", **config))["id"])
    await wait_for(lambda: delta() == [first + second - 1, 1, 1])


@sync_to_async
def events_of(task_id: str) -> int:
    return models.TaskEvent.objects.filter(task_id=task_id).count()


# --- recording never breaks the caller ------------------------------------------------------


@pytest.fixture
def fresh_state(monkeypatch) -> recording._State:
    state = recording._State()
    monkeypatch.setattr(recording, "_state", state)
    return state


@pytest.mark.django_db
async def test_a_failing_record_is_swallowed_and_logged_once(rpc, monkeypatch, caplog):
    def broken(*args: Any) -> Any:
        raise RuntimeError("mmap full")

    monkeypatch.setattr(recording, "_child", broken)
    monkeypatch.setattr(recording._state, "failed", set())
    caplog.set_level(logging.WARNING, logger="a2a_endpoint.metrics")
    for _ in range(2):
        assert (await rpc.error("GetTask", {"id": str(uuid.uuid4())}))["code"] == -32001
    lines = [r for r in caplog.records if "a2a_requests" in r.getMessage()]
    assert len(lines) == 1
    assert lines[0].exc_info[0] is RuntimeError


def test_metrics_that_cannot_be_set_up_record_nothing_and_raise_nothing(
    fresh_state, monkeypatch, caplog
):
    def fail() -> Any:
        raise FileNotFoundError("/run/a2a-endpoint/metrics/counter_1.db")

    monkeypatch.setattr(recording.definitions, "build", fail)
    metrics.task_created()
    metrics.request_refused("jsonrpc", "http_413")
    assert metrics.job_started() is None
    with metrics.stream_open("jsonrpc", "SubscribeToTask"):
        pass
    assert fresh_state.broken
    assert len([r for r in caplog.records if "could not be set up" in r.getMessage()]) == 1


async def test_metrics_off_records_nothing(rpc):
    delta = Delta(sample("a2a_requests_total", binding="jsonrpc", method="none", outcome="-32700"))
    with a2a_settings(METRICS=False):
        await rpc.post(b"{")
    assert delta() == [0]
    await rpc.post(b"{")
    assert delta() == [1]


# --- the view -------------------------------------------------------------------------------


TOKEN = "scrape-token-7c1f2e9a4b"


def families(body: bytes) -> dict[str, Any]:
    return {family.name: family for family in text_string_to_metric_families(body.decode())}


@pytest.mark.django_db
def test_the_view_serves_the_exposition_to_staff(admin_client):
    metrics.task_created()
    response = admin_client.get("/metrics")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    assert response["Cache-Control"] == "no-store"
    found = families(response.content)
    assert found["a2a_tasks_created"].type == "counter"
    assert found["a2a_tasks_created"].samples[0].value >= 1
    assert found["a2a_request_duration_seconds"].type == "histogram"
    assert found["a2a_streams_open"].type == "gauge"


@pytest.mark.django_db
def test_without_a_token_anonymous_and_plain_users_are_refused(client, django_user_model):
    assert client.get("/metrics").status_code == 403
    user = django_user_model.objects.create_user("plain", password="pw")
    client.force_login(user)
    assert client.get("/metrics").status_code == 403


@pytest.mark.django_db
def test_debug_serves_anyone_while_no_token_is_set(client, settings):
    settings.DEBUG = True
    assert client.get("/metrics").status_code == 200
    with a2a_settings(METRICS_TOKEN=TOKEN):
        assert client.get("/metrics").status_code == 401


@pytest.mark.django_db
def test_with_a_token_the_scraper_must_send_it(client):
    with a2a_settings(METRICS_TOKEN=TOKEN):
        refused = client.get("/metrics")
        assert refused.status_code == 401
        assert refused["WWW-Authenticate"] == 'Bearer realm="metrics"'
        assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
        assert client.get("/metrics", HTTP_AUTHORIZATION=f"Basic {TOKEN}").status_code == 401
        served = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
        assert served.status_code == 200
        assert families(served.content)["a2a_requests"].type == "counter"


@pytest.mark.django_db
def test_openmetrics_is_served_when_asked_for(admin_client):
    response = admin_client.get("/metrics", HTTP_ACCEPT="application/openmetrics-text")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/openmetrics-text")
    assert response.content.endswith(b"# EOF\n")


@pytest.mark.django_db
def test_the_view_is_off_with_metrics_and_takes_only_get(admin_client):
    assert admin_client.post("/metrics").status_code == 405
    with a2a_settings(METRICS=False):
        assert admin_client.get("/metrics").status_code == 404


@pytest.mark.django_db
def test_an_unreadable_multiprocess_directory_is_a_503_not_a_500(
    admin_client, monkeypatch, tmp_path
):
    monkeypatch.setenv(ENV, str(tmp_path / "missing"))
    response = admin_client.get("/metrics")
    assert response.status_code == 503
    assert b"could not be read" in response.content


# --- multiprocess mode ----------------------------------------------------------------------

CHILD = """
import os, sys
import django
django.setup()
from a2a_endpoint import metrics
metrics.request_observed("jsonrpc", "GetTask", "ok", 0.0)
stream = metrics.stream_open("jsonrpc", "SubscribeToTask")
stream.__enter__()  # never left: still open when the process exits
metrics.job_started()
print(os.getpid(), flush=True)
sys.stdin.read()  # until the test closes it; then exit normally (atexit marks it dead)
"""


def child(directory: Path) -> subprocess.Popen[str]:
    env = {**os.environ, ENV: str(directory), "DJANGO_SETTINGS_MODULE": "tests.settings"}
    return subprocess.Popen(
        [sys.executable, "-c", CHILD],
        cwd=REPO_ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def scrape(monkeypatch: pytest.MonkeyPatch, directory: Path) -> dict[str, float]:
    """The multiprocess exposition of ``directory``, as {sample name and labels: value}."""
    monkeypatch.setenv(ENV, str(directory))
    body, _ = metrics.render()
    return {
        f"{s.name}{sorted(s.labels.items())}": s.value
        for family in text_string_to_metric_families(body.decode())
        for s in family.samples
    }


def test_processes_sharing_the_directory_are_summed_and_exited_ones_leave_the_gauges(
    monkeypatch, tmp_path
):
    requests_key = "a2a_requests_total" + str(
        sorted({"binding": "jsonrpc", "method": "GetTask", "outcome": "ok"}.items())
    )
    streams_key = "a2a_streams_open" + str(
        sorted({"binding": "jsonrpc", "method": "SubscribeToTask"}.items())
    )
    first, second = child(tmp_path), child(tmp_path)
    try:
        pids = [int(process.stdout.readline()) for process in (first, second)]
        both = scrape(monkeypatch, tmp_path)
        assert both[requests_key] == 2
        assert both[streams_key] == 2
        assert both["a2a_jobs_running[]"] == 2
        first.communicate("", timeout=30)  # exits: marked dead at exit
        assert not list(tmp_path.glob(f"gauge_livesum_{pids[0]}.db"))
        one = scrape(monkeypatch, tmp_path)
        assert one[requests_key] == 2  # its counts stay counted
        assert one[streams_key] == 1
        assert one["a2a_jobs_running[]"] == 1
    finally:
        for process in (first, second):
            if process.poll() is None:
                process.communicate("", timeout=30)
    assert scrape(monkeypatch, tmp_path).get(streams_key, 0) == 0


def test_a_file_a_process_is_just_creating_does_not_fail_the_scrape(monkeypatch, tmp_path):
    """prometheus_client creates a file before sizing it: empty for a moment, or for good when
    its process was killed then (prometheus/client_python#1199)."""
    (tmp_path / "counter_99999999.db").write_bytes(b"")
    process = child(tmp_path)
    try:
        process.stdout.readline()
        samples = scrape(monkeypatch, tmp_path)
    finally:
        process.communicate("", timeout=30)
    assert samples["a2a_jobs_running[]"] == 1


def test_a_celery_pool_process_that_ends_is_marked_dead(monkeypatch, tmp_path):
    import a2a_endpoint.execution.celery_backend  # noqa: F401  (connects its receivers)

    monkeypatch.setenv(ENV, str(tmp_path))
    live = tmp_path / f"gauge_livesum_{os.getpid()}.db"
    counted = tmp_path / f"counter_{os.getpid()}.db"
    live.write_bytes(b"")
    counted.write_bytes(b"")
    worker_process_shutdown.send(sender=None, pid=os.getpid(), exitcode=0)
    assert not live.exists()
    assert counted.exists()


# --- system checks --------------------------------------------------------------------------


def check_ids(monkeypatch: pytest.MonkeyPatch, directory: str | None = None, **keys: Any):
    if directory is None:
        monkeypatch.delenv(ENV, raising=False)
    else:
        monkeypatch.setenv(ENV, directory)
    with a2a_settings(**keys):
        problems = check_metrics()
    assert all(problem.hint for problem in problems)
    return [problem.id for problem in problems]


def test_valid_metrics_settings_pass(monkeypatch, tmp_path):
    assert check_ids(monkeypatch) == []
    assert check_ids(monkeypatch, METRICS=False, METRICS_TOKEN=TOKEN) == []


def test_e030_metrics_must_be_a_bool(monkeypatch):
    assert check_ids(monkeypatch, METRICS="yes") == ["a2a_endpoint.E030"]


@pytest.mark.parametrize("token", ["", " padded-token-0123456789 ", 1234567890123456789])
def test_e031_the_token_must_be_a_plain_string(monkeypatch, token):
    assert check_ids(monkeypatch, METRICS_TOKEN=token) == ["a2a_endpoint.E031"]


def test_w031_a_short_token_can_be_guessed(monkeypatch):
    assert check_ids(monkeypatch, METRICS_TOKEN="short") == ["a2a_endpoint.W031"]


def test_w032_the_multiprocess_directory_must_be_a_writable_directory(monkeypatch, tmp_path):
    assert check_ids(monkeypatch, str(tmp_path / "missing")) == ["a2a_endpoint.W032"]
    file = tmp_path / "file"
    file.write_text("")
    assert check_ids(monkeypatch, str(file)) == ["a2a_endpoint.W032"]
    assert check_ids(monkeypatch, str(tmp_path / "missing"), METRICS=False) == []


def test_a_worker_without_a_multiprocess_directory_says_its_metrics_are_unseen(
    monkeypatch, tmp_path, caplog
):
    import a2a_endpoint.execution.celery_backend  # noqa: F401  (connects its receivers)

    caplog.set_level(logging.WARNING, logger="a2a_endpoint.metrics")
    monkeypatch.setenv(ENV, str(tmp_path))
    worker_ready.send(sender=None)
    assert ENV not in caplog.text
    monkeypatch.delenv(ENV)
    worker_ready.send(sender=None)
    assert f"{ENV} is not set" in caplog.text


# --- the Grafana dashboard ------------------------------------------------------------------


def recorded_exposition() -> list[Any]:
    """The exposition's metric families, one of each metric recorded first (the labelled
    ones have samples, and so their labels, only then)."""
    metrics.request_observed("jsonrpc", "GetTask", "ok", 0.0)
    with metrics.stream_open("jsonrpc", "SubscribeToTask"):
        pass
    metrics.task_created()
    metrics.task_finished("completed")
    metrics.job_queued("inline")
    metrics.job_ended(metrics.job_started())
    metrics.job_lost(retried=True)
    metrics.bus_published("memory")
    metrics.bus_delivered("memory", 0.0, 0.001)
    metrics.push_delivery("delivered")
    body, _ = metrics.render()
    return list(text_string_to_metric_families(body.decode()))


def dashboard_queries() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    queries = [
        target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])
    ]
    variables = dashboard["templating"]["list"]
    return queries + [v["query"]["query"] for v in variables if v["type"] == "query"]


def test_the_dashboard_queries_only_metrics_and_labels_of_the_exposition():
    exposition = recorded_exposition()
    labels: dict[str, set[str]] = {}
    for family in exposition:
        for s in family.samples:
            labels.setdefault(s.name, set()).update(s.labels)
    queries = dashboard_queries()
    assert len(queries) >= 12
    for query in queries:
        named = set(re.findall(r"\ba2a_[a-z_]+\b", query))
        assert named, query
        assert named <= set(labels), (named - set(labels), query)
        known = set().union(*(labels[name] for name in named)) | {"le", "job", "instance"}
        for group in re.findall(r"\bby \(([^)]*)\)", query):
            assert {label.strip() for label in group.split(",")} <= known, query
        for label in re.findall(r"[{,]\s*([a-z_]+)\s*[!=]~?", query):
            assert label in known, (label, query)


def test_the_dashboard_shows_every_metric_of_the_app():
    exposition = recorded_exposition()
    created = {f"{f.name}_created" for f in exposition if f.type in ("counter", "histogram")}
    ours = {f.name for f in exposition if f.name.startswith("a2a_")} - created
    used = {
        re.sub(r"_(total|bucket|sum|count)$", "", name)
        for query in dashboard_queries()
        for name in re.findall(r"\ba2a_[a-z_]+\b", query)
    }
    assert ours == used, ours ^ used
