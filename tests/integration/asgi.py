"""ASGI application the integration tests serve with daphne."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.integration.settings")

application = get_asgi_application()
