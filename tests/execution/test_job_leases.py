"""Leased jobs in the store: one job per message, lease renewal, and lost-job recovery."""

from __future__ import annotations

import threading
from datetime import timedelta

import msgspec
import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from a2a_endpoint import models, types
from a2a_endpoint.execution.jobs import run_leased_job
from a2a_endpoint.lifecycle import TaskState
from a2a_endpoint.store import TaskStore
from a2a_endpoint.streaming.bus import InMemoryEventBus
from a2a_endpoint.testing import user_message
from tests.service.builders import agent_message

pytestmark = [pytest.mark.django_db]


@pytest.fixture
def store() -> TaskStore:
    return TaskStore()


def new_task(store: TaskStore, text: str = "hi") -> str:
    message = msgspec.convert(user_message(text), types.Message)
    return store.create_task(owner="o", tenant="", context_id="c", message=message).id


def lapse(task_id: str) -> None:
    models.Task.objects.filter(pk=task_id).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )


def test_a_message_is_claimed_by_one_job_only(store):
    task_id = new_task(store)
    assert store.claim_job(task_id, "job-1", 30)
    # A redelivery of the same job, or a duplicate: the message is taken.
    assert not store.claim_job(task_id, "job-1", 30)
    assert not store.claim_job(task_id, "job-2", 30)
    task = models.Task.objects.get(pk=task_id)
    assert task.job_id == "job-1"
    assert task.lease_expires_at > timezone.now()


def test_a_finished_job_is_not_run_again_for_the_same_message(store):
    task_id = new_task(store)
    assert store.claim_job(task_id, "job-1", 30)
    store.release_job(task_id, "job-1")
    assert models.Task.objects.get(pk=task_id).lease_expires_at is None
    assert not store.claim_job(task_id, "job-1", 30)


def test_a_job_releases_only_its_own_lease(store):
    task_id = new_task(store)
    assert store.claim_job(task_id, "job-1", 30)
    store.release_job(task_id, "job-0")  # an earlier job of the task, ending late
    assert models.Task.objects.get(pk=task_id).lease_expires_at is not None
    store.release_job(task_id, "job-1")
    assert models.Task.objects.get(pk=task_id).lease_expires_at is None


def test_a_new_user_message_can_be_claimed_by_the_next_job(store):
    task_id = new_task(store)
    assert store.claim_job(task_id, "job-1", 30)
    store.update_status(task_id, TaskState.INPUT_REQUIRED)
    store.release_job(task_id, "job-1")
    answer = msgspec.convert(user_message("Ada"), types.Message)
    store.continue_task(task_id, "o", "", answer)
    assert store.claim_job(task_id, "job-2", 30)


def test_a_claim_reads_the_task_and_its_whole_history(store):
    task_id = new_task(store)
    assert store.claim_job(task_id, "job-1", 30)
    store.update_status(task_id, TaskState.INPUT_REQUIRED, agent_message("Your name?"))
    store.release_job(task_id, "job-1")
    store.continue_task(task_id, "o", "", msgspec.convert(user_message("Ada"), types.Message))
    claimed = store.claim_job(task_id, "job-2", 30)
    assert claimed.record == store.load(task_id)
    assert claimed.history == store.history(task_id)
    assert [message.role for message in claimed.history] == [
        types.Role.USER,
        types.Role.AGENT,
        types.Role.USER,
    ]


@pytest.mark.django_db(transaction=True)
async def test_a_leased_job_builds_its_agents_context_from_its_claim(monkeypatch):
    """The job reads neither the task nor its history again after claiming them."""
    store = TaskStore()
    task_id = await sync_to_async(new_task)(store, "echo from the claim")
    reads: list[str] = []

    def spy(name: str):
        read = getattr(store, name)

        def spied(task: str):
            reads.append(name)
            return read(task)

        return spied

    for name in ("load", "history"):
        monkeypatch.setattr(store, name, spy(name))
    assert await run_leased_job(task_id, "job-1", store, InMemoryEventBus())
    assert reads == []
    task = await sync_to_async(store.get_task)(task_id, "o", "")
    assert task.status.state is TaskState.COMPLETED
    assert task.artifacts[0].parts[0].text == "from the claim"


