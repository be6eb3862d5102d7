"""The Celery job's event loop: jobs share it, and with it the channel-layer bus's reader."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import msgspec
import pytest
from django.conf import settings
from django.test import override_settings

from a2a_endpoint import models, types
from a2a_endpoint.execution import celery_backend, runtime
from a2a_endpoint.streaming.bus import ChannelLayerEventBus
from a2a_endpoint.testing import user_message
from tests.service.builders import DEADLINE
from tests.streaming.conftest import IN_MEMORY_LAYER

pytestmark = [pytest.mark.django_db(transaction=True)]


def test_jobs_do_not_wait_for_the_bus_reader_that_outlives_them(monkeypatch):
    """After a job, the worker lets what the job left behind finish (leaving channel-layer
    groups), but not the bus's reader, which stays on the loop for the next jobs: waiting
    for it would hold every job for the whole leftover timeout."""
    monkeypatch.setattr(celery_backend, "LEFTOVER_TIMEOUT", 10 * DEADLINE)
    channels = {**settings.A2A_ENDPOINT, "EVENT_BUS": "channels"}
    with override_settings(CHANNEL_LAYERS=IN_MEMORY_LAYER, A2A_ENDPOINT=channels):
        bus = runtime.get_event_bus()
        assert isinstance(bus, ChannelLayerEventBus)
        store = runtime.get_store()
        message = msgspec.convert(user_message("echo hi"), types.Message)
        task_ids = [
            store.create_task(owner="o", tenant="", context_id="c", message=message).id
            for _ in range(3)
        ]
        readers = set()

        def run(task_id: str) -> None:
            celery_backend.run_agent_task.run(task_id)
            readers.update(bus.resident_tasks(celery_backend._job_loop()))

        with ThreadPoolExecutor(1) as worker:  # one worker thread: one job loop
            for task_id in task_ids:
                worker.submit(run, task_id).result(timeout=DEADLINE)
            loop = worker.submit(celery_backend._job_loop).result(timeout=DEADLINE)
            # As a pool process ends (worker_process_shutdown): the reader stops, the loop
            # closes.
            worker.submit(celery_backend.close_job_loop).result(timeout=DEADLINE)
        assert len(readers) == 1  # the same reader served all three jobs' cancel watches
        assert loop.is_closed()
        assert all(reader.done() for reader in readers)
        assert bus.resident_tasks(loop) == set()
        states = set(models.Task.objects.filter(pk__in=task_ids).values_list("state", flat=True))
        assert states == {"TASK_STATE_COMPLETED"}
        assert bus.reader_count() == 0  # every job left its cancel group
