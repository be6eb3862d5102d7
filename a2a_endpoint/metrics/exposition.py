"""The exposition: every metric of this process, or of every process sharing the multiprocess
directory, in the text format the scraper asks for."""

from __future__ import annotations

import contextlib
import glob
import os
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.exposition import choose_encoder
from prometheus_client.multiprocess import MultiProcessCollector

from a2a_endpoint.metrics.multiprocess import directory

#: A metrics file starts with the size it uses (4 bytes, padded to 8).
_HEADER_BYTES = 8


class _Collector(MultiProcessCollector):
    """prometheus_client's collector of the multiprocess files, skipping a file that is still
    empty: a process creates its file before it sizes it, and reading it in between failed
    the whole scrape; a process killed in between left it so for good
    (prometheus/client_python#1199). An empty file holds no value yet."""

    def __init__(self, registry: CollectorRegistry, path: str) -> None:
        super().__init__(registry, path=path)
        self.directory = path

    def collect(self) -> Any:
        files = []
        for path in glob.glob(os.path.join(self.directory, "*.db")):
            # Gone since the glob: a dead process's live gauges (its other files stay).
            with contextlib.suppress(FileNotFoundError):
                if os.path.getsize(path) >= _HEADER_BYTES:
                    files.append(path)
        return self.merge(files, accumulate=True)


def render(accept: str | None = None) -> tuple[bytes, str]:
    """The exposition body and its content type (Prometheus text, or OpenMetrics when the
    ``Accept`` header asks for it).

    Single process: the default registry (the app's metrics, the process collectors and any
    the project registered there). Multiprocess: the sum of the files of every process,
    read afresh, as prometheus_client's documentation prescribes (a new registry per scrape).
    """
    encode, content_type = choose_encoder(accept or "")
    path = directory()
    if path is None:
        return encode(REGISTRY), content_type
    registry = CollectorRegistry()
    _Collector(registry, path)
    return encode(registry), content_type