def test_terminal_tasks_are_not_claimed(store):
    task_id = new_task(store)
    store.cancel(task_id, "o", "")
    assert not store.claim_job(task_id, "job-1", 30)


def test_renew_extends_the_lease_and_reports_the_state(store):
    task_id = new_task(store)
    store.claim_job(task_id, "job-1", 1)
    before = models.Task.objects.get(pk=task_id).lease_expires_at
    assert store.renew_job(task_id, "job-1", 60) is TaskState.SUBMITTED
    assert models.Task.objects.get(pk=task_id).lease_expires_at > before
    # Another job cannot renew it.
    assert store.renew_job(task_id, "job-2", 60) is None
    store.cancel(task_id, "o", "")
    assert store.renew_job(task_id, "job-1", 60) is TaskState.CANCELED


def test_job_of_finished_task_names_a_job_that_ignored_cancellation(store):
    task_id = new_task(store)
    store.claim_job(task_id, "job-1", 30)
    assert store.job_of_finished_task(task_id) is None  # still active: nothing to stop
    store.cancel(task_id, "o", "")
    assert store.job_of_finished_task(task_id) == "job-1"
    store.release_job(task_id, "job-1")
    assert store.job_of_finished_task(task_id) is None


def test_a_lost_job_is_retried_then_the_task_fails(store):
    task_id = new_task(store)
    store.claim_job(task_id, "job-1", 30)
    store.update_status(task_id, TaskState.WORKING)
    assert store.recover_lost_jobs(retry=True, max_retries=1) == []  # lease still live
    lapse(task_id)
    assert store.recover_lost_jobs(retry=True, max_retries=1) == [task_id]
    task = models.Task.objects.get(pk=task_id)
    assert (task.lease_expires_at, task.job_attempts, task.state) == (None, 1, "TASK_STATE_WORKING")
    # The retry job may claim the message again; the lost job's redelivery may not.
    assert store.claim_job(task_id, "job-2", 30)
    lapse(task_id)
    assert store.recover_lost_jobs(retry=True, max_retries=1) == []
    task = models.Task.objects.get(pk=task_id)
    assert task.state == TaskState.FAILED.value
    assert task.status_message["parts"][0]["text"] == "The worker running this task was lost."
    assert task.lease_expires_at is None


def test_fail_policy_fails_a_lost_job_at_once(store):
    task_id = new_task(store)
    store.claim_job(task_id, "job-1", 30)
    lapse(task_id)
    assert store.recover_lost_jobs(retry=False, max_retries=5) == []
    assert models.Task.objects.get(pk=task_id).state == TaskState.FAILED.value


def test_an_interrupted_task_with_a_lapsed_lease_is_left_waiting(store):
    task_id = new_task(store)
    store.claim_job(task_id, "job-1", 30)
    store.update_status(task_id, TaskState.INPUT_REQUIRED)
    lapse(task_id)
    assert store.recover_lost_jobs(retry=True, max_retries=1) == []
    task = models.Task.objects.get(pk=task_id)
    assert (task.state, task.lease_expires_at) == (TaskState.INPUT_REQUIRED.value, None)


def test_jobs_outliving_their_tasks_are_named_after_the_grace_period(store):
    task_id = new_task(store)
    store.claim_job(task_id, "job-1", 30)
    store.cancel(task_id, "o", "")
    # Just canceled: the job still has its grace period to stop by itself.
    assert store.jobs_outliving_their_tasks(grace=60) == []
    models.Task.objects.filter(pk=task_id).update(
        status_timestamp=timezone.now() - timedelta(seconds=61)
    )
    assert store.jobs_outliving_their_tasks(grace=60) == [(task_id, "job-1")]
    store.release_job(task_id, "job-1")
    assert store.jobs_outliving_their_tasks(grace=60) == []


# --- the owed job: from the commit of its message until a worker claims it ------------------


