"""GET /api/schema/, built and rendered once per process, format and language: anyone may ask
for it, and each build cost tens of milliseconds of CPU (docs/security.md, "Isolation of traffic and work")."""

from django.conf import settings
from django.http import HttpResponse
from drf_spectacular.utils import extend_schema
from drf_spectacular.views import SpectacularAPIView


class SchemaView(SpectacularAPIView):
    _rendered: dict[tuple, tuple[bytes, dict]] = {}  # the body and its headers

    @extend_schema(exclude=True)
    def get(self, request, *args, **kwargs):
        lang = request.GET.get("lang")
        # by the renderer, not the Accept header as sent: its parameters are the client's to vary
        key = request.accepted_renderer.format, lang if lang in dict(settings.LANGUAGES) else None
        if key not in self._rendered:
            response = super().get(request, *args, **kwargs)
            response.accepted_renderer, response.accepted_media_type = request.accepted_renderer, request.accepted_media_type
            response.renderer_context = self.get_renderer_context()
            content = response.rendered_content
            self._rendered[key] = content, dict(response.headers.items())
        content, headers = self._rendered[key]
        return HttpResponse(content, headers=headers)
