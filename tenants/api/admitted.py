"""What the tenant API's ASGI layer found of a request before its body was read
(tenants.api.admission), as DRF's authentication and throttle read it from the request."""

from dataclasses import dataclass

from tenants.organizations import Principal

SCOPE_KEY = "tenant_api.admitted"  # an extension key of the ASGI scope: the server's, no client can set it


@dataclass(frozen=True)
class Admitted:
    raw_key: str
    principal: Principal | None  # None: no live key of that value
    fresh: bool  # looked up for this very request; else remembered from an earlier one, not to be trusted
    bytes_counted: bool  # the body declared its length, and it was counted


def admission_of(django_request) -> Admitted | None:
    """What the ASGI layer found of this request, if it came through it."""
    return getattr(django_request, "scope", {}).get(SCOPE_KEY)
