"""The Task admin: read-only changelist and change page, search, and the cancel action."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import msgspec
import pytest
from django.contrib.auth.models import Permission
from django.contrib.messages import constants as message_levels
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from a2a_endpoint import models, types
from a2a_endpoint.admin import parts_text
from a2a_endpoint.execution import runtime
from a2a_endpoint.lifecycle import TaskState
from a2a_endpoint.testing import user_message

CHANGELIST = reverse("admin:a2a_endpoint_task_changelist")


def change_url(task_id: str) -> str:
    return reverse("admin:a2a_endpoint_task_change", args=[task_id])


def create_task(text: str = "hello", *, context_id: str = "", owner: str = "user:1") -> str:
    """A SUBMITTED task written through the store, as SendMessage does (no job started)."""
    record = runtime.get_store().create_task(
        owner=owner,
        tenant="",
        context_id=context_id or str(uuid.uuid4()),
        message=msgspec.convert(user_message(text), types.Message),
    )
    return record.id


def finish_task(task_id: str) -> None:
    """Play a short job through the store: working, an artifact, completed."""
    store = runtime.get_store()
    agent = types.Message(
        message_id=str(uuid.uuid4()),
        role=types.Role.AGENT,
        parts=[types.Part(text="thinking hard")],
    )
    store.update_status(task_id, TaskState.WORKING, agent)
    artifact = types.Artifact(
        artifact_id="art-1", name="answer", parts=[types.Part(text="forty-two")]
    )
    store.add_artifact(task_id, artifact, append=False, last_chunk=True)
    store.update_status(task_id, TaskState.COMPLETED)


def wait_for(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met before the deadline"
        time.sleep(0.02)


def state_of(task_id: str) -> str:
    return models.Task.objects.get(pk=task_id).state


def listed_ids(response) -> set[str]:
    return {str(task.pk) for task in response.context["cl"].result_list}


def messages_of(response) -> list[tuple[int, str]]:
    return [(message.level, str(message)) for message in response.context["messages"]]


@pytest.mark.django_db
class TestChangelist:
    def test_lists_tasks_with_filters(self, admin_client):
        done = create_task("first")
        finish_task(done)
        waiting = create_task("second")
        response = admin_client.get(CHANGELIST)
        assert response.status_code == 200
        assert listed_ids(response) == {done, waiting}
        assert b"By state" in response.content

        response = admin_client.get(CHANGELIST, {"state__exact": TaskState.COMPLETED.value})
        assert response.status_code == 200
        assert listed_ids(response) == {done}

    def test_newest_first(self, admin_client):
        older, newer = create_task("one"), create_task("two")
        response = admin_client.get(CHANGELIST)
        assert [str(task.pk) for task in response.context["cl"].result_list] == [newer, older]

    def test_search_by_context_id(self, admin_client):
        wanted = create_task(context_id="ctx-wanted")
        create_task(context_id="ctx-other")
        response = admin_client.get(CHANGELIST, {"q": "ctx-wanted"})
        assert response.status_code == 200
        assert listed_ids(response) == {wanted}

    @pytest.mark.parametrize(
        "fragment",
        [
            pytest.param(lambda task_id: task_id, id="whole"),
            pytest.param(lambda task_id: task_id.upper(), id="upper-case"),
            pytest.param(lambda task_id: task_id[:8], id="prefix"),
            pytest.param(lambda task_id: task_id[4:18], id="middle-with-hyphen"),
        ],
    )
    def test_search_by_task_id(self, admin_client, fragment):
        wanted, other = create_task(), create_task()
        assert fragment(wanted).lower() not in other  # the fragment singles out one task
        response = admin_client.get(CHANGELIST, {"q": fragment(wanted)})
        assert response.status_code == 200
        assert listed_ids(response) == {wanted}

    def test_query_count_does_not_grow_with_tasks(self, admin_client):
        def count_queries() -> int:
            with CaptureQueriesContext(connection) as queries:
                response = admin_client.get(CHANGELIST)
            assert response.status_code == 200
            return len(queries)

        create_task()
        with_one = count_queries()
        for _ in range(19):
            finish_task(create_task())
        assert models.Task.objects.count() == 20
        assert count_queries() == with_one


@pytest.mark.django_db
class TestReadOnly:
    def test_no_add(self, admin_client):
        assert admin_client.get(reverse("admin:a2a_endpoint_task_add")).status_code == 403
        assert reverse("admin:a2a_endpoint_task_add").encode() not in (
            admin_client.get(CHANGELIST).content
        )

    def test_change_page_shows_history_artifacts_and_events(self, admin_client):
        task_id = create_task("what is the answer?")
        finish_task(task_id)
        response = admin_client.get(change_url(task_id))
        assert response.status_code == 200
        page = response.content.decode()
        for text in ("what is the answer?", "thinking hard", "ROLE_USER", "ROLE_AGENT"):
            assert text in page  # history, in the timeline
        assert "art-1" in page
        assert "forty-two" in page  # the artifacts section
        for kind in ("task", "statusUpdate", "artifactUpdate", "TASK_STATE_COMPLETED"):
            assert kind in page  # events, in the timeline
        # History and events are one paged timeline (tests/test_admin_console.py), not
        # inlines of every row; the webhooks' inline only on a task that has some.
        assert response.context["inline_admin_formsets"] == []
        for inline in response.context["inline_admin_formsets"]:
            assert not inline.has_add_permission
            assert not inline.has_change_permission
            assert not inline.has_delete_permission

    def test_change_page_refuses_edits(self, admin_client):
        task_id = create_task(context_id="ctx-before")
        response = admin_client.post(change_url(task_id), {"context_id": "ctx-after"})
        assert response.status_code == 403
        assert models.Task.objects.get(pk=task_id).context_id == "ctx-before"


@pytest.mark.django_db(transaction=True)
def test_cancel_action_stops_a_working_task(admin_client, settings):
    # No forced stop within the test: the job must end by itself when it is canceled.
    settings.A2A_ENDPOINT = {**settings.A2A_ENDPOINT, "CANCEL_GRACE_PERIOD": 60}
    task_id = create_task("wait 30")
    backend = runtime.get_backend()
    backend.submit(task_id)
    wait_for(lambda: state_of(task_id) == TaskState.WORKING.value)

    response = admin_client.post(
        CHANGELIST, {"action": "cancel_tasks", "_selected_action": [task_id]}, follow=True
    )

    assert response.status_code == 200
    assert messages_of(response) == [(message_levels.SUCCESS, "Canceled 1 task.")]
    assert state_of(task_id) == TaskState.CANCELED.value
    # The agent waits on its cancel signal for 30 s: only the cancellation ends it this soon.
    wait_for(lambda: not backend.running(task_id), timeout=3.0)
    last = models.TaskEvent.objects.filter(task_id=task_id).order_by("seq").last()
    assert last.payload["statusUpdate"]["status"]["state"] == TaskState.CANCELED.value


@pytest.mark.django_db
def test_cancel_action_reports_finished_tasks(admin_client):
    done = create_task()
    finish_task(done)
    open_task = create_task()
    seq_before = models.Task.objects.get(pk=done).seq

    response = admin_client.post(
        CHANGELIST, {"action": "cancel_tasks", "_selected_action": [done, open_task]}, follow=True
    )

    assert response.status_code == 200
    assert messages_of(response) == [
        (message_levels.SUCCESS, "Canceled 1 task."),
        (
            message_levels.WARNING,
            f"1 task was not cancelable (it is already finished): {done}",
        ),
    ]
    finished = models.Task.objects.get(pk=done)
    assert finished.state == TaskState.COMPLETED.value
    assert finished.seq == seq_before
    assert state_of(open_task) == TaskState.CANCELED.value


@pytest.mark.django_db
def test_cancel_action_needs_change_permission(client, django_user_model):
    viewer = django_user_model.objects.create_user("viewer", password="pw", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_task"))
    client.force_login(viewer)
    task_id = create_task()

    response = client.get(CHANGELIST)
    assert response.status_code == 200
    assert b"cancel_tasks" not in response.content
    client.post(CHANGELIST, {"action": "cancel_tasks", "_selected_action": [task_id]})
    assert state_of(task_id) == TaskState.SUBMITTED.value


def test_parts_text_labels_non_text_parts():
    parts = [
        {"text": "hi"},
        {"url": "https://example.com/a.pdf", "filename": "a.pdf"},
        {"raw": "AAAA", "mediaType": "image/png"},
        {"data": {"n": 1}},
    ]
    assert parts_text(parts) == (
        'hi\n[a.pdf: https://example.com/a.pdf]\n[image/png: 3 bytes]\n[data: {"n": 1}]'
    )
