"""Each organization's share of the tenant API: requests per minute, counted in fixed one-minute
windows in the `limits` cache (Redis when the deployment has one, so that the count holds
across every web process; else each process's memory). Past it, 429 with Retry-After."""

import math
import time

from django.conf import settings
from django.core.cache import caches
from rest_framework.exceptions import Throttled
from rest_framework.throttling import BaseThrottle


class OrganizationRateThrottle(BaseThrottle):
    def allow_request(self, request, view) -> bool:
        principal = request.auth
        if principal is None:  # refused by authentication before any count
            return True
        rate = settings.TENANT_API_REQUESTS_PER_MINUTE
        now = time.time()
        window = int(now // 60)
        key = window_key(principal.org.pk, window)
        cache = caches["limits"]
        cache.add(key, 0, timeout=120)
        try:
            count = cache.incr(key)
        except ValueError:  # expired between the two calls: this request opens the window again
            cache.add(key, 1, timeout=120)
            count = 1
        if count > rate:
            wait = math.ceil((window + 1) * 60 - now)
            raise Throttled(wait, detail=f"This organization's API rate limit is reached ({rate} requests per minute).")
        return True


def window_key(org_id, window: int) -> str:
    """The count of one organization's requests in one minute (minutes since the epoch)."""
    return f"tenant-api:{org_id}:{window}"
