"""Settings of the authenticated-SDK integration server: closed, bearer tokens and JWTs.

``tests.settings`` with the database of the run (``A2A_IT_POSTGRES_URL``, created and dropped
by the harness), the embedded backend and bus, and the endpoint as a deployment closes it.
"""

import os

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from tests.settings import *  # noqa: F403
from tests.settings import A2A_ENDPOINT as BASE_A2A_ENDPOINT

try:
    DATABASES = {"default": dj_database_url.parse(os.environ["A2A_IT_POSTGRES_URL"])}
except KeyError:
    raise ImproperlyConfigured("Set A2A_IT_POSTGRES_URL for the auth integration server") from None

A2A_ENDPOINT = {
    **BASE_A2A_ENDPOINT,
    "AUTHENTICATION_CLASSES": [
        "a2a_endpoint.authentication.BearerTokenAuthentication",
        "rest_framework_simplejwt.authentication.JWTAuthentication",
    ],
    "PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "CALLER_RESOLVER": "a2a_endpoint.auth.resolve_caller",
    "EXTENDED_CARD": {"description": "The signed-in view of the test agent."},
}
SILENCED_SYSTEM_CHECKS: list[str] = []
