"""What decoding params costs, per call: ``python -m bench.decode [--number N] [--repeat R]``.

Times ``rpc.decode_params`` on a typical SendMessage and GetTask params dict, each under its
JSON names (camelCase, what clients send) and under its proto names (snake_case), beside
plain ``msgspec.convert(params, type, strict=False)`` (what decoding was before proto names
were accepted; under them it drops what it does not know, or refuses a REQUIRED field),
``protojson.normalize`` alone, and ``decode_params`` with ``normalize`` replaced by the
identity (the same call without the rename step). Each figure is the median, in µs per call,
of ``--repeat`` timeit runs of ``--number`` calls; a case's four variants take turns run by
run, so a slower spell of the shared machine hits them all. In-process, no database (params
are only decoded); run it pinned to one core (``taskset -c 0``) to compare two trees.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import timeit
from collections.abc import Callable
from functools import partial

import msgspec

from a2a_endpoint.errors import InvalidParamsError

SEND_MESSAGE = {
    "message": {
        "messageId": "5b8c8d1e-4c1f-4a57-9a39-0a5f3f1f6a10",
        "contextId": "c7d1e0f2-0b57-4a8b-8d0e-5a2d9c1e3b44",
        "role": "ROLE_USER",
        "parts": [{"text": "What is the weather in Paris tomorrow?", "mediaType": "text/plain"}],
        "metadata": {"client_version": "1.4.2", "trace_id": "4bf92f3577b34da6"},
    },
    "configuration": {
        "acceptedOutputModes": ["text/plain", "application/json"],
        "historyLength": 2,
        "returnImmediately": True,
    },
}
SEND_MESSAGE_SNAKE = {
    "message": {
        "message_id": "5b8c8d1e-4c1f-4a57-9a39-0a5f3f1f6a10",
        "context_id": "c7d1e0f2-0b57-4a8b-8d0e-5a2d9c1e3b44",
        "role": "ROLE_USER",
        "parts": [{"text": "What is the weather in Paris tomorrow?", "media_type": "text/plain"}],
        "metadata": {"client_version": "1.4.2", "trace_id": "4bf92f3577b34da6"},
    },
    "configuration": {
        "accepted_output_modes": ["text/plain", "application/json"],
        "history_length": 2,
        "return_immediately": True,
    },
}
GET_TASK = {"id": "0f0c5a7e-8f0e-4c43-b0c7-3a1f5e9b2d61", "historyLength": 1}
GET_TASK_SNAKE = {"id": "0f0c5a7e-8f0e-4c43-b0c7-3a1f5e9b2d61", "history_length": 1}


def _configure() -> None:
    """bench.settings on the embedded default; nothing here touches its database."""
    for name in ("DATABASE_URL", "REDIS_URL", "A2A_EXECUTION_BACKEND"):
        os.environ.pop(name, None)
    os.environ.update(
        DJANGO_SETTINGS_MODULE="bench.settings",
        A2A_DEMO_DB=os.path.join(tempfile.gettempdir(), "a2a-bench-decode.sqlite3"),
        DJANGO_DEBUG="0",
        DJANGO_SECRET_KEY="bench-decode-only",
        DJANGO_ALLOWED_HOSTS="testserver",
    )


#: Times ``number`` calls of something: seconds.
Run = Callable[[int], float]


def run(call: Callable[[], object]) -> Run:
    return lambda number: timeit.timeit(call, number=number)


def interleaved(runs: list[Run], number: int, repeat: int) -> list[float | None]:
    """Median µs per call of each of ``runs``, over ``repeat`` rounds of one timeit run of
    ``number`` calls each, in turn; None for one that refuses its params."""
    spent: list[list[float] | None] = []
    for each in runs:
        try:
            each(1)
        except (msgspec.ValidationError, InvalidParamsError):
            spent.append(None)
        else:
            spent.append([])
    for _ in range(repeat):
        for each, times in zip(runs, spent, strict=True):
            if times is not None:
                times.append(each(number) / number * 1e6)
    return [None if times is None else statistics.median(times) for times in spent]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.decode", description=__doc__)
    parser.add_argument("--number", type=int, default=20_000, help="calls per timeit run")
    parser.add_argument("--repeat", type=int, default=7, help="timeit runs (median reported)")
    args = parser.parse_args(argv)
    _configure()
    import django

    django.setup()
    from a2a_endpoint import protojson, rpc, types

    normalize = protojson.normalize

    def without_rename(call: Callable[[], object]) -> Run:
        """``call`` with ``decode_params`` as it was before proto names: no ``normalize``."""

        def unrenamed(number: int) -> float:
            protojson.normalize = lambda params, params_type: params
            try:
                return timeit.timeit(call, number=number)
            finally:
                protojson.normalize = normalize

        return unrenamed

    cases = [
        ("SendMessage camelCase", SEND_MESSAGE, SEND_MESSAGE, types.SendMessageRequest),
        ("SendMessage snake_case", SEND_MESSAGE_SNAKE, SEND_MESSAGE, types.SendMessageRequest),
        ("GetTask camelCase", GET_TASK, GET_TASK, types.GetTaskRequest),
        ("GetTask snake_case", GET_TASK_SNAKE, GET_TASK, types.GetTaskRequest),
    ]
    columns = ("msgspec.convert", "normalize", "decode_params", "without rename")
    print(f"µs per call, median of {args.repeat} x {args.number:,} calls")
    print(f"{'':24}" + "".join(f"{column:>17}" for column in columns))
    for name, params, camel, params_type in cases:
        # Also builds the per-type plans before anything is timed.
        assert rpc.decode_params(params, params_type) == rpc.decode_params(camel, params_type)
        decode = partial(rpc.decode_params, params, params_type)
        runs = [
            run(partial(msgspec.convert, params, params_type, strict=False)),
            run(partial(normalize, params, params_type)),
            run(decode),
            without_rename(decode),
        ]
        cells = (
            "refused" if figure is None else f"{figure:.2f}"
            for figure in interleaved(runs, args.number, args.repeat)
        )
        print(f"{name:24}" + "".join(f"{cell:>17}" for cell in cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
