"""Django's ASGI application, with ``a2a_endpoint.middleware``'s drop-ins for its middleware.

``get_asgi_application()`` here is Django's, except that the handler loads the drop-in of
each of Django's stock middleware classes named in ``MIDDLEWARE`` (``DROP_INS``): the same
classes, whose ``process_*`` calls run on the event loop unless they may block, instead of
through a worker thread each. ``MIDDLEWARE`` keeps Django's dotted paths, so the checks that
look for them (``check --deploy``: security.W001-W003 and the settings they gate) still
work; other middleware is loaded as listed. See docs/deployment.md, "Middleware under ASGI".
"""

from __future__ import annotations

from typing import Any

import django
from django.core.handlers import asgi, base
from django.utils.module_loading import import_string

#: Django's dotted path → its drop-in in a2a_endpoint.middleware (imported when the handler
#: loads: this module is imported before Django is set up, that one needs the app registry).
DROP_INS = {
    path: f"a2a_endpoint.middleware.{path.rpartition('.')[2]}"
    for path in (
        "django.middleware.security.SecurityMiddleware",
        "django.contrib.sessions.middleware.SessionMiddleware",
        "django.middleware.common.CommonMiddleware",
        "django.middleware.csrf.CsrfViewMiddleware",
        "django.contrib.auth.middleware.AuthenticationMiddleware",
        "django.contrib.messages.middleware.MessageMiddleware",
        "django.middleware.clickjacking.XFrameOptionsMiddleware",
    )
}


class ASGIHandler(asgi.ASGIHandler):
    """Django's ASGI handler; Django's stock middleware classes load as their drop-ins."""

    def load_middleware(self, is_async: bool = False) -> None:
        # BaseHandler.load_middleware imports each MIDDLEWARE path with its module's
        # import_string: map the stock paths for this call only (it runs once, at start-up).
        def import_middleware(path: str) -> Any:
            return import_string(DROP_INS.get(path, path))

        original = base.import_string
        base.import_string = import_middleware
        try:
            super().load_middleware(is_async)
        finally:
            base.import_string = original


def get_asgi_application() -> ASGIHandler:
    """``django.core.asgi.get_asgi_application``, serving with the drop-ins."""
    django.setup(set_prefix=False)
    return ASGIHandler()
