"""py-spy profiles of a server under load, summarised as named hot spots.

``py-spy record --format speedscope`` samples the server's Python stacks (idle threads are
left out, so the samples are where the CPU went); the summary lists the functions with the
most samples on top of the stack (self) and the a2a_endpoint functions that most samples
pass through (inclusive).
"""

from __future__ import annotations

import collections
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

PY_SPY = Path(sys.executable).with_name("py-spy")
RATE = 250  # samples a second


def start_recording(
    pid: int, seconds: float, output: Path, subprocesses: bool = False
) -> subprocess.Popen:
    command = [
        str(PY_SPY),
        "record",
        "--pid",
        str(pid),
        "--duration",
        str(max(1, round(seconds))),
        "--rate",
        str(RATE),
        "--format",
        "speedscope",
        "--output",
        str(output),
        "--nonblocking",  # do not pause the server per sample: its speed stays representative
    ]
    if subprocesses:
        command.append("--subprocesses")
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _ours(frame: dict[str, Any]) -> bool:
    return "a2a_endpoint/" in frame.get("file", "")


def _name(frame: dict[str, Any], line: bool = True) -> str:
    file = frame.get("file", "")
    for marker in ("site-packages/", "lib/python3.11/", "/work/main/"):
        if marker in file:
            file = file.split(marker, 1)[1]
            break
    where = f"{file}:{frame.get('line', 0)}" if line else file
    return f"{frame.get('name', '?')} ({where})"


#: Frames where a thread sleeps (py-spy's idle detection misses some with --nonblocking):
#: left out of the CPU shares. psycopg's wait is reported apart: time waiting for PostgreSQL.
IDLE = (
    ("_worker", "concurrent/futures/thread.py"),
    ("select", "selectors.py"),
    ("wait", "threading.py"),
    ("poll", "kombu/utils/eventio.py"),
    ("_poll", "kombu/"),
)
DB_WAIT = ("wait", "psycopg/connection.py")


def _is(frame: dict[str, Any], spot: tuple[str, str]) -> bool:
    return frame.get("name", "").endswith(spot[0]) and spot[1] in frame.get("file", "")


def hot_spots(path: Path, top: int = 12) -> dict[str, Any]:
    """Self and inclusive shares of the busy samples at ``path`` (all processes merged)."""
    data = json.loads(path.read_text())
    frames = data["shared"]["frames"]
    own: collections.Counter[int] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()  # per function, any line
    total = db_wait = 0.0
    for profile in data["profiles"]:
        weights = profile.get("weights") or [1] * len(profile["samples"])
        for stack, weight in zip(profile["samples"], weights, strict=True):
            if not stack or any(_is(frames[stack[-1]], spot) for spot in IDLE):
                continue
            total += weight
            if _is(frames[stack[-1]], DB_WAIT):
                db_wait += weight
            own[stack[-1]] += weight
            for function in {_name(frames[i], line=False) for i in stack if _ours(frames[i])}:
                inclusive[function] += weight

    def rows(counter: collections.Counter[int], keep: Any) -> list[tuple[str, float]]:
        picked = [(i, n) for i, n in counter.most_common() if keep(frames[i])]
        return [(_name(frames[i]), 100 * n / max(total, 1e-9)) for i, n in picked[:top]]

    return {
        "seconds": total,
        "db_wait_share": 100 * db_wait / max(total, 1e-9),
        "self": rows(own, lambda frame: True),
        # Where in a2a_endpoint the busy samples are (each function with everything it calls).
        "inclusive": [
            (function, 100 * n / max(total, 1e-9)) for function, n in inclusive.most_common(top)
        ],
    }