def owed(task_id: str) -> tuple[object, int]:
    task = models.Task.objects.get(pk=task_id)
    return task.handoff_deadline, task.handoffs


def overdue(task_id: str) -> None:
    models.Task.objects.filter(pk=task_id).update(
        handoff_deadline=timezone.now() - timedelta(seconds=1)
    )


def test_a_new_task_owes_its_job_until_a_worker_claims_it(store, settings):
    settings.A2A_ENDPOINT = {**settings.A2A_ENDPOINT, "JOB_HANDOFF_TIMEOUT": 40}
    before = timezone.now()
    task_id = new_task(store)
    deadline, handoffs = owed(task_id)
    assert before + timedelta(seconds=40) <= deadline <= timezone.now() + timedelta(seconds=40)
    assert handoffs == 0
    assert store.claim_job(task_id, "job-1", 30)
    assert owed(task_id) == (None, 0)


def test_a_continued_task_owes_its_next_job_and_a_settled_one_none(store):
    task_id = new_task(store)
    store.claim_job(task_id, "job-1", 30)
    store.update_status(task_id, TaskState.INPUT_REQUIRED)
    assert owed(task_id)[0] is None
    answer = msgspec.convert(user_message("Ada"), types.Message)
    store.continue_task(task_id, "o", "", answer)
    assert owed(task_id)[0] is not None
    store.cancel(task_id, "o", "")  # canceled before a worker took the job: nothing owed
    assert owed(task_id)[0] is None


def test_overdue_jobs_are_handed_over_again_each_time_later(store, settings):
    settings.A2A_ENDPOINT = {**settings.A2A_ENDPOINT, "JOB_HANDOFF_TIMEOUT": 10}
    due, waiting = new_task(store), new_task(store)
    overdue(due)
    handed: list[str] = []
    assert store.hand_off_owed_jobs(handed.append) == [due]
    assert handed == [due]
    deadline, handoffs = owed(due)
    assert handoffs == 1
    assert deadline > timezone.now() + timedelta(seconds=19)  # twice the timeout now
    assert store.hand_off_owed_jobs(handed.append) == []  # not due again yet
    overdue(due)
    assert store.hand_off_owed_jobs(handed.append) == [due]
    assert owed(due)[0] > timezone.now() + timedelta(seconds=39)
    assert owed(waiting)[1] == 0  # still within its first deadline: never handed again


def test_a_failing_hand_off_ends_the_sweep_and_keeps_the_rest_owed(store):
    first, second = new_task(store), new_task(store)
    overdue(first)
    overdue(second)

    def broker_down(task_id: str) -> None:
        raise ConnectionError("broker unreachable")

    assert store.hand_off_owed_jobs(broker_down) == []
    assert owed(first)[1] == owed(second)[1] == 0
    assert owed(first)[0] < timezone.now()  # due at the next sweep


def test_a_settled_task_is_not_handed_over(store):
    task_id = new_task(store)
    models.Task.objects.filter(pk=task_id).update(state=TaskState.INPUT_REQUIRED.value)
    overdue(task_id)
    assert store.hand_off_owed_jobs(lambda task: pytest.fail("handed")) == []
    assert owed(task_id)[0] is None


def test_a_retried_lost_job_is_owed_at_once(store):
    task_id = new_task(store)
    store.claim_job(task_id, "job-1", 30)
    lapse(task_id)
    assert store.recover_lost_jobs(retry=True, max_retries=1) == [task_id]
    handed: list[str] = []
    # Enqueued by the hand-off, so a broker that is down then does not lose the retry.
    assert store.hand_off_owed_jobs(handed.append) == [task_id]
    assert store.claim_job(task_id, "job-2", 30)
    assert owed(task_id) == (None, 0)


# --- a retried job: the lost run's output marked superseded, the retry told its attempt -----


def chunk(store: TaskStore, task_id: str, artifact_id: str, text: str, **flags: bool) -> None:
    artifact = types.Artifact(
        artifact_id=artifact_id, name=artifact_id, parts=[types.Part(text=text)]
    )
    store.add_artifact(
        task_id, artifact, append=flags.get("append", False), last_chunk=flags.get("last", False)
    )


