"""ASGI entry point of the sample project (``daphne project.asgi:application``)."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
# The settings give this process (not Celery's forked workers) a database connection pool.
os.environ["A2A_SERVER_PROCESS"] = "asgi"

application = get_asgi_application()
