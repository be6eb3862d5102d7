"""The ``A2A_ENDPOINT`` setting: defaults, lazy access, import strings, reset on change."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.utils.module_loading import import_string

SETTING_NAME = "A2A_ENDPOINT"

DEFAULTS: dict[str, Any] = {
    # Dotted path to the AgentExecutor subclass that does the work (system check E001).
    "AGENT": None,
    # The public agent card: name, description, version, provider, skills, modes, ... (A2A §8).
    "CARD": {},
    # Absolute base URL advertised in the card ("https://agent.example.com"); None = from request.
    "BASE_URL": None,
    # Execution backend: "inline" (in-process, default), "celery", or a dotted path.
    "EXECUTION_BACKEND": "inline",
    # Event bus carrying task updates: "memory" (one process), "channels", or a dotted path.
    "EVENT_BUS": "memory",
    # How long a blocking SendMessage waits for a terminal or interrupted state, in seconds.
    "BLOCKING_TIMEOUT": 30.0,
    # Serve SendStreamingMessage and SubscribeToTask over SSE (capabilities.streaming).
    "STREAMING": True,
    # Seconds between SSE keep-alive comments on an idle stream.
    "SSE_KEEPALIVE": 15.0,
    # Largest accepted request body, checked before parsing.
    "MAX_REQUEST_BYTES": 1_048_576,
    # Deepest accepted JSON nesting (objects and arrays).
    "MAX_JSON_DEPTH": 64,
    # Most requests in one JSON-RPC batch (a larger batch is one -32600).
    "MAX_BATCH_ITEMS": 50,
    # What one answer may grow to: a ListTasks page stops before it (returning fewer tasks),
    # and a batch whose answers passed it runs no more of its requests.
    "MAX_RESPONSE_BYTES": 8_388_608,
    # True: a request without A2A-Version is refused (-32009); False: PascalCase methods = 1.0.
    "STRICT_VERSION": False,
    # Extensions declared in the card: [{"uri": ..., "description": ..., "required": bool}].
    "EXTENSIONS": [],
    # DRF authentication classes (dotted paths or classes) run on every JSON-RPC request;
    # None: REST_FRAMEWORK["DEFAULT_AUTHENTICATION_CLASSES"]. The card declares them.
    "AUTHENTICATION_CLASSES": None,
    # DRF permission classes; closed by default: a project opens it explicitly (AllowAny).
    "PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # DRF throttle classes; None: REST_FRAMEWORK["DEFAULT_THROTTLE_CLASSES"]. Rates are
    # REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]; ScopedRateThrottle uses THROTTLE_SCOPE.
    "THROTTLE_CLASSES": None,
    "THROTTLE_SCOPE": "a2a",
    # Callable(request) -> a2a_endpoint.types.Caller, called with request.user and
    # request.auth set by the authentication classes; the default: the user, else anonymous.
    "CALLER_RESOLVER": "a2a_endpoint.auth.resolve_caller",
    # The extended agent card (GetExtendedAgentCard): a dict merged over the public card, or
    # a callable (or dotted path) taking the Caller and returning such a dict or None.
    "EXTENDED_CARD": None,
    # Seconds an agent that ignores cancellation keeps running before it is stopped.
    "CANCEL_GRACE_PERIOD": 5.0,
    # Celery backend: seconds a job's lease lasts; a running job renews it every third.
    "JOB_LEASE": 30.0,
    # A job lost with its worker (lease lapsed): "retry" it, or "fail" the task.
    "LOST_JOB_POLICY": "retry",
    # How many times a lost job is retried before the task fails.
    "LOST_JOB_MAX_RETRIES": 1,
    # Each Celery worker sweeps for lost jobs every JOB_LEASE / 2 seconds.
    "LOST_JOB_SWEEPER": True,
    # Seconds a stored message's job may go unclaimed before the sweeper hands it to the
    # backend again (the broker was down or lost it, or the process died before handing it).
    "JOB_HANDOFF_TIMEOUT": 30.0,
    # Celery queue for agent jobs (None: Celery's default queue).
    "CELERY_QUEUE": None,
    # Threads for synchronous agents in the inline backend.
    "INLINE_MAX_WORKERS": 8,
    # Cache-Control max-age of the public agent card, in seconds.
    "CARD_MAX_AGE": 300,
    # Push notifications (A2A §4.3, docs/push.md): the four config methods and webhook
    # deliveries (capabilities.pushNotifications). Off: the methods answer -32003.
    "PUSH_NOTIFICATIONS": True,
    # Webhook URLs may use http as well as https (development, a receiver behind a proxy).
    "PUSH_ALLOW_HTTP": False,
    # When not empty, the only host names (or literal addresses) webhooks may use.
    "PUSH_ALLOWED_HOSTS": [],
    # Allow loopback, private, link-local ... addresses (tests, the TCK, internal receivers).
    "PUSH_ALLOW_PRIVATE_NETWORKS": False,
    # Seconds to connect to a webhook, and for the whole POST (connecting to the answer's end).
    "PUSH_CONNECT_TIMEOUT": 10.0,
    "PUSH_TIMEOUT": 30.0,
    # A delivery is tried at most this many times, and for at most this many seconds after
    # its event, then dead-lettered (admin, manage.py a2a_push_retry).
    "PUSH_MAX_ATTEMPTS": 8,
    "PUSH_MAX_AGE": 86_400.0,
    # Exponential backoff between tries (with jitter): first delay, and the largest one.
    "PUSH_RETRY_DELAY": 1.0,
    "PUSH_RETRY_MAX_DELAY": 600.0,
    # Celery queue of push deliveries (None: CELERY_QUEUE's): workers of their own keep slow
    # webhooks from delaying agent jobs, and agent jobs from delaying deliveries.
    "PUSH_CELERY_QUEUE": None,
    # Inline backend: seconds between sweeps for deliveries whose sender was lost (a restart);
    # 0: no sweep. Celery workers sweep with their lost-job sweeper.
    "PUSH_SWEEP_INTERVAL": 30.0,
    # --- Retention (docs/retention.md): manage.py a2a_purge and its Celery beat entry.
    # State → the age past which its tasks are deleted, counted from the last status change:
    # {"completed": "30d", "failed": "90d", "*": "14d"}; "*" = every terminal state not
    # named; ages in days (a number) or "<n>d" / "<n>h" / "<n>m". {}: every task is kept.
    "RETENTION": {},
    # Tasks deleted per transaction (each batch's row locks last one short transaction).
    "RETENTION_BATCH_SIZE": 200,
    # Seconds the purge waits between two batches (room for other writers and replicas).
    "RETENTION_BATCH_PAUSE": 0.0,
    # --- Metrics (docs/metrics.md): Prometheus exposition.
    # Record the metrics (off: nothing is recorded, and the metrics view answers 404).
    "METRICS": True,
    # The bearer token a scraper sends to a2a_endpoint.metrics.views.metrics. None: only
    # staff users may read the metrics (and anyone while DEBUG is on).
    "METRICS_TOKEN": None,
    # --- Logs (docs/logging.md): structured log lines.
    # How a2a_endpoint.logs.Formatter writes lines: "text" or "json" (one object a line).
    "LOG_FORMAT": "text",
    # The header a request id is taken from (when sane) and echoed in; "": always a new id.
    "REQUEST_ID_HEADER": "X-Request-ID",
    # --- Health and guards (docs/deployment.md).
    # EVENT_BUS "memory": seconds between a web process's heartbeats in the database (taken
    # on requests), by which processes sharing the database notice each other; 0: off.
    "MEMORY_BUS_HEARTBEAT": 10.0,
}

IMPORT_STRINGS = frozenset({"AGENT", "CALLER_RESOLVER", "EXTENDED_CARD"})
REMOVED_SETTINGS: frozenset[str] = frozenset()


class AppSettings:
    """Read ``settings.A2A_ENDPOINT`` lazily, key by key, with defaults."""

    def __init__(self) -> None:
        self._cache: dict[str, Any] = {}

    @property
    def user_settings(self) -> dict[str, Any]:
        return getattr(settings, SETTING_NAME, {}) or {}

    def __getattr__(self, name: str) -> Any:
        if name not in DEFAULTS:
            raise AttributeError(f"Invalid {SETTING_NAME} setting: {name!r}")
        if name in self._cache:
            return self._cache[name]
        value = self.user_settings.get(name)
        if value is None:  # absent or None: the default
            value = DEFAULTS[name]
        if name in IMPORT_STRINGS and isinstance(value, str):
            value = import_string(value)
        self._cache[name] = value
        return value

    def reload(self) -> None:
        self._cache.clear()


app_settings = AppSettings()


def _reload(*, setting: str, **kwargs: Any) -> None:
    if setting == SETTING_NAME:
        app_settings.reload()


setting_changed.connect(_reload)
