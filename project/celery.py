"""The sample project's Celery app: ``celery -A project worker`` runs the agent jobs.

The standard Django integration: settings come from ``django.conf:settings`` under the
``CELERY_`` prefix (``CELERY_BROKER_URL`` ...), and tasks from each installed app's ``tasks``
module (``a2a_endpoint.tasks`` holds the agent jobs and starts the lost-job sweeper).
"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

app = Celery("project")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
