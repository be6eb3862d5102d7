"""The sample project's ASGI entry point with Django's own handler (``ceiling-django-stock``).

``project.asgi`` serves through ``a2a_endpoint.asgi``, whose handler loads
``a2a_endpoint.middleware``'s drop-ins for Django's stock middleware classes and lends each
request a pooled thread. This module sets the process up the same way (environment, garbage
collection) but serves with ``django.core.asgi.get_asgi_application``: Django's classes as
listed and a new thread per request, so one run shows what that handler saves on the same
constant view.
"""

from django.core.asgi import get_asgi_application

import project.asgi  # noqa: F401  (the server process's environment and GC settings)

application = get_asgi_application()
