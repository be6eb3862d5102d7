"""The sample project's demo page at ``/``: a browser client of the public A2A endpoint."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.urls import reverse
from django.views.generic import TemplateView


class DemoPageView(TemplateView):
    """Serves ``templates/demo.html``, a dependency-free page that talks A2A like any client.

    The page reads the agent card and then calls only the JSON-RPC endpoint the card names
    (A2A §8: ``supportedInterfaces``): no private API, nothing rendered server-side but the
    card's address and the name of the CSRF cookie, whose value the page sends with each
    call so that a person signed in to the admin can use the page with their session.
    """

    template_name = "demo.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context["agent_card_url"] = reverse("a2a_endpoint:agent-card")
        context["csrf_cookie_name"] = settings.CSRF_COOKIE_NAME
        return context
