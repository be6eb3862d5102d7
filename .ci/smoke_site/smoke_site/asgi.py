"""ASGI entry point of the smoke test's project (daphne smoke_site.asgi:application)."""

import os

from a2a_endpoint.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "smoke_site.settings")

application = get_asgi_application()
