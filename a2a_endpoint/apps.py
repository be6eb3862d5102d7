"""Django app configuration for a2a_endpoint."""

from django.apps import AppConfig


class A2AEndpointConfig(AppConfig):
    name = "a2a_endpoint"
    label = "a2a_endpoint"
    verbose_name = "A2A endpoint"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.models.signals import post_migrate

        from a2a_endpoint import checks  # noqa: F401  (registers the system checks)
        from a2a_endpoint.store import forget_task_counts

        # Migration 0003 may just have created (or dropped) the task counts ListTasks reads.
        post_migrate.connect(forget_task_counts, dispatch_uid="a2a_endpoint.forget_task_counts")
