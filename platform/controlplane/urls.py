from django.http import JsonResponse
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView


def healthz(request):
    """For load balancers and `manage.py up`: the web server answers (no auth, no database)."""
    return JsonResponse({"status": "ok"})


urlpatterns = [
    path("healthz", healthz),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/v1/", include("tenants.api.urls")),
    path("api/v1/", include("serving.api.urls")),
    path("api/v1/", include("training.api.urls")),
]

handler404 = "tenants.api.errors.not_found_view"
handler500 = "tenants.api.errors.server_error_view"
