"""How callers prove who they are: bearer API keys (software) and sessions (the console).

Both resolve to a `Principal` in `request.auth`: the organization and the role every view
and service works with. `request.user` is not used for authorization.
"""

from collections.abc import Awaitable, Callable

from rest_framework import authentication, exceptions

from tenants.api.admission import authorization, key_principal
from tenants.api.admitted import admission_of
from tenants.models import role_at_least
from tenants.organizations import api_key_authenticate, bearer_key, membership_principal


class ApiKeyAuthentication(authentication.BaseAuthentication):
    def authenticate(self, request):
        parts = authentication.get_authorization_header(request).split()
        if not parts or parts[0].lower() != b"bearer":
            return None
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed("The Authorization header must be 'Bearer <api_key>'.")
        try:
            raw_key = parts[1].decode("ascii")
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("An API key is ASCII text.") from None
        admitted = admission_of(request._request)  # looked up before the body was read
        principal = admitted.principal_for(raw_key) if admitted is not None else False
        if principal is False:
            principal = api_key_authenticate(raw_key)
        if principal is None:
            raise exceptions.AuthenticationFailed("Unknown or revoked API key.")
        return (None, principal)

    def authenticate_header(self, request) -> str:
        return 'Bearer realm="api"'


class ConsoleSessionAuthentication(authentication.SessionAuthentication):
    """A logged-in console user acts in the organization chosen in their session (or their only one)."""

    def authenticate(self, request):
        result = super().authenticate(request)
        if result is None:
            return None
        user = result[0]
        principal = membership_principal(user=user, org_id=request._request.session.get("org_id"))
        if principal is None:
            raise exceptions.AuthenticationFailed("Choose an organization you are a member of.")
        return (user, principal)


def bearer_key_at_least(role: str) -> Callable[[dict], Awaitable[bool]]:
    """Whether an ASGI request's headers carry a live key with at least `role`: told before its
    body is read (controlplane/body_limit.py), one indexed lookup, and none for a key of no
    key's shape or a made-up one (tenants.key_hashes). The view authenticates the request
    again, as for any other."""
    async def entitled(scope: dict) -> bool:
        raw_key = bearer_key(authorization(scope))
        principal = await key_principal(raw_key) if raw_key is not None else None
        return principal is not None and role_at_least(principal.role, role)

    return entitled
