"""``manage.py a2a_push_retry`` (counting, retrying by task or all, sending on the inline
backend) and ``manage.py a2a_webhook_receiver`` (run as the sample project would)."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from email.message import Message
from io import StringIO
from pathlib import Path

import httpx
import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from a2a_endpoint import models
from a2a_endpoint.management.commands.a2a_webhook_receiver import describe
from a2a_endpoint.testing import WebhookReceiver
from tests.service.builders import a2a_settings, stored_task

REPO_ROOT = Path(__file__).resolve().parents[1]
DEADLINE = 20.0
TOKEN = "tok-77c0e1a2"
CREDENTIALS = "cred-5e8b9d03f1"


def webhook(
    task_id: str, url: str = "https://hooks.example.com/a"
) -> models.PushNotificationConfig:
    return models.PushNotificationConfig.objects.create(
        task_id=task_id,
        config_id="hook",
        url=url,
        token=TOKEN,
        auth_scheme="Bearer",
        auth_credentials=CREDENTIALS,
    )


def dead_letter(config: models.PushNotificationConfig, seq: int) -> models.PushDelivery:
    now = timezone.now()
    return models.PushDelivery.objects.create(
        config=config,
        task_id=config.task_id,
        seq=seq,
        state="dead",
        attempts=3,
        next_attempt_at=now,
        give_up_at=now + timedelta(days=1),
        created_at=now,
        last_status=500,
        last_error="HTTP 500",
    )


def states(task_id: str) -> list[str]:
    rows = models.PushDelivery.objects.filter(task_id=task_id).order_by("seq")
    return list(rows.values_list("state", flat=True))


def retry(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("a2a_push_retry", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.fixture
def dead_letters(db) -> tuple[str, str]:
    """Two tasks: the first with a delivered event and two dead letters, the second one."""
    first, second = stored_task(), stored_task()
    config = webhook(first)
    for seq in (1, 2, 3):
        dead_letter(config, seq)
    models.PushDelivery.objects.filter(task_id=first, seq=1).update(state="delivered")
    dead_letter(webhook(second), 1)
    return first, second


# --- a2a_push_retry -------------------------------------------------------------------------


def test_dry_run_only_counts(dead_letters, backend):
    first, second = dead_letters
    out, _ = retry("--all", "--dry-run")
    assert out == "Would retry 3 dead letters of 2 tasks.\n"
    out, _ = retry("--task", second, "--dry-run")
    assert out == "Would retry 1 dead letter of 1 task.\n"
    assert states(first) == ["delivered", "dead", "dead"]
    assert states(second) == ["dead"]
    assert backend.pushed == []


def test_retries_the_named_tasks(dead_letters, backend):
    first, second = dead_letters
    out, err = retry("--task", first)
    assert out == "Retrying 2 dead letters of 1 task.\n"
    assert err == ""
    assert states(first) == ["delivered", "pending", "pending"]
    assert states(second) == ["dead"]
    retried = models.PushDelivery.objects.get(task_id=first, seq=2)
    assert (retried.attempts, retried.last_error) == (0, "")
    assert retried.give_up_at > timezone.now() + timedelta(hours=23)
    assert backend.pushed == [first]


def test_retries_all(dead_letters, backend):
    first, second = dead_letters
    out, _ = retry("--all")
    assert out == "Retrying 3 dead letters of 2 tasks.\n"
    assert states(first) == ["delivered", "pending", "pending"]
    assert states(second) == ["pending"]
    assert sorted(backend.pushed) == sorted([first, second])


def test_nothing_to_retry(dead_letters, backend):
    missing = str(uuid.uuid4())
    out, err = retry("--task", missing)
    assert out == "No dead letters to retry.\n"
    assert err == f"No task {missing}.\n"
    assert backend.pushed == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "Name the tasks with --task TASK_ID, or use --all"),
        (("--all", "--task", str(uuid.uuid4())), "Name the tasks"),
        (("--task", "not-a-uuid"), "Not a task id: 'not-a-uuid'"),
    ],
)
@pytest.mark.django_db
def test_refuses_ambiguous_or_malformed_arguments(args, message, backend):
    with pytest.raises(CommandError, match=message):
        retry(*args)
    assert backend.pushed == []


@pytest.mark.django_db(transaction=True)
def test_sends_on_the_inline_backend_before_it_exits():
    fast = {"PUSH_ALLOW_HTTP": True, "PUSH_ALLOW_PRIVATE_NETWORKS": True, "PUSH_TIMEOUT": 5.0}
    with a2a_settings(**fast), WebhookReceiver() as receiver:
        task_id = stored_task(history=2)  # events 1 to 3: the task, a status, COMPLETED
        config = webhook(task_id, receiver.url())
        for seq in (1, 2, 3):
            dead_letter(config, seq)

        out, err = retry("--task", task_id)

        # No wait here: the command returns once the inline backend sent and shut down.
        assert [(push.task_id, push.seq) for push in receiver.received] == [
            (task_id, 1),
            (task_id, 2),
            (task_id, 3),
        ]
    assert out.splitlines() == [
        "Retrying 3 dead letters of 1 task.",
        "3 delivered, 0 still pending (retried later), 0 dead again.",
    ]
    assert err == ""
    assert states(task_id) == ["delivered"] * 3


# --- a2a_webhook_receiver -------------------------------------------------------------------


def project_env() -> dict[str, str]:
    """This environment without the variables the sample project's settings read (its DEBUG
    defaults then), as tests/test_project_settings.py runs it."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DJANGO_", "A2A_", "DB_", "CELERY_", "DEMO_", "SERVER_"))
        and key not in {"DATABASE_URL", "REDIS_URL"}
    }
    return {**env, "DJANGO_SETTINGS_MODULE": "project.settings", "PYTHONUNBUFFERED": "1"}


