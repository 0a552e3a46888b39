"""The web server's error pages: HTML for the console's paths, the tenant API's JSON shape for
the rest (controlplane/urls.py names these)."""

from django.shortcuts import render

from tenants.api.errors import not_found_view, server_error_view

CONSOLE = "/console/"


def not_found(request, exception=None):
    if request.path.startswith(CONSOLE):
        return _page(request, 404, "Not found", "There is nothing here in this organization.")
    return not_found_view(request, exception)


def permission_denied(request, exception=None):
    message = str(exception) if exception and str(exception) else "Your role does not allow this."
    return _page(request, 403, "Not allowed", message)


def server_error(request):
    if request.path.startswith(CONSOLE):
        return _page(request, 500, "Something failed", "The server failed; nothing was changed. Try again, or tell the platform's operator.")
    return server_error_view(request)


def _page(request, status: int, title: str, message: str):
    return render(request, "console/error.html", {"status": status, "title": title, "message": message}, status=status)
