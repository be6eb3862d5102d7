"""Settings for the test suite: PostgreSQL (the production database) and the test agents."""

import os

import dj_database_url

SECRET_KEY = "tests-only-not-secret"
DEBUG = False
USE_TZ = True
ALLOWED_HOSTS = ["*"]
ROOT_URLCONF = "tests.urls"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "rest_framework",
    "rest_framework.authtoken",
    "a2a_endpoint",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]

POSTGRES_URL = os.environ.get("A2A_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test")
DATABASES = {"default": dj_database_url.parse(POSTGRES_URL, conn_max_age=0)}

A2A_ENDPOINT = {
    "AGENT": "tests.agents.ScriptedAgent",
    "CARD": {
        "name": "Test agent",
        "description": "Agent used by the a2a_endpoint test suite.",
        "version": "0.0.1",
    },
    # Open to anonymous callers (who share one owner), as most tests call without
    # credentials; tests/auth runs the endpoint closed, with each kind of authentication.
    "PERMISSION_CLASSES": ["rest_framework.permissions.AllowAny"],
    "CALLER_RESOLVER": "tests.callers.any_tenant",
    "BLOCKING_TIMEOUT": 10,
    "CANCEL_GRACE_PERIOD": 0.5,
    # No periodic sweep for owed push deliveries (tests/push sweeps when it means to).
    "PUSH_SWEEP_INTERVAL": 0,
}

# simplejwt (tests/auth): a key of the length HMAC-SHA256 wants.
SIMPLE_JWT = {"SIGNING_KEY": "tests-only-jwt-signing-key-not-secret-0123456789"}

# The suite's endpoint is open on purpose (above).
SILENCED_SYSTEM_CHECKS = ["a2a_endpoint.W010"]

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"a2a_endpoint": {"handlers": ["console"], "level": "WARNING"}},
}
