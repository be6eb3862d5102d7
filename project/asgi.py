"""ASGI entry point of the sample project (``daphne project.asgi:application``)."""

import gc
import os

from django.conf import settings

# Django's get_asgi_application, whose handler loads a2a_endpoint.middleware's drop-ins for
# Django's stock middleware and lends each request a pooled thread (docs/deployment.md,
# "Middleware under ASGI").
from a2a_endpoint.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
# The settings give this process (not Celery's forked workers) a database connection pool.
os.environ["A2A_SERVER_PROCESS"] = "asgi"

application = get_asgi_application()

# Fewer, later garbage collections in this process; then what Django loaded at start-up
# (apps, models, admin) is frozen out of every later collection. See project/settings.py and
# docs/deployment.md, "Garbage collection".
thresholds = getattr(settings, "SERVER_GC_THRESHOLDS", None)  # None: Python's own
if thresholds is not None:
    gc.set_threshold(*thresholds)
gc.freeze()
