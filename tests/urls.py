from django.contrib import admin
from django.urls import include, path

from a2a_endpoint.metrics.views import metrics

urlpatterns = [
    path("admin/", admin.site.urls),
    path("metrics", metrics, name="metrics"),
    path("", include("a2a_endpoint.urls")),
]