class Output:
    """The lines of a subprocess's output, read by a thread of their own."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        assert process.stdout is not None
        threading.Thread(target=self._read, args=(process.stdout,), daemon=True).start()

    def _read(self, stream) -> None:
        for line in stream:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)  # the process closed its output

    def wait_for(self, wanted: Callable[[str], bool], timeout: float = DEADLINE) -> str:
        """The next line ``wanted`` accepts; fail at the deadline or when the output ends."""
        while True:
            try:
                line = self.lines.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"no such line within {timeout}s: {self.seen}") from None
            assert line is not None, f"the output ended: {self.seen}"
            self.seen.append(line)
            if wanted(line):
                return line


@pytest.fixture
def receiver_process() -> Iterator[tuple[subprocess.Popen[str], Output, str]]:
    process = subprocess.Popen(
        [sys.executable, "manage.py", "a2a_webhook_receiver", "--port", "0", "--status", "202"],
        cwd=REPO_ROOT,
        env=project_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        output = Output(process)
        ready = output.wait_for(lambda line: line.startswith("Receiving push notifications"))
        url = re.search(r"http://\S+/", ready)
        assert url is not None, ready
        yield process, output, url.group(0)
    finally:
        if process.poll() is None:
            process.terminate()
        process.wait(timeout=DEADLINE)


def test_webhook_receiver_prints_each_push(receiver_process):
    process, output, url = receiver_process
    task_id = str(uuid.uuid4())
    status_update = {
        "statusUpdate": {
            "taskId": task_id,
            "contextId": "ctx",
            "status": {"state": "TASK_STATE_WORKING"},
        }
    }
    headers = {
        "X-A2A-Task-Id": task_id,
        "X-A2A-Event-Seq": "4",
        "X-A2A-Push-Config-Id": "hook",
        "X-A2A-Delivery-Attempt": "1",
        "Authorization": f"Bearer {CREDENTIALS}",
        "X-A2A-Notification-Token": TOKEN,
    }

    answer = httpx.post(url + "webhook", json=status_update, headers=headers, timeout=DEADLINE)
    assert answer.status_code == 202
    line = output.wait_for(lambda line: f"task={task_id}" in line)
    assert re.fullmatch(
        rf"\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d task={task_id} seq=4 statusUpdate "
        r"state=TASK_STATE_WORKING config=hook attempt=1 auth=Bearer token=yes",
        line,
    ), line

    artifact = {"artifactUpdate": {"taskId": task_id, "artifact": {"artifactId": "a"}}}
    plain = {"X-A2A-Task-Id": task_id, "X-A2A-Event-Seq": "5"}
    assert httpx.post(url, json=artifact, headers=plain, timeout=DEADLINE).status_code == 202
    line = output.wait_for(lambda line: "seq=5" in line)
    assert line.endswith(
        f"task={task_id} seq=5 artifactUpdate config=? attempt=? auth=none token=no"
    )

    process.send_signal(signal.SIGINT)  # Ctrl-C
    output.wait_for(lambda line: line == "Stopped.")
    assert process.wait(timeout=DEADLINE) == 0
    assert not any(TOKEN in seen or CREDENTIALS in seen for seen in output.seen)


def test_webhook_receiver_refuses_a_status_that_is_no_answer():
    result = subprocess.run(
        [sys.executable, "manage.py", "a2a_webhook_receiver", "--status", "99"],
        cwd=REPO_ROOT,
        env=project_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    assert "--status must be an HTTP status from 200 to 599" in result.stderr


def headers_of(**values: str) -> Message:
    message = Message()
    for name, value in values.items():
        message[name.replace("_", "-")] = value
    return message


@pytest.mark.parametrize(
    ("body", "authorization", "shown"),
    [
        (b'{"task": {"id": "t"}}', "Basic dXNlcjpwdw==", "task config=? attempt=? auth=Basic"),
        (b"not json", "", "unreadable body (8 bytes) config=? attempt=? auth=none"),
        (b'{"a": 1, "b": 2}', "", "not a StreamResponse config=? attempt=? auth=none"),
        (b'{"message": {}}', "lone-credential", "message config=? attempt=? auth=?"),
    ],
)
def test_describe_never_shows_credentials(body, authorization, shown):
    headers = headers_of(Authorization=authorization) if authorization else headers_of()
    line = describe(headers, body, datetime(2026, 1, 2, 3, 4, 5))
    assert line == f"2026-01-02 03:04:05 task=? seq=? {shown} token=no"
