"""Schema of stored tasks: Task, its history (Message), Artifact, the TaskEvent log, and push
notification configs with their outbox of deliveries; the heartbeats of memory-bus processes."""

from __future__ import annotations

import uuid

from django.db import models
from django.utils.translation import gettext_lazy as _

from a2a_endpoint.lifecycle import TaskState
from a2a_endpoint.managers import (
    MessageQuerySet,
    ServerProcessQuerySet,
    TaskEventQuerySet,
    TaskQuerySet,
)

STATE_CHOICES = [(state.value, state.name.replace("_", " ").capitalize()) for state in TaskState]


class Task(models.Model):
    """One A2A task. ``seq`` is the number of the last TaskEvent written for it."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    context_id = models.CharField(_("context id"), max_length=255)
    # On PostgreSQL a trigger of migration 0003 names owner and tenant: altering either
    # column's type needs that trigger dropped first (see the migration).
    owner = models.CharField(_("owner"), max_length=255, help_text=_("The caller who owns it."))
    tenant = models.CharField(_("tenant"), max_length=255, blank=True, default="")
    origin_message_id = models.CharField(
        _("origin message id"),
        max_length=255,
        help_text=_("messageId of the message that started it (one task per sent message)."),
    )
    state = models.CharField(_("state"), max_length=32, choices=STATE_CHOICES)
    status_message = models.JSONField(
        _("status message"), null=True, blank=True, help_text=_("ProtoJSON Message, if any.")
    )
    status_timestamp = models.DateTimeField(_("status timestamp"))
    metadata = models.JSONField(_("metadata"), null=True, blank=True)
    job_id = models.CharField(
        _("job id"), max_length=255, blank=True, default="", help_text=_("The running job.")
    )
    job_position = models.PositiveIntegerField(
        _("job message"),
        default=0,
        help_text=_("1 + history position of the user message the last job claimed."),
    )
    lease_expires_at = models.DateTimeField(
        _("job lease expires"),
        null=True,
        blank=True,
        help_text=_("Renewed by a running out-of-process job; a lapsed lease is a lost job."),
    )
    job_attempts = models.PositiveSmallIntegerField(_("job attempts"), default=0)
    # db_default too (as handoffs): processes of the previous version insert without it.
    job_worker = models.CharField(
        _("job worker"),
        max_length=255,
        blank=True,
        default="",
        db_default="",
        help_text=_(
            "host:pid of the process that claimed the last job (out-of-process workers; "
            "kept after the job ends)."
        ),
    )
    handoff_deadline = models.DateTimeField(
        _("job hand-off deadline"),
        null=True,
        blank=True,
        help_text=_(
            "A job is owed (set with the message it runs): a worker must claim it by then, "
            "or the sweeper hands it to the backend again. Empty: no job owed."
        ),
    )
    # db_default too: processes of the previous version, running while a deployment
    # migrates, insert tasks without this column.
    handoffs = models.PositiveSmallIntegerField(
        _("job hand-offs"),
        default=0,
        db_default=0,
        help_text=_("Times the sweeper handed the owed job again."),
    )
    # Set for good once the task has a push config (never cleared, so it can only err towards
    # looking): an event of a task without one skips the outbox's statement.
    push_configured = models.BooleanField(
        _("has had push configs"), default=False, db_default=False
    )
    seq = models.PositiveBigIntegerField(_("last event number"), default=0)
    history_size = models.PositiveIntegerField(_("history size"), default=0)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated"), auto_now=True)

    objects = TaskQuerySet.as_manager()

    class Meta:
        verbose_name = _("task")
        verbose_name_plural = _("tasks")
        ordering = ["-status_timestamp", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "tenant", "origin_message_id"], name="a2a_task_origin_once"
            ),
        ]
        indexes = [
            models.Index(
                fields=["owner", "tenant", "-status_timestamp", "-id"], name="a2a_task_owner_recent"
            ),
            models.Index(
                fields=["owner", "tenant", "context_id", "-status_timestamp", "-id"],
                name="a2a_task_owner_context",
            ),
            models.Index(
                fields=["owner", "tenant", "state", "-status_timestamp", "-id"],
                name="a2a_task_owner_state",
            ),
            models.Index(
                fields=["lease_expires_at"],
                name="a2a_task_leased",
                condition=models.Q(lease_expires_at__isnull=False),
            ),
            models.Index(
                fields=["handoff_deadline"],
                name="a2a_task_job_owed",
                condition=models.Q(handoff_deadline__isnull=False),
            ),
            # The purge's scan (store/retention.py): one state's oldest tasks, across
            # callers. Settled states only: new and running tasks, written most, skip it.
            models.Index(
                fields=["state", "status_timestamp", "id"],
                name="a2a_task_state_age",
                condition=models.Q(state__in=sorted(s.value for s in TaskState if s.is_settled)),
            ),
            # The admin's task list (admin/tasks.py), newest first across callers: all tasks,
            # and one state's. By creation, which ListTasks never orders by: an index in its
            # order without the owner first would tempt the planner off the owner's index.
            # On PostgreSQL, migration 0006's triggers name ``state``: altering its type needs
            # them dropped first (see the migration).
            models.Index(fields=["-created_at", "-id"], name="a2a_task_created"),
            models.Index(fields=["state", "-created_at", "-id"], name="a2a_task_state_created"),
        ]

    def __str__(self) -> str:
        return f"{self.id} ({self.state})"

    @property
    def task_state(self) -> TaskState:
        return TaskState(self.state)


class Message(models.Model):
    """A message of a task's history, in the order it was exchanged."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="messages")
    position = models.PositiveIntegerField(_("position"))
    message_id = models.CharField(_("message id"), max_length=255)
    role = models.CharField(_("role"), max_length=16)
    payload = models.JSONField(_("message"), help_text=_("ProtoJSON Message."))
    created_at = models.DateTimeField(_("created"), auto_now_add=True)

    objects = MessageQuerySet.as_manager()

    class Meta:
        verbose_name = _("message")
        verbose_name_plural = _("messages")
        ordering = ["task_id", "position"]
        constraints = [
            models.UniqueConstraint(fields=["task", "position"], name="a2a_message_position"),
            models.UniqueConstraint(fields=["task", "message_id"], name="a2a_message_once"),
        ]
        indexes = [models.Index(fields=["message_id"], name="a2a_message_id")]

    def __str__(self) -> str:
        return f"{self.role} {self.message_id}"


