"""URLs of the sample project: the demo page, the admin, the health check and the A2A endpoint."""

from django.contrib import admin
from django.contrib.staticfiles.urls import staticfiles_urlpatterns
from django.urls import include, path

from a2a_endpoint.health import healthz
from a2a_endpoint.metrics.views import metrics
from project import admin as project_admin  # noqa: F401  (registers the masked token admin)
from project.views import DemoPageView

urlpatterns = [
    path("", DemoPageView.as_view(), name="demo"),
    path("admin/", admin.site.urls),
    path("healthz", healthz, name="healthz"),
    # Prometheus: A2A_METRICS_TOKEN for the scraper, or a staff session (docs/metrics.md).
    path("metrics", metrics, name="metrics"),
    path("", include("a2a_endpoint.urls")),
]

# Daphne does not serve static files: in DEBUG, Django serves the admin's CSS and JS itself
# (staticfiles_urlpatterns is empty otherwise; use collectstatic and nginx in production).
urlpatterns += staticfiles_urlpatterns()
