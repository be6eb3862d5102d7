"""Settings for the server processes of the integration tests: the embedded default on SQLite.

The test process starts daphne with these settings; server and tests share one SQLite file
named by ``A2A_IT_DB`` (migrated by the test harness before the server starts).
"""

import os

from django.core.exceptions import ImproperlyConfigured

from tests.settings import *  # noqa: F403
from tests.settings import A2A_ENDPOINT as BASE_A2A_ENDPOINT
from tests.settings import LOGGING as BASE_LOGGING

try:
    DATABASE_PATH = os.environ["A2A_IT_DB"]
except KeyError:
    raise ImproperlyConfigured("Set A2A_IT_DB to the SQLite file the server should use") from None

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": DATABASE_PATH,
        # Agent jobs write from worker threads while requests read: WAL lets readers go on,
        # IMMEDIATE takes the write lock up front (no deadlocked upgrades), and the timeout
        # makes a writer wait its turn instead of failing with "database is locked".
        "OPTIONS": {
            "timeout": 20,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL;",
        },
    }
}

ROOT_URLCONF = "tests.urls"
ASGI_APPLICATION = "tests.integration.asgi.application"

# The embedded default (what `make run` serves): inline backend and in-memory bus, spelled
# out so a change of the suite's defaults does not silently change what this exercises.
A2A_ENDPOINT = {
    **BASE_A2A_ENDPOINT,
    "AGENT": "tests.agents.ScriptedAgent",
    "EXECUTION_BACKEND": "inline",
    "EVENT_BUS": "memory",
}

# Server errors (500s, failed jobs) reach the process log the harness prints on failure.
LOGGING = {
    **BASE_LOGGING,
    "loggers": {
        **BASE_LOGGING["loggers"],
        "django": {"handlers": ["console"], "level": "WARNING"},
    },
}
