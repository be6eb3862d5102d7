"""An execution backend for one fault: the web process dies after the commit of a message and
before it hands the message's job to the broker, as it would on a host losing power."""

from __future__ import annotations

import os
import signal

from a2a_endpoint.execution.celery_backend import CeleryBackend


class DiesBeforeTheHandOff(CeleryBackend):
    """``submit`` is called after the commit (``transaction.on_commit``): die there."""

    def submit(self, task_id: str) -> None:
        os.kill(os.getpid(), signal.SIGKILL)
