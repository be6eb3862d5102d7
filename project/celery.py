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

# `celery -A project beat` (ONE beat process for the whole deployment: deploy/Procfile,
# deploy/systemd/a2a-celery-beat.service) sends the retention purge to the workers hourly;
# it deletes nothing while RETENTION is empty (docs/retention.md). A run still queued when
# the next one is due is dropped (expires) rather than piling up behind a busy worker.
app.conf.beat_schedule = {
    "a2a-purge-expired-tasks": {
        "task": "a2a_endpoint.purge_expired_tasks",
        "schedule": 3600.0,
        "options": {"expires": 3000.0},
    },
}
