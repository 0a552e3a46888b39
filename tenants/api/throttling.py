"""DRF's throttles for the tenant API, on the counts of tenants.api.windows: past a limit, 429
with Retry-After. A key's request that the ASGI layer admitted before reading its body
(tenants.api.admission) is not counted again; a session's, a body of no declared length, and
any request outside the ASGI server (the tests' clients) are counted here."""

from rest_framework.throttling import BaseThrottle

from tenants.api.admitted import admission_of
from tenants.api.windows import api_admit, export_admit


class OrganizationRateThrottle(BaseThrottle):
    def allow_request(self, request, view) -> bool:
        principal = request.auth
        if principal is None:  # refused by authentication before any count
            return True
        admitted = admission_of(request._request)
        counted = admitted is not None and admitted.counted_for(principal)
        if not getattr(view, "body_bytes_counted", True):  # a view whose bodies have a limit of their own
            body_bytes = 0
        else:
            body_bytes = 0 if counted and admitted.bytes_counted else _body_size(request)
        refusal = api_admit(principal.org.pk, requests=0 if counted else 1, body_bytes=body_bytes)
        if refusal is not None:
            raise refusal
        return True


class OrganizationExportThrottle(BaseThrottle):
    """Exports an hour per organization: each one decrypts everything the organization holds, so
    a loop of them would take a web server's CPU at the cost of one request each."""

    def allow_request(self, request, view) -> bool:
        if request.method not in ("GET", "HEAD"):  # refused with a 405 after the throttles: no export
            return True
        refusal = export_admit(request.auth.org.pk)
        if refusal is not None:
            raise refusal
        return True


def _body_size(request) -> int:
    """The declared length (the server holds a body to it), else the body read (kept for the
    parser): a Transfer-Encoding frames the body whatever the length says."""
    declared = request.META.get("CONTENT_LENGTH", "")
    if declared.isdigit() and "HTTP_TRANSFER_ENCODING" not in request.META:
        return int(declared)
    return len(request._request.body) if request.method in ("POST", "PUT", "PATCH") else 0
