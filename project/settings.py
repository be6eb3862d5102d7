"""Settings of the sample project, read from the environment.

With no variable set it needs no service at all (``make run``): SQLite, the inline backend,
the in-memory bus and DEBUG on, which suit a laptop only. Production sets ``DATABASE_URL``
(PostgreSQL), ``REDIS_URL`` (channel layer and Celery broker), ``DJANGO_SECRET_KEY`` and
``DJANGO_DEBUG=0``: agent jobs then run on Celery workers and events cross processes through
Redis. Every variable is described in ``deploy/env.example`` and ``docs/deployment.md``.
"""

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dj_database_url
from corsheaders.defaults import default_headers
from django.core.exceptions import ImproperlyConfigured

from a2a_endpoint.cors import A2A_REQUEST_HEADERS, A2A_RESPONSE_HEADERS

BASE_DIR = Path(__file__).resolve().parent.parent


def _env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    return default if value is None else value.strip().lower() in {"1", "true", "yes", "on"}


def _env_list(name: str, default: list[str]) -> list[str]:
    value = os.environ.get(name)
    return default if value is None else [item.strip() for item in value.split(",") if item.strip()]


def _env_value(name: str, default: float, kind: Callable[[str], Any] = float) -> Any:
    value = os.environ.get(name)
    if value is None or not value.strip():
        return kind(str(default))
    try:
        return kind(value.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not a valid {kind.__name__}.") from None


DEBUG = _env_bool("DJANGO_DEBUG", True)
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("Set DJANGO_SECRET_KEY when DJANGO_DEBUG is off.")
    SECRET_KEY = "django-insecure-local-development-only"  # never used with DEBUG off
ALLOWED_HOSTS = _env_list("DJANGO_ALLOWED_HOSTS", ["127.0.0.1", "localhost"])
# Full origins ("https://agent.example.com"): the admin's login form posts across the proxy.
CSRF_TRUSTED_ORIGINS = _env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])

# Behind nginx (deploy/nginx.conf), which terminates TLS and always sets both headers, so a
# client cannot forge them. Daphne listens on loopback or unix sockets only. With these,
# request.is_secure() and build_absolute_uri() see the public https://host, not daphne's.
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
USE_X_FORWARDED_HOST = True
SESSION_COOKIE_SECURE = _env_bool("DJANGO_SECURE_COOKIES", not DEBUG)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
# nginx redirects HTTP to HTTPS and sends Strict-Transport-Security (deploy/nginx.conf). A
# Django redirect would also bounce the plain-HTTP health probes sent straight to daphne.
SILENCED_SYSTEM_CHECKS = ["security.W004", "security.W008"]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",  # API tokens: `manage.py drf_create_token <user>`, the admin
    "corsheaders",
    "a2a_endpoint",
]

# startproject's list. Under daphne, project/asgi.py's handler (a2a_endpoint.asgi) loads
# each as its drop-in from a2a_endpoint.middleware: the same class, called on the event loop
# unless a call may block, instead of through a worker thread for every call
# (docs/deployment.md, "Middleware under ASGI").
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # Before CommonMiddleware, which may answer first (django-cors-headers' README).
    "corsheaders.middleware.CorsMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "project.urls"
ASGI_APPLICATION = "project.asgi.application"
WSGI_APPLICATION = "project.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]


