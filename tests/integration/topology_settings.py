"""Settings of the production-topology suite: the sample project's, serving the test agent.

``project.settings`` configured as a deployment configures it, from the environment
(``DATABASE_URL``, ``REDIS_URL``, ``A2A_JOB_LEASE`` ...: see deploy/env.example), changed only
where a test run must: the scripted test agent instead of the demo agents (the project reads
no agent from the environment); agent jobs on a named Celery queue (``CELERY_QUEUE``, which
the workers consume with ``-Q``); every Redis key under a prefix of the run
(``A2A_IT_REDIS_PREFIX``: the channel layer's groups, Celery's queues, unacknowledged jobs and
control channels), so runs sharing one Redis never see each other's events or jobs; and
Django's errors in the process logs.
"""

import os

from django.core.exceptions import ImproperlyConfigured

for _name in ("DATABASE_URL", "REDIS_URL", "A2A_IT_REDIS_PREFIX"):
    if not os.environ.get(_name):
        raise ImproperlyConfigured(f"Set {_name} for the topology test servers")
REDIS_PREFIX = os.environ["A2A_IT_REDIS_PREFIX"]

from project.settings import *  # noqa: E402, F403
from project.settings import A2A_ENDPOINT as PROJECT_A2A_ENDPOINT  # noqa: E402
from project.settings import (  # noqa: E402
    CELERY_BROKER_TRANSPORT_OPTIONS as PROJECT_TRANSPORT_OPTIONS,
)
from project.settings import CHANNEL_LAYERS as PROJECT_CHANNEL_LAYERS  # noqa: E402
from project.settings import LOGGING as PROJECT_LOGGING  # noqa: E402

#: The Celery queue of agent jobs (the harness starts the workers with ``-Q`` on it).
JOB_QUEUE = os.environ.get("A2A_IT_CELERY_QUEUE") or "a2a-agent-jobs"

CHANNEL_LAYERS = {
    "default": {
        **PROJECT_CHANNEL_LAYERS["default"],
        "CONFIG": {**PROJECT_CHANNEL_LAYERS["default"]["CONFIG"], "prefix": f"{REDIS_PREFIX}.ch"},
    }
}

# kombu prefixes every key and pub/sub channel with it (queues, unacked jobs, the broadcast
# of revoke commands): the workers of this run are alone on their Redis.
CELERY_BROKER_TRANSPORT_OPTIONS = {
    **PROJECT_TRANSPORT_OPTIONS,
    "global_keyprefix": f"{REDIS_PREFIX}.celery:",
}

A2A_ENDPOINT = {
    **PROJECT_A2A_ENDPOINT,
    "AGENT": "tests.agents.ScriptedAgent",
    "CELERY_QUEUE": JOB_QUEUE,
}

# Open on purpose (topology.py sets A2A_OPEN_ENDPOINT=1).
SILENCED_SYSTEM_CHECKS = [*SILENCED_SYSTEM_CHECKS, "a2a_endpoint.W010"]  # noqa: F405

# Server errors (500s) reach the process logs the harness prints when a test fails.
LOGGING = {
    **PROJECT_LOGGING,
    "loggers": {
        **PROJECT_LOGGING["loggers"],
        "django": {"handlers": ["console"], "level": "WARNING", "propagate": False},
    },
}
