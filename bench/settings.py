"""Django settings of the bench servers: the sample project's, serving the bench echo agent.

``project.settings`` configured from the environment exactly as a deployment is (no
``DATABASE_URL``/``REDIS_URL``: the embedded SQLite + inline + memory bus default; both set:
PostgreSQL + Celery + the channels_redis bus). The project reads no agent from the environment,
so this module swaps in ``bench.agents.BenchAgent`` and puts this run's Redis keys under
``BENCH_REDIS_PREFIX`` (channel layer groups, Celery queues), so a bench never meets the
test suites sharing the same Redis.
"""

import os

from project.settings import *  # noqa: F403
from project.settings import A2A_ENDPOINT as PROJECT_A2A_ENDPOINT
from project.settings import CELERY_BROKER_TRANSPORT_OPTIONS as PROJECT_TRANSPORT_OPTIONS
from project.settings import LOGGING as PROJECT_LOGGING

REDIS_PREFIX = os.environ.get("BENCH_REDIS_PREFIX", "a2a-bench")

if os.environ.get("REDIS_URL"):
    from project.settings import CHANNEL_LAYERS as PROJECT_CHANNEL_LAYERS

    CHANNEL_LAYERS = {
        "default": {
            **PROJECT_CHANNEL_LAYERS["default"],
            "CONFIG": {
                **PROJECT_CHANNEL_LAYERS["default"]["CONFIG"],
                "prefix": f"{REDIS_PREFIX}.ch",
            },
        }
    }
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        **PROJECT_TRANSPORT_OPTIONS,
        "global_keyprefix": f"{REDIS_PREFIX}.celery:",
    }

A2A_ENDPOINT = {**PROJECT_A2A_ENDPOINT, "AGENT": "bench.agents.BenchAgent"}

# Warnings and errors only: an INFO line per request or job would be part of what is measured.
LOGGING = {
    **PROJECT_LOGGING,
    "loggers": {
        name: {**logger, "level": "WARNING"} for name, logger in PROJECT_LOGGING["loggers"].items()
    },
}

if os.environ.get("BENCH_TRACE"):  # python -m bench.trace: timed steps of each request
    from bench.tracing import connect

    connect(os.environ["BENCH_TRACE"])
