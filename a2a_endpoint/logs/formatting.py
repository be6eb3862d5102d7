"""Log records as text or JSON lines: the context filter, the formatter and a LOGGING dict."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

from a2a_endpoint.conf import app_settings
from a2a_endpoint.logs.context import FIELDS, VARS

FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class ContextFilter(logging.Filter):
    """Puts the context fields on every record (None when unset): name it on handlers.

    On a handler it sees every record the handler writes, whatever logger made it; a field
    the record has already (``extra=``) is kept. ``%(request_id)s`` in a project's own
    format string then always resolves.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        for name, var in VARS.items():
            if not hasattr(record, name):
                setattr(record, name, var.get())
        return True


_FILTER = ContextFilter()
# What every record has: the rest of its attributes came from ``extra=``.
_STANDARD = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "taskName"}


def _output() -> str:
    try:
        return str(app_settings.LOG_FORMAT)
    except Exception:  # settings not configured (a script): text, never a failed log call
        return "text"


class Formatter(logging.Formatter):
    """Text or JSON lines, as ``A2A_ENDPOINT["LOG_FORMAT"]`` says (read at each record).

    ``output="json"`` or ``"text"`` fixes it instead (``"()"`` in LOGGING passes it). Text
    lines end with the context fields set (``[request_id=… method=…]``), before a
    traceback; JSON lines are one object each: time, level, logger, message, the context
    fields, the record's ``extra`` and the traceback (``exception``) when there is one.
    """

    def __init__(
        self,
        fmt: str | None = None,
        datefmt: str | None = None,
        style: Any = "%",
        validate: bool = True,
        *,
        output: str | None = None,
    ) -> None:
        super().__init__(fmt or TEXT_FORMAT, datefmt, style, validate)
        self.output = output

    def format(self, record: logging.LogRecord) -> str:
        _FILTER.filter(record)  # the fields, also without the filter on the handler
        if (self.output or _output()) == "json":
            return self.format_json(record)
        line = super().format(record)
        fields = " ".join(
            f"{name}={value}" for name in FIELDS if (value := getattr(record, name)) is not None
        )
        if not fields:
            return line
        head, newline, rest = line.partition("\n")  # after the message, before a traceback
        return f"{head} [{fields}]{newline}{rest}"

    def format_json(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        # The context fields first, then the record's ``extra``: what a log stack indexes.
        for name in (*FIELDS, *record.__dict__):
            value = getattr(record, name)
            if name not in _STANDARD and value is not None:
                entry.setdefault(name, value)
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            entry["exception"] = record.exc_text
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        # ASCII only, newlines escaped: one line per record whatever a message holds.
        return json.dumps(entry, default=str, separators=(",", ":"))


def logging_config(output: str | None = None, level: str = "INFO") -> dict[str, Any]:
    """A ``LOGGING`` dict: every line through :class:`Formatter` and the context filter.

    ``output`` None: ``A2A_ENDPOINT["LOG_FORMAT"]`` decides. a2a_endpoint's and Django's
    loggers write at ``level``, everything else (the root) at WARNING, to stderr.
    """
    formatter: dict[str, Any] = {"()": "a2a_endpoint.logs.Formatter"}
    if output is not None:
        formatter["output"] = output
    handler = {"class": "logging.StreamHandler", "formatter": "a2a", "filters": ["a2a_context"]}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"a2a_context": {"()": "a2a_endpoint.logs.ContextFilter"}},
        "formatters": {"a2a": formatter},
        "handlers": {"a2a_console": handler},
        "root": {"handlers": ["a2a_console"], "level": "WARNING"},
        "loggers": {
            name: {"handlers": ["a2a_console"], "level": level, "propagate": False}
            for name in ("a2a_endpoint", "django")
        },
    }
