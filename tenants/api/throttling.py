"""Each organization's share of the tenant API: requests and request bytes per minute, and
exports per hour, counted in fixed windows in the `limits` cache (Redis when the deployment has
one, so that the counts hold across every web process; else each process's memory). Bytes are
counted because a request's cost grows with its body (redaction reads every byte of a
recording): a limit on requests alone lets 4 MiB bodies take a web server's whole CPU. Past
any of them, 429 with Retry-After."""

import logging
import math
import time

from django.conf import settings
from django.core.cache import caches
from rest_framework.exceptions import Throttled
from redis.exceptions import RedisError
from rest_framework.throttling import BaseThrottle

log = logging.getLogger(__name__)


class OrganizationRateThrottle(BaseThrottle):
    def allow_request(self, request, view) -> bool:
        principal = request.auth
        if principal is None:  # refused by authentication before any count
            return True
        now = time.time()
        window = int(now // 60)
        wait = math.ceil((window + 1) * 60 - now)
        org_id = principal.org.pk
        requests = _count(window_key(org_id, window), 1)
        if requests > settings.TENANT_API_REQUESTS_PER_MINUTE:
            raise Throttled(wait, detail=f"This organization's API rate limit is reached "
                                         f"({settings.TENANT_API_REQUESTS_PER_MINUTE} requests per minute).")
        size = _body_size(request)
        if size and _count(window_key(org_id, window, "bytes"), size) > settings.TENANT_API_BYTES_PER_MINUTE:
            raise Throttled(wait, detail=f"This organization's API upload limit is reached "
                                         f"({settings.TENANT_API_BYTES_PER_MINUTE:,} bytes of request bodies per minute).")
        return True


class OrganizationExportThrottle(BaseThrottle):
    """Exports an hour per organization: each one decrypts everything the organization holds, so
    a loop of them would take a web server's CPU at the cost of one request each."""

    def allow_request(self, request, view) -> bool:
        if request.method not in ("GET", "HEAD"):  # refused with a 405 after the throttles: no export
            return True
        now = time.time()
        window = int(now // 3600)
        if _count(window_key(request.auth.org.pk, window, "exports"), 1, window_s=3600) > settings.TENANT_API_EXPORTS_PER_HOUR:
            raise Throttled(math.ceil((window + 1) * 3600 - now), detail=f"This organization's export limit is reached "
                                                                         f"({settings.TENANT_API_EXPORTS_PER_HOUR} an hour).")
        return True


def _body_size(request) -> int:
    """The declared length (the server holds a body to it), else the body read (kept for the parser)."""
    declared = request.META.get("CONTENT_LENGTH", "")
    if declared.isdigit():
        return int(declared)
    return len(request._request.body) if request.method in ("POST", "PUT", "PATCH") else 0


def _count(key: str, amount: int, window_s: int = 60) -> int:
    """Add to the window's count; one round trip once the window is open. While Redis cannot be
    reached (restarting, say), requests are let through uncounted rather than refused: the
    tenant's data is not at stake, and the gateway's limits fall back the same way."""
    cache = caches["limits"]
    try:
        try:
            return cache.incr(key, amount)
        except ValueError:  # the window's first request (or it expired just now)
            if cache.add(key, amount, timeout=2 * window_s):
                return amount
            return cache.incr(key, amount)  # another process opened it first
    except RedisError as error:
        log.warning("The tenant API's limits cannot be counted (Redis unreachable: %s); letting the request through", error)
        return 0


def window_key(org_id, window: int, what: str = "requests") -> str:
    """One organization's count of `what` in one window (windows since the epoch)."""
    return f"tenant-api:{org_id}:{what}:{window}"