def _database() -> dict[str, Any]:
    """``DATABASE_URL`` (PostgreSQL in production), else the demo's SQLite file."""
    url = os.environ.get("DATABASE_URL", "")
    if not url:
        return {
            "ENGINE": "django.db.backends.sqlite3",
            # A2A_DEMO_DB points elsewhere (the end-to-end tests serve a fresh file per run).
            "NAME": os.environ.get("A2A_DEMO_DB") or BASE_DIR / "db.sqlite3",
            # Agent jobs write from worker threads while requests read and write: WAL lets
            # readers run beside the writer, IMMEDIATE takes the write lock when a transaction
            # starts (no failed lock upgrade midway), and the timeout makes writers queue.
            "OPTIONS": {
                "timeout": 20,
                "transaction_mode": "IMMEDIATE",
                "init_command": "PRAGMA journal_mode=WAL;",
            },
        }
    # The ASGI server closes its connections after each request and stream call (a pool,
    # below, takes them back): under ASGI, persistent connections are per thread and daphne
    # runs each request's ORM calls in threads of its own; with 60 s, 20 concurrent clients
    # left one daphne holding about 60 idle connections (PostgreSQL allows 100 by default),
    # and Django's docs say to disable them with ASGI. Every other process (Celery workers,
    # management commands) keeps its connections for DB_CONN_MAX_AGE seconds (default 300,
    # health-checked before reuse): a worker's threads are few and long-lived, and a new
    # PostgreSQL connection for each of a job's store calls was most of a short job's time.
    # See docs/deployment.md, "Database connections".
    in_server = os.environ.get("A2A_SERVER_PROCESS") == "asgi"
    config = dj_database_url.parse(
        url,
        conn_max_age=_env_value("DB_CONN_MAX_AGE", 0 if in_server else 300, int),
        conn_health_checks=True,
    )
    if config["ENGINE"] == "django.db.backends.postgresql":
        # libpq waits for an unreachable server forever by default: fail (and answer 503 on
        # /healthz) within seconds instead. A ?connect_timeout= in the URL wins.
        options = config.setdefault("OPTIONS", {})
        options.setdefault("connect_timeout", 5)
        # A per-process psycopg pool in the ASGI server: closing a connection (after each
        # request and stream call) returns it instead of ending a PostgreSQL backend.
        # Connecting was the top hot spot of the benchmark (bench/results). Not in Celery
        # workers: the prefork pool forks processes, and a pool must not cross a fork.
        # project/asgi.py marks the server process; DB_POOL_SIZE=0 turns the pool off.
        pool_size = _env_value("DB_POOL_SIZE", 10, int)
        if pool_size and in_server and not config.get("CONN_MAX_AGE"):
            options["pool"] = {"min_size": 2, "max_size": pool_size, "timeout": 10}
    return dict(config)


DATABASES = {"default": _database()}


def _gc_thresholds() -> tuple[int, ...] | None:
    """``SERVER_GC_THRESHOLDS``: the ASGI server's ``gc.set_threshold``; ``python``: Python's."""
    value = os.environ.get("SERVER_GC_THRESHOLDS", "").strip() or "20000,10,10"
    if value.lower() == "python":
        return None
    try:
        thresholds = tuple(int(part) for part in value.split(","))
    except ValueError:
        thresholds = ()
    if not 1 <= len(thresholds) <= 3 or min(thresholds) < 0:
        raise ImproperlyConfigured(
            f"SERVER_GC_THRESHOLDS={value!r} must be 1 to 3 non-negative integers "
            "(gc.set_threshold) or 'python'."
        )
    return thresholds


# Applied by project/asgi.py to the server process only (docs/deployment.md, "Garbage
# collection"): open SSE streams keep hundreds of thousands of objects alive there, and with
# Python's default thresholds (700, 10, 10) a full collection over all of them (about 200 ms
# with 1,000 streams on the benchmark machine) ran every few updates, stalling every stream.
SERVER_GC_THRESHOLDS = _gc_thresholds()

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True  # a2a_endpoint requires it (system check a2a_endpoint.E006)

STATIC_URL = "static/"
# collectstatic copies the admin's and the demo's files here; nginx serves them at /static/.
STATIC_ROOT = Path(os.environ.get("DJANGO_STATIC_ROOT") or BASE_DIR / "staticfiles")

# a2a_endpoint's formatter: text lines, or one JSON object a line when A2A_LOG_FORMAT=json
# (A2A_ENDPOINT["LOG_FORMAT"]); the filter adds the request's or job's id, method, task id
# and caller to every line of these loggers, Django's included (docs/logging.md).
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"context": {"()": "a2a_endpoint.logs.ContextFilter"}},
    "formatters": {"a2a": {"()": "a2a_endpoint.logs.Formatter"}},
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "a2a", "filters": ["context"]}
    },
    # propagate off: daphne also logs the root logger to the console (no doubled lines).
    "loggers": {
        "a2a_endpoint": {"handlers": ["console"], "level": "INFO", "propagate": False},
        "project": {"handlers": ["console"], "level": "INFO", "propagate": False},
        # Django's warnings and errors (a 500's traceback) in the same format.
        "django": {"handlers": ["console"], "level": "WARNING", "propagate": False},
        # httpx logs every request at INFO: a line per push delivery (the sender logs failures).
        "httpx": {"level": "WARNING"},
    },
}