class Artifact(models.Model):
    """An output of a task; chunks are merged at write time (append / lastChunk)."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="artifacts")
    position = models.PositiveIntegerField(_("position"))
    artifact_id = models.CharField(_("artifact id"), max_length=255)
    name = models.CharField(_("name"), max_length=255, blank=True, default="")
    description = models.TextField(_("description"), blank=True, default="")
    parts = models.JSONField(_("parts"), default=list, help_text=_("ProtoJSON Parts."))
    metadata = models.JSONField(_("metadata"), null=True, blank=True)
    extensions = models.JSONField(_("extensions"), default=list, blank=True)
    complete = models.BooleanField(_("complete"), default=False, help_text=_("Last chunk seen."))
    attempt = models.PositiveSmallIntegerField(
        _("job attempt"),
        default=1,
        db_default=1,
        help_text=_("The run of the task's job that last wrote it (a lost run is retried)."),
    )
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated"), auto_now=True)

    class Meta:
        verbose_name = _("artifact")
        verbose_name_plural = _("artifacts")
        ordering = ["task_id", "position"]
        constraints = [
            models.UniqueConstraint(fields=["task", "artifact_id"], name="a2a_artifact_once"),
        ]

    def __str__(self) -> str:
        return self.name or self.artifact_id


class TaskEvent(models.Model):
    """Append-only log of a task's StreamResponses, numbered by ``seq`` (gap filling, resume)."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="events")
    seq = models.PositiveBigIntegerField(_("sequence number"))
    kind = models.CharField(_("kind"), max_length=32)
    state = models.CharField(
        _("state"), max_length=32, choices=STATE_CHOICES, help_text=_("Task state after it.")
    )
    payload = models.JSONField(_("stream response"))
    created_at = models.DateTimeField(_("created"), auto_now_add=True)

    objects = TaskEventQuerySet.as_manager()

    class Meta:
        verbose_name = _("task event")
        verbose_name_plural = _("task events")
        ordering = ["task_id", "seq"]
        constraints = [models.UniqueConstraint(fields=["task", "seq"], name="a2a_event_seq")]

    def __str__(self) -> str:
        return f"{self.task_id} #{self.seq} {self.kind}"


