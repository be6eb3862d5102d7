"""The sample Django project: serves the demo agents with a2a_endpoint (``make run``)."""

# The Celery app is created with Django, so ``shared_task`` jobs enqueued by the web
# processes (a2a_endpoint's CeleryBackend) use this app's broker settings.
from .celery import app as celery_app

__all__ = ["celery_app"]