# --- Redis: the channel layer (events across processes) and the Celery broker ----------------

_redis_url = os.environ.get("REDIS_URL", "")
if _redis_url:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {
                # channels_redis' receive() blocks in Redis for up to 5 s, and redis-py 8 reads
                # with a 5 s socket timeout by default: an idle receive would fail every 5 s
                # (channels_redis #422). Any socket timeout also makes redis-py wrap each
                # command in asyncio.wait_for, which on Python 3.11 can lose a cancellation
                # (a stream's reader then never stops): no socket timeout at all.
                "hosts": [{"address": _redis_url, "socket_timeout": None}],
            },
        }
    }
    CELERY_BROKER_URL = _redis_url

# Agent jobs are acknowledged when they end, not when they start, and a job whose worker
# process died is put back (a2a_endpoint's leases stop a second run of the same message).
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
# One job reserved per worker process: a long agent run must not hold others back.
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_TRANSPORT_OPTIONS = {
    # Redis has no real acknowledgements: a job taken by a worker is hidden for this many
    # seconds and redelivered if it is not acknowledged by then. A job lost with its worker
    # is caught much sooner by the lease sweeper (A2A_JOB_LEASE); a late redelivery of a job
    # that is running or done finds its message claimed and does nothing. Keep it above the
    # longest agent run (a redelivery of a running job is harmless but takes a worker slot).
    "visibility_timeout": _env_value("CELERY_VISIBILITY_TIMEOUT", 3600, int),
}
# Results go to the task store, not to Celery: no result backend is needed.
CELERY_TASK_IGNORE_RESULT = True
# Workers started before Redis keep retrying instead of exiting (explicit: Celery 6 stops
# deriving it from broker_connection_retry).
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True

# --- Callers: DRF authentication, CORS -----------------------------------------------------

REST_FRAMEWORK = {
    # API clients send `Authorization: Bearer <token>` (tokens from `drf_create_token` or the
    # admin); the demo page and the admin's browser use the Django session (with CSRF).
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "a2a_endpoint.authentication.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
}

# Browser clients on other origins (A2A_CORS_ALLOWED_ORIGINS="https://app.example.com,...").
# Only the A2A endpoint and the card answer cross-origin; see docs/security.md, "CORS".
CORS_ALLOWED_ORIGINS = _env_list("A2A_CORS_ALLOWED_ORIGINS", [])
CORS_URLS_REGEX = r"^/(a2a/?|\.well-known/agent-card\.json)$"
CORS_ALLOW_HEADERS = (*default_headers, *A2A_REQUEST_HEADERS)
CORS_EXPOSE_HEADERS = list(A2A_RESPONSE_HEADERS)

# The demo is open to anonymous callers while DEBUG is on (make run needs no login, and
# project/asgi.py logs that it is open); with DEBUG off every call needs a token or session.
# A2A_OPEN_ENDPOINT=1/0 decides explicitly (system check a2a_endpoint.W010 warns when an
# endpoint is open with DEBUG off).
A2A_OPEN = _env_bool("A2A_OPEN_ENDPOINT", DEBUG)

# --- A2A ---------------------------------------------------------------------------------


