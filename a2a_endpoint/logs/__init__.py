"""Structured logs: the request's or job's context on every log record, as text or JSON.

The context (request id, JSON-RPC method, task id, caller, job id, attempt) lives in
``contextvars`` (``context``): the transport and the job runners set it,
:class:`ContextFilter` copies it onto every record a handler sees (Django's too), and
:class:`Formatter` writes a record as a text line or one JSON object, as
``A2A_ENDPOINT["LOG_FORMAT"]`` says (``formatting``). ``lines`` writes the access line of a
request and the start and finish lines of a job. Nothing here installs a handler: a project
names the filter and the formatter in ``LOGGING`` (:func:`logging_config`, docs/logging.md).
Every layer may import this package: it imports only ``a2a_endpoint.conf`` and the stdlib.
"""

from a2a_endpoint.logs.context import (
    FIELDS,
    call_fields,
    clean,
    current,
    error_id,
    incoming_request_id,
    job_context,
    new_id,
    scope,
    update,
)
from a2a_endpoint.logs.formatting import FORMATS, ContextFilter, Formatter, logging_config
from a2a_endpoint.logs.lines import (
    access_logged,
    jobs_logger,
    log_access,
    log_job_finish,
    log_job_start,
    log_response,
    logged_stream,
    outcome_of,
    requests_logger,
)

__all__ = [
    "FIELDS",
    "FORMATS",
    "ContextFilter",
    "Formatter",
    "access_logged",
    "call_fields",
    "clean",
    "current",
    "error_id",
    "incoming_request_id",
    "job_context",
    "jobs_logger",
    "log_access",
    "log_job_finish",
    "log_job_start",
    "log_response",
    "logged_stream",
    "logging_config",
    "new_id",
    "outcome_of",
    "requests_logger",
    "scope",
    "update",
]
