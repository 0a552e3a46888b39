"""The Content-Security-Policy header (Django 5.2 has none of its own): on every response that
does not set one, settings.CONTENT_SECURITY_POLICY. The console's pages run only the vendored
scripts they name, so an injected `<script>` or inline handler does nothing."""

from django.conf import settings


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response
        self.policy = settings.CONTENT_SECURITY_POLICY

    def __call__(self, request):
        response = self.get_response(request)
        response.headers.setdefault("Content-Security-Policy", self.policy)
        return response
