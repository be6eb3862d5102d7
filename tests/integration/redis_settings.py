"""Settings for streaming integration servers: PostgreSQL, channels_redis bus, inline backend.

Production-like: every daphne started with these settings shares one PostgreSQL database
(``A2A_IT_POSTGRES_URL``, created and dropped by the test harness) and one Redis
(``A2A_TEST_REDIS_URL``) under a key prefix unique to the test run (``A2A_IT_REDIS_PREFIX``),
so several processes can serve the same tasks and the tests can inspect the Redis groups.
Built on ``tests.settings`` rather than ``tests.integration.settings``, which insists on a
SQLite file (``A2A_IT_DB``) this server does not use.
"""

import os

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from tests.settings import *  # noqa: F403
from tests.settings import A2A_ENDPOINT as BASE_A2A_ENDPOINT
from tests.settings import LOGGING as BASE_LOGGING

try:
    POSTGRES_URL = os.environ["A2A_IT_POSTGRES_URL"]
    REDIS_PREFIX = os.environ["A2A_IT_REDIS_PREFIX"]
except KeyError as missing:
    raise ImproperlyConfigured(f"Set {missing} for the streaming integration server") from None

REDIS_URL = os.environ.get("A2A_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")

# conn_max_age=0: every request and every stream DB call gives its connection back at once,
# so hundreds of open streams do not hold hundreds of PostgreSQL connections.
DATABASES = {"default": dj_database_url.parse(POSTGRES_URL, conn_max_age=0)}

ROOT_URLCONF = "tests.urls"
ASGI_APPLICATION = "tests.integration.asgi.application"

CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {
            # redis-py 8 defaults to a 5 s socket timeout; channels_redis needs none (the
            # redis-py 7 default): (1) its receive() blocks in a 5 s BZPOPMIN, which the read
            # timeout cuts off every 5 s (channels_redis issue #422); (2) with a timeout set,
            # redis-py sends each command under asyncio.wait_for, which on Python 3.11 can
            # swallow the cancellation of the task sending it, so a channel layer reader that
            # is told to stop may go on receiving forever.
            "hosts": [{"address": REDIS_URL, "socket_timeout": None}],
            "prefix": REDIS_PREFIX,
        },
    }
}

A2A_ENDPOINT = {
    **BASE_A2A_ENDPOINT,
    "AGENT": "tests.agents.ScriptedAgent",
    "EXECUTION_BACKEND": "inline",
    "EVENT_BUS": "channels",
    # Longer than any test waits: streams must get their events through Redis. With the
    # default 15 s, a bus that delivered nothing would only make the tests slow (an idle
    # stream reads the missed events from the log at each keep-alive), not fail them.
    "SSE_KEEPALIVE": 300,
}

# Server errors (500s, failed jobs, channel layer trouble) reach the log the harness prints.
LOGGING = {
    **BASE_LOGGING,
    "loggers": {
        **BASE_LOGGING["loggers"],
        "django": {"handlers": ["console"], "level": "WARNING"},
    },
}
