"""Django app configuration for a2a_endpoint."""

from django.apps import AppConfig


class A2AEndpointConfig(AppConfig):
    name = "a2a_endpoint"
    label = "a2a_endpoint"
    verbose_name = "A2A endpoint"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from a2a_endpoint import checks  # noqa: F401  (registers the system checks)
