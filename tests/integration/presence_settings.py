"""The sample project (no services: SQLite, inline backend, in-memory bus) with a short
memory-bus heartbeat, for the daphnes of tests/test_guards.py that share one SQLite file."""

from project.settings import *  # noqa: F403
from project.settings import A2A_ENDPOINT as PROJECT_A2A_ENDPOINT

# Processes notice each other within a second (production: 10 s).
A2A_ENDPOINT = {**PROJECT_A2A_ENDPOINT, "MEMORY_BUS_HEARTBEAT": 1.0}