def test_a_retry_closes_and_marks_what_the_lost_run_wrote(store):
    task_id = new_task(store)
    store.claim_job(task_id, "job-1", 30)
    store.update_status(task_id, TaskState.WORKING, agent_message("Step 1/3"))
    chunk(store, task_id, "report", "part one ")  # never closed: the worker died
    chunk(store, task_id, "summary", "done", last=True)
    seq = models.Task.objects.get(pk=task_id).seq
    lapse(task_id)
    assert store.recover_lost_jobs(retry=True, max_retries=1) == [task_id]

    closing = store.events_after(task_id, seq)
    assert [next(iter(event.payload)) for event in closing] == [
        "artifactUpdate",
        "artifactUpdate",
        "statusUpdate",
    ]
    for event, name in zip(closing, ("report", "summary"), strict=False):
        update = event.payload["artifactUpdate"]
        assert (update["append"], update["lastChunk"]) == (True, True)
        assert update["artifact"]["artifactId"] == name
        assert update["artifact"]["parts"] == [{"text": ""}]
        assert update["artifact"]["metadata"] == {
            "a2aEndpointRetry": {"attempt": 1, "superseded": True}
        }
    status = closing[-1].payload["statusUpdate"]["status"]
    assert status["state"] == "TASK_STATE_WORKING"
    assert status["message"]["metadata"] == {"a2aEndpointRetry": {"attempt": 2, "lostAttempt": 1}}
    assert "attempt 2" in status["message"]["parts"][0]["text"]

    task = store.get_task(task_id, "o", "")
    report, summary = task.artifacts
    assert [part.text for part in report.parts] == ["part one ", ""]  # the partial content stays
    assert (
        report.metadata
        == summary.metadata
        == {"a2aEndpointRetry": {"attempt": 1, "superseded": True}}
    )
    assert task.history[-1].metadata == {"a2aEndpointRetry": {"attempt": 2, "lostAttempt": 1}}
    rows = models.Artifact.objects.filter(task_id=task_id)
    assert {(row.artifact_id, row.complete, row.attempt) for row in rows} == {
        ("report", True, 1),
        ("summary", True, 1),
    }

    # The retry knows it is one, and what it writes anew is its own.
    claimed = store.claim_job(task_id, "job-2", 30)
    assert claimed.attempt == 2
    chunk(store, task_id, "report", "all of it", last=True)  # from the start: append false
    chunk(store, task_id, "appendix", "new", last=True)
    task = store.get_task(task_id, "o", "")
    report, summary, appendix = task.artifacts
    assert report.metadata is None
    assert [part.text for part in report.parts] == ["all of it"]
    assert summary.metadata == {"a2aEndpointRetry": {"attempt": 1, "superseded": True}}
    assert appendix.metadata is None
    rows = models.Artifact.objects.filter(task_id=task_id)
    assert {(row.artifact_id, row.attempt) for row in rows} == {
        ("report", 2),
        ("summary", 1),
        ("appendix", 2),
    }


def test_the_agent_context_carries_the_attempt(store):
    from a2a_endpoint.execution.runner import _build_context

    task_id = new_task(store)
    first = store.claim_job(task_id, "job-1", 30)
    context = _build_context(store, task_id, threading.Event(), first)
    assert (context.attempt, context.is_retry) == (1, False)
    store.update_status(task_id, TaskState.WORKING, agent_message("working on it"))
    lapse(task_id)
    store.recover_lost_jobs(retry=True, max_retries=1)
    retried = _build_context(store, task_id, threading.Event(), store.claim_job(task_id, "j2", 30))
    assert (retried.attempt, retried.is_retry) == (2, True)
    # The lost run's own message and the notice of its loss are the clients': the retry's
    # conversation is the one the lost run started from.
    assert retried.history == context.history
    assert not retried.is_continuation
    assert len(store.history(task_id)) == 3
