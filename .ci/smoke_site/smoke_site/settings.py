"""Settings of the smoke test's project: the README's quickstart on SQLite.

SMOKE_STACK picks the optional parts: "" (the defaults: inline jobs, in-memory bus),
"channels" (the Channels event bus on an in-memory layer, for one daphne) or "celery" (the
Celery backend with a Redis channel layer: only checked, never connected to).
"""

import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
SMOKE_STACK = os.environ.get("SMOKE_STACK", "")

SECRET_KEY = "package-smoke-test-only"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
USE_TZ = True

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "a2a_endpoint",
]
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
ROOT_URLCONF = "smoke_site.urls"
ASGI_APPLICATION = "smoke_site.asgi.application"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
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
DATABASES = {
    "default": {"ENGINE": "django.db.backends.sqlite3", "NAME": BASE_DIR / "db.sqlite3"},
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
STATIC_URL = "static/"

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["a2a_endpoint.authentication.BearerTokenAuthentication"],
}
A2A_ENDPOINT = {
    "AGENT": "smoke_site.agents.EchoAgent",
    "CARD": {"name": "Smoke", "description": "Echoes your text."},
}

if SMOKE_STACK == "channels":
    A2A_ENDPOINT["EVENT_BUS"] = "channels"
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
elif SMOKE_STACK == "celery":
    A2A_ENDPOINT["EVENT_BUS"] = "channels"
    A2A_ENDPOINT["EXECUTION_BACKEND"] = "celery"
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": ["redis://127.0.0.1:6379/0"]},
        }
    }
