"""What the tenant API's ASGI layer found of a request before its body was read
(tenants.api.admission), as DRF's authentication and throttle read it from the request."""

import time
from dataclasses import dataclass

from tenants.organizations import Principal

SCOPE_KEY = "tenant_api.admitted"  # an extension key of the ASGI scope: the server's, no client can set it
REUSABLE_S = 1.0  # how old a lookup made for this request may be when authentication reuses it


@dataclass(frozen=True)
class Admitted:
    raw_key: str
    principal: Principal | None  # None: no live key of that value
    looked_up_at: float | None  # time.monotonic() of the lookup made for this very request; None: remembered from an earlier one
    bytes_counted: bool  # the body declared its length, and it was counted

    def counted_for(self, principal: Principal) -> bool:
        """Whether this request was counted already, as `principal`'s organization's."""
        return self.principal is not None and self.principal.org.pk == principal.org.pk

    def principal_for(self, raw_key: str) -> Principal | None | bool:
        """The principal of `raw_key` as looked up for this request, if that was a moment ago (a
        long upload's key may have been revoked since its headers came); False: look it up."""
        if raw_key != self.raw_key or self.looked_up_at is None or time.monotonic() - self.looked_up_at > REUSABLE_S:
            return False
        return self.principal


def admission_of(django_request) -> Admitted | None:
    """What the ASGI layer found of this request, if it came through it."""
    return getattr(django_request, "scope", {}).get(SCOPE_KEY)
