"""URLs of the smoke test's project: the admin and a2a_endpoint's card and endpoint."""

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("", include("a2a_endpoint.urls")),
]
