"""ASGI entry point of the sample project (``daphne project.asgi:application``)."""

import gc
import logging
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

if getattr(settings, "A2A_OPEN", False):
    logging.getLogger("project").warning(
        "The A2A endpoint is open to anonymous callers (DJANGO_DEBUG is on): anyone who can "
        "reach this server can use it. With DJANGO_DEBUG=0 every call needs a token "
        "(manage.py drf_create_token <user>) or a signed-in session."
    )