def _a2a_overrides() -> dict[str, Any]:
    """A2A_ENDPOINT keys set from the environment (the integration suite makes them short)."""
    table: dict[str, tuple[str, Callable[[str], Any]]] = {
        "A2A_BASE_URL": ("BASE_URL", str),
        "A2A_BLOCKING_TIMEOUT": ("BLOCKING_TIMEOUT", float),
        "A2A_CANCEL_GRACE_PERIOD": ("CANCEL_GRACE_PERIOD", float),
        "A2A_JOB_LEASE": ("JOB_LEASE", float),
        "A2A_JOB_HANDOFF_TIMEOUT": ("JOB_HANDOFF_TIMEOUT", float),
        "A2A_LOST_JOB_POLICY": ("LOST_JOB_POLICY", str),
        "A2A_LOST_JOB_MAX_RETRIES": ("LOST_JOB_MAX_RETRIES", int),
        "A2A_SSE_KEEPALIVE": ("SSE_KEEPALIVE", float),
        "A2A_PUSH_TIMEOUT": ("PUSH_TIMEOUT", float),
        "A2A_PUSH_CONNECT_TIMEOUT": ("PUSH_CONNECT_TIMEOUT", float),
        "A2A_PUSH_RETRY_DELAY": ("PUSH_RETRY_DELAY", float),
        "A2A_PUSH_MAX_ATTEMPTS": ("PUSH_MAX_ATTEMPTS", int),
        "A2A_PUSH_SWEEP_INTERVAL": ("PUSH_SWEEP_INTERVAL", float),
        "A2A_PUSH_CELERY_QUEUE": ("PUSH_CELERY_QUEUE", str),
        "A2A_METRICS_TOKEN": ("METRICS_TOKEN", str),
        "A2A_LOG_FORMAT": ("LOG_FORMAT", str),
        "A2A_RETENTION_DAYS": ("RETENTION", float),
        "A2A_RETENTION_BATCH_SIZE": ("RETENTION_BATCH_SIZE", int),
    }
    overrides = {
        key: _env_value(name, 0, kind)
        for name, (key, kind) in table.items()
        if os.environ.get(name, "").strip()
    }
    if "RETENTION" in overrides:  # one age, in days, for every terminal state
        overrides["RETENTION"] = {"*": overrides["RETENTION"]}
    if overrides.get("LOST_JOB_POLICY", "retry") not in {"retry", "fail"}:
        raise ImproperlyConfigured("A2A_LOST_JOB_POLICY must be 'retry' or 'fail'.")
    return overrides


A2A_ENDPOINT = {
    # A2A_AGENT: another AgentExecutor for the same project (tests, benchmarks).
    "AGENT": os.environ.get("A2A_AGENT") or "project.agents.DemoAgent",
    # The card's skills come from DemoAgent.skills (A2A §8).
    "CARD": {
        "name": "a2a-endpoint demo agent",
        "description": (
            "Demo agents served by the a2a_endpoint sample project: echo, a long job with "
            "progress, a multi-turn conversation and a failure. Pick one with "
            'message.metadata["skill"] or a leading /skill in the text.'
        ),
        "version": "0.1.0",
        # Placeholders: a real deployment names its own organization and documentation.
        "provider": {"organization": "Example Org", "url": "https://example.com"},
        "documentationUrl": "https://example.com/docs/a2a-endpoint",
    },
    # With Redis, jobs run on Celery workers and events reach every daphne through it; a
    # Celery backend without that bus is system check a2a_endpoint.E009.
    "EXECUTION_BACKEND": os.environ.get("A2A_EXECUTION_BACKEND")
    or ("celery" if _redis_url else "inline"),
    "EVENT_BUS": "channels" if _redis_url else "memory",
    "PERMISSION_CLASSES": [
        "rest_framework.permissions.AllowAny"
        if A2A_OPEN
        else "rest_framework.permissions.IsAuthenticated"
    ],
    # GetExtendedAgentCard: what signed-in callers see beyond the public card.
    # Push notifications: webhooks must be public https URLs, except while DEBUG is on, when
    # the demo webhook receiver (manage.py a2a_webhook_receiver, on http://127.0.0.1) can
    # be used. A2A_PUSH_ALLOW_HTTP / A2A_PUSH_ALLOW_PRIVATE_NETWORKS=1/0 decide explicitly
    # (the TCK's webhook is http on loopback too).
    "PUSH_ALLOW_HTTP": _env_bool("A2A_PUSH_ALLOW_HTTP", DEBUG),
    "PUSH_ALLOW_PRIVATE_NETWORKS": _env_bool("A2A_PUSH_ALLOW_PRIVATE_NETWORKS", DEBUG),
    "EXTENDED_CARD": {
        "description": (
            "Demo agents served by the a2a_endpoint sample project, as seen by a signed-in "
            "caller: the same skills, and the operator's contact."
        ),
        "provider": {"organization": "Example Org (signed-in view)", "url": "https://example.com"},
    },
    **_a2a_overrides(),
}
