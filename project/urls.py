"""URLs of the sample project: the admin and the A2A endpoint (card and JSON-RPC)."""

from django.contrib import admin
from django.contrib.staticfiles.urls import staticfiles_urlpatterns
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("", include("a2a_endpoint.urls")),
]

# Daphne does not serve static files: in DEBUG, Django serves the admin's CSS and JS itself
# (staticfiles_urlpatterns is empty otherwise; use collectstatic and nginx in production).
urlpatterns += staticfiles_urlpatterns()
