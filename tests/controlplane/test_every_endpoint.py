"""Every endpoint of the tenant API, every method Django dispatches to it (HEAD and OPTIONS
included): a viewer's key is refused exactly where the method needs more than a viewer, with a
404 where the URL names an object that is not theirs. The routes are read from the URL
configuration, so a new endpoint is covered without a new test."""

import re
import uuid

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from tenants.api.permissions import role_needed
from tenants.models import Role, role_at_least

_PLACEHOLDERS = {"int": "999999", "uuid": str(uuid.UUID(int=1)), "str": "nothing-here", "slug": "nothing-here"}


def _api_routes(resolver: URLResolver = None, prefix: str = ""):
    for pattern in (resolver or get_resolver()).url_patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            yield from _api_routes(pattern, route)
        elif isinstance(pattern, URLPattern) and route.startswith("api/v1/"):
            yield route, pattern.callback.cls


def _methods(view) -> list[str]:
    """What Django dispatches to the view: its handlers, and HEAD wherever there is a GET."""
    return [m.upper() for m in view.http_method_names if hasattr(view, "get" if m == "head" else m)]


ENDPOINTS = [(route, view, method) for route, view in _api_routes() for method in _methods(view)]


def test_the_enumeration_sees_the_whole_api():
    routes = {route for route, _, _ in ENDPOINTS}
    assert len(routes) >= 25 and "api/v1/export" in routes
    assert {method for _, _, method in ENDPOINTS} >= {"GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE"}


@pytest.mark.parametrize(("route", "view", "method"), ENDPOINTS, ids=[f"{m} {r}" for r, _, m in ENDPOINTS])
def test_a_viewer_is_refused_exactly_where_the_method_needs_more(viewer, route, view, method):
    url = "/" + re.sub(r"<(\w+):\w+>", lambda m: _PLACEHOLDERS[m.group(1)], route)
    response = viewer.generic(method, url, data="{}", content_type="application/json")
    if role_at_least(Role.VIEWER, role_needed(view, method)):
        assert response.status_code != 403, response.content
    elif "<" in route:  # an id that is not theirs: 404, as for everyone, not a 403 that says it exists
        assert response.status_code == 404, (response.status_code, response.content[:200])
    else:
        assert response.status_code == 403, (response.status_code, response.content[:200])


def test_head_needs_what_get_needs_on_every_endpoint():
    for _, view, method in ENDPOINTS:
        if method == "HEAD":
            assert role_needed(view, "HEAD") == role_needed(view, "GET")
