"""The sample project's admin: DRF's token admin, with keys kept out of the list page.

DRF's ``TokenAdmin`` lists every key in full, so anyone who glances at (or screenshots) the
list has every caller's credentials. Here the list shows the first characters only, enough
to tell tokens apart; the full key is on the token's own page, read-only, where a staff user
copies it to hand it out. Imported by ``project.urls`` (the project is not an app).
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from rest_framework.authtoken.admin import TokenAdmin
from rest_framework.authtoken.models import TokenProxy

SHOWN = 6


class MaskedTokenAdmin(TokenAdmin):
    list_display = ("masked_key", "user", "created")

    @admin.display(description="key")
    def masked_key(self, token: Any) -> str:
        return token.key[:SHOWN] + "…"

    def get_fields(self, request: Any, obj: Any = None) -> Any:
        return ("user", "key") if obj is not None else ("user",)

    def get_readonly_fields(self, request: Any, obj: Any = None) -> Any:
        return ("user", "key") if obj is not None else ()


admin.site.unregister(TokenProxy)
admin.site.register(TokenProxy, MaskedTokenAdmin)
