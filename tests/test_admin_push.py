"""The push admin: a task's webhooks and deliveries on its page, the read-only delivery and
config admins, the dead-letter retry action, and no secret on any page."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.contrib.messages import constants as message_levels
from django.urls import reverse
from django.utils import timezone

from a2a_endpoint import admin as push_admin
from a2a_endpoint import models
from tests.service.builders import stored_task

pytestmark = pytest.mark.django_db

TOKEN = "tok-3b9f0c71e2"  # 14 characters
CREDENTIALS = "cred-d41a77e90b5c6f"  # 19 characters
DELIVERIES = reverse("admin:a2a_endpoint_pushdelivery_changelist")
CONFIGS = reverse("admin:a2a_endpoint_pushnotificationconfig_changelist")


def task_url(task_id: str) -> str:
    return reverse("admin:a2a_endpoint_task_change", args=[task_id])


def webhook(task_id: str, config_id: str = "hook-1") -> models.PushNotificationConfig:
    return models.PushNotificationConfig.objects.create(
        task_id=task_id,
        config_id=config_id,
        url=f"https://hooks.example.com/{config_id}",
        token=TOKEN,
        auth_scheme="Bearer",
        auth_credentials=CREDENTIALS,
    )


def delivery(
    config: models.PushNotificationConfig, seq: int, state: str = "dead", **fields: object
) -> models.PushDelivery:
    now = timezone.now()
    values: dict[str, object] = {
        "attempts": 3,
        "last_status": 500,
        "last_error": "HTTP 500",
        **fields,
    }
    return models.PushDelivery.objects.create(
        config=config,
        task_id=config.task_id,
        seq=seq,
        state=state,
        next_attempt_at=now,
        give_up_at=now + timedelta(days=1),
        created_at=now,
        **values,
    )


def messages_of(response) -> list[tuple[int, str]]:
    return [(message.level, str(message)) for message in response.context["messages"]]


def assert_no_secret(response) -> None:
    assert response.status_code == 200
    page = response.content.decode()
    assert TOKEN not in page
    assert CREDENTIALS not in page


# --- the task's page ----------------------------------------------------------------------


def test_task_page_shows_its_webhooks_masked_and_its_deliveries(admin_client):
    task_id = stored_task()
    config = webhook(task_id)
    delivery(config, 1, "delivered", attempts=1, last_status=200, last_error="")
    delivery(config, 2, "dead", last_error="HTTP 503 from the hook")

    response = admin_client.get(task_url(task_id))

    assert_no_secret(response)
    page = response.content.decode()
    assert "https://hooks.example.com/hook-1" in page
    assert "•••• (14 characters)" in page
    assert "•••• (19 characters)" in page
    assert "Dead letter" in page
    assert "HTTP 503 from the hook" in page
    prefixes = {inline.formset.prefix for inline in response.context["inline_admin_formsets"]}
    assert "push_configs" in prefixes
    for inline in response.context["inline_admin_formsets"]:
        assert not inline.has_add_permission
        assert not inline.has_change_permission
        assert not inline.has_delete_permission


def test_task_without_webhooks_shows_no_config_inline(admin_client):
    task_id = stored_task()
    response = admin_client.get(task_url(task_id))
    assert response.status_code == 200
    prefixes = {inline.formset.prefix for inline in response.context["inline_admin_formsets"]}
    assert "push_configs" not in prefixes
    assert "No push deliveries." in response.content.decode()


def test_task_page_shows_the_latest_deliveries_and_links_the_rest():
    task_id = stored_task()
    config = webhook(task_id)
    for seq in range(1, 61):
        delivery(config, seq, "delivered", attempts=1, last_status=200, last_error="")

    table = push_admin.deliveries_table(models.Task.objects.get(pk=task_id))

    assert table.count("<tr>") == 1 + push_admin.TASK_PAGE_DELIVERIES  # the head, then 50
    first_row = table.split("<tbody><tr><td>", 1)[1]
    assert first_row.startswith("60<")  # newest first
    assert "The latest 50 of 60:" in table
    assert f"{DELIVERIES}?q={task_id}" in table


def test_masked_shows_the_length_only():
    assert push_admin.masked("") == "-"
    assert push_admin.masked("x") == "•••• (1 character)"
    assert push_admin.masked(TOKEN) == "•••• (14 characters)"


# --- the push delivery and config admins --------------------------------------------------


def test_no_secret_on_the_push_list_or_detail_pages(admin_client):
    config = webhook(stored_task())
    sent = delivery(config, 1)

    assert_no_secret(admin_client.get(CONFIGS))
    assert_no_secret(admin_client.get(DELIVERIES))
    assert_no_secret(
        admin_client.get(reverse("admin:a2a_endpoint_pushdelivery_change", args=[sent.pk]))
    )
    detail = admin_client.get(
        reverse("admin:a2a_endpoint_pushnotificationconfig_change", args=[config.pk])
    )
    assert_no_secret(detail)
    assert "•••• (14 characters)" in detail.content.decode()
    assert "•••• (19 characters)" in detail.content.decode()
    assert "token" not in detail.context["adminform"].form.fields
    assert "auth_credentials" not in detail.context["adminform"].form.fields


def test_config_list_shows_config_task_url_scheme(admin_client):
    task_id = stored_task()
    webhook(task_id, "hook-listed")
    page = admin_client.get(CONFIGS).content.decode()
    for text in ("hook-listed", task_id, "https://hooks.example.com/hook-listed", "Bearer"):
        assert text in page


@pytest.mark.parametrize(
    ("model", "args"),
    [("pushdelivery", "delivery"), ("pushnotificationconfig", "config")],
)
def test_push_admins_are_read_only(admin_client, model, args):
    config = webhook(stored_task())
    row = delivery(config, 1) if args == "delivery" else config
    change = reverse(f"admin:a2a_endpoint_{model}_change", args=[row.pk])

    assert admin_client.get(reverse(f"admin:a2a_endpoint_{model}_add")).status_code == 403
    assert admin_client.post(change, {"url": "https://elsewhere.example.com/"}).status_code == 403
    delete = reverse(f"admin:a2a_endpoint_{model}_delete", args=[row.pk])
    assert admin_client.post(delete, {"post": "yes"}).status_code == 403
    assert type(row).objects.filter(pk=row.pk).exists()
    config.refresh_from_db()
    assert config.url == "https://hooks.example.com/hook-1"


def test_deleting_a_task_takes_its_webhooks_and_deliveries_along(admin_client):
    task_id = stored_task()
    delivery(webhook(task_id), 1)
    delete = reverse("admin:a2a_endpoint_task_delete", args=[task_id])

    confirm = admin_client.get(delete)
    assert confirm.status_code == 200
    assert not confirm.context["perms_lacking"]  # the read-only push admins do not bar it
    assert_no_secret(confirm)
    admin_client.post(delete, {"post": "yes"})

    assert not models.Task.objects.filter(pk=task_id).exists()
    assert not models.PushNotificationConfig.objects.filter(task_id=task_id).exists()
    assert not models.PushDelivery.objects.filter(task_id=task_id).exists()


def test_delivery_list_filters_by_state_and_searches_by_task(admin_client):
    first, second = stored_task(), stored_task()
    dead = delivery(webhook(first), 1, "dead")
    pending = delivery(webhook(second), 1, "pending", attempts=0)

    def listed(**query: str) -> set[int]:
        response = admin_client.get(DELIVERIES, query)
        assert response.status_code == 200
        return {row.pk for row in response.context["cl"].result_list}

    assert listed() == {dead.pk, pending.pk}
    assert listed(state__exact="dead") == {dead.pk}
    assert listed(state__exact="pending") == {pending.pk}
    assert listed(q=second) == {pending.pk}
    assert listed(q=first.split("-")[0]) == {dead.pk}


# --- retrying dead letters ----------------------------------------------------------------


def test_retry_action_puts_dead_letters_back_and_wakes_the_sender(
    admin_client, backend, django_capture_on_commit_callbacks
):
    first, second = stored_task(), stored_task()
    one, two = webhook(first), webhook(second)
    dead = [delivery(one, 1), delivery(one, 2), delivery(two, 1)]
    done = delivery(two, 2, "delivered", attempts=1, last_status=200, last_error="")
    selected = [row.pk for row in [*dead, done]]

    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(
            DELIVERIES,
            {"action": "retry_dead_letters", "_selected_action": selected},
            follow=True,
        )

    assert response.status_code == 200
    assert messages_of(response) == [
        (message_levels.SUCCESS, "Retrying 3 dead letters of 2 tasks."),
        (
            message_levels.WARNING,
            "1 selected delivery was not a dead letter: left as it is.",
        ),
    ]
    for row in dead:
        row.refresh_from_db()
        assert (row.state, row.attempts, row.last_error) == ("pending", 0, "")
    done.refresh_from_db()
    assert done.state == "delivered"
    assert sorted(backend.pushed) == sorted([first, second])


def test_retry_action_leaves_what_was_not_selected(
    admin_client, backend, django_capture_on_commit_callbacks
):
    config = webhook(stored_task())
    chosen, other = delivery(config, 1), delivery(config, 2)

    with django_capture_on_commit_callbacks(execute=True):
        admin_client.post(
            DELIVERIES, {"action": "retry_dead_letters", "_selected_action": [chosen.pk]}
        )

    assert models.PushDelivery.objects.get(pk=chosen.pk).state == "pending"
    assert models.PushDelivery.objects.get(pk=other.pk).state == "dead"
    assert backend.pushed == [str(config.task_id)]


def test_retry_action_needs_change_permission(client, django_user_model, backend):
    viewer = django_user_model.objects.create_user("viewer", password="pw", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_pushdelivery"))
    client.force_login(viewer)
    dead = delivery(webhook(stored_task()), 1)

    response = client.get(DELIVERIES)
    assert response.status_code == 200
    assert b"retry_dead_letters" not in response.content
    client.post(DELIVERIES, {"action": "retry_dead_letters", "_selected_action": [dead.pk]})
    assert models.PushDelivery.objects.get(pk=dead.pk).state == "dead"
    assert backend.pushed == []
