from django.http import JsonResponse
from django.urls import include, path

from controlplane.schema import SchemaView


def healthz(request):
    """For load balancers and `manage.py up`: the web server answers (no auth, no database)."""
    return JsonResponse({"status": "ok"})


urlpatterns = [
    path("healthz", healthz),
    path("api/schema/", SchemaView.as_view(), name="schema"),
    path("api/v1/", include("tenants.api.urls")),
    path("api/v1/", include("serving.api.urls")),
    path("api/v1/", include("training.api.urls")),
    path("console/", include("console.urls")),
]

handler403 = "console.views.errors.permission_denied"
handler404 = "console.views.errors.not_found"
handler500 = "console.views.errors.server_error"