class PushNotificationConfig(models.Model):
    """A webhook of a task (A2A §4.3): every event of the task is POSTed to ``url``.

    ``token`` and ``credentials`` are secrets of the client's: the admin masks them and no
    log line or error message carries them.
    """

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="push_configs")
    config_id = models.CharField(
        _("config id"), max_length=255, help_text=_("The id the client names it by.")
    )
    url = models.CharField(_("webhook URL"), max_length=2048)
    token = models.CharField(
        _("token"),
        max_length=1024,
        blank=True,
        default="",
        help_text=_("Sent as X-A2A-Notification-Token."),
    )
    auth_scheme = models.CharField(
        _("authentication scheme"),
        max_length=64,
        blank=True,
        default="",
        help_text=_("Sent as 'Authorization: <scheme> <credentials>' (Bearer, Basic ...)."),
    )
    auth_credentials = models.CharField(_("credentials"), max_length=4096, blank=True, default="")
    sending_until = models.DateTimeField(
        _("sender lease"),
        null=True,
        blank=True,
        help_text=_("A sender is delivering to it until then (one at a time, in order)."),
    )
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated"), auto_now=True)

    class Meta:
        verbose_name = _("push notification config")
        verbose_name_plural = _("push notification configs")
        ordering = ["task_id", "created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["task", "config_id"], name="a2a_push_config_once"),
        ]

    def __str__(self) -> str:
        return f"{self.config_id} of {self.task_id}"


class PushDelivery(models.Model):
    """The outbox: one event of a task owed to one of its webhooks, written with the event.

    Sent after the commit, per config in ``seq`` order, at least once: ``pending`` until the
    webhook answers 2xx (``delivered``) or the tries run out (``dead``, a dead letter).
    """

    PENDING = "pending"
    DELIVERED = "delivered"
    DEAD = "dead"
    STATES = [(PENDING, _("Pending")), (DELIVERED, _("Delivered")), (DEAD, _("Dead letter"))]

    config = models.ForeignKey(
        PushNotificationConfig, on_delete=models.CASCADE, related_name="deliveries"
    )
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="push_deliveries")
    seq = models.PositiveBigIntegerField(_("event number"))
    state = models.CharField(_("state"), max_length=16, choices=STATES, default=PENDING)
    attempts = models.PositiveSmallIntegerField(_("attempts"), default=0)
    next_attempt_at = models.DateTimeField(_("next attempt"))
    give_up_at = models.DateTimeField(
        _("give up at"), help_text=_("Dead-lettered when not delivered by then (PUSH_MAX_AGE).")
    )
    last_status = models.PositiveSmallIntegerField(_("last HTTP status"), null=True, blank=True)
    last_error = models.CharField(_("last error"), max_length=500, blank=True, default="")
    created_at = models.DateTimeField(_("created"))
    delivered_at = models.DateTimeField(_("delivered"), null=True, blank=True)

    class Meta:
        verbose_name = _("push delivery")
        verbose_name_plural = _("push deliveries")
        ordering = ["config_id", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["config", "seq"], name="a2a_push_delivery_once"),
        ]
        indexes = [
            models.Index(
                fields=["config", "seq"],
                name="a2a_push_pending",
                condition=models.Q(state="pending"),
            ),
            models.Index(
                fields=["next_attempt_at"],
                name="a2a_push_due",
                condition=models.Q(state="pending"),
            ),
            models.Index(fields=["task", "state"], name="a2a_push_task_state"),
        ]

    def __str__(self) -> str:
        return f"{self.task_id} #{self.seq} → {self.config_id} ({self.state})"


class ServerProcess(models.Model):
    """A process serving with the in-memory event bus, as of its last heartbeat: processes
    sharing one database see each other here (``streaming/presence.py``)."""

    id = models.UUIDField(primary_key=True, editable=False)
    host = models.CharField(_("host"), max_length=255)
    pid_namespace = models.CharField(
        _("PID namespace"), max_length=64, blank=True, default="", help_text=_("Linux only.")
    )
    pid = models.PositiveIntegerField(_("process id"))
    started_at = models.DateTimeField(_("started"))
    seen_at = models.DateTimeField(_("last heartbeat"))

    objects = ServerProcessQuerySet.as_manager()

    class Meta:
        verbose_name = _("server process")
        verbose_name_plural = _("server processes")
        ordering = ["-seen_at"]
        indexes = [models.Index(fields=["seen_at"], name="a2a_process_seen")]

    def __str__(self) -> str:
        return f"{self.host} pid {self.pid}"
