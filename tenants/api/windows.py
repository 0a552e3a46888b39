"""Each organization's share of the tenant API, counted: requests and request bytes per minute,
and exports per hour, in fixed windows in the `limits` cache (Redis when the deployment has one,
so that the counts hold across every web process; else each process's memory). Bytes are
counted because a request's cost grows with its body (redaction reads every byte of a
recording): a limit on requests alone lets 4 MiB bodies take a web server's whole CPU.

Under the ASGI server a key's request is counted before its body is read
(tenants.api.admission); DRF's throttles (tenants.api.throttling) count what that could not.
"""

import logging
import math
import time

from django.conf import settings
from django.core.cache import caches
from redis.exceptions import RedisError
from rest_framework.exceptions import Throttled

log = logging.getLogger(__name__)


def api_admit(org_id, *, requests: int = 1, body_bytes: int = 0) -> Throttled | None:
    """Counts the organization's requests and request bytes in this minute's window: the refusal
    when either passes its limit, else None."""
    now = time.time()
    window = int(now // 60)
    wait = math.ceil((window + 1) * 60 - now)
    if requests and _count(window_key(org_id, window), requests) > settings.TENANT_API_REQUESTS_PER_MINUTE:
        return Throttled(wait, detail=f"This organization's API rate limit is reached "
                                      f"({settings.TENANT_API_REQUESTS_PER_MINUTE} requests per minute).")
    if body_bytes and _count(window_key(org_id, window, "bytes"), body_bytes) > settings.TENANT_API_BYTES_PER_MINUTE:
        return Throttled(wait, detail=f"This organization's API upload limit is reached "
                                      f"({settings.TENANT_API_BYTES_PER_MINUTE:,} bytes of request bodies per minute).")
    return None


def export_admit(org_id) -> Throttled | None:
    """Counts an export in this hour's window: the refusal past the limit, else None."""
    now = time.time()
    window = int(now // 3600)
    if _count(window_key(org_id, window, "exports"), 1, window_s=3600) > settings.TENANT_API_EXPORTS_PER_HOUR:
        return Throttled(math.ceil((window + 1) * 3600 - now), detail=f"This organization's export limit is reached "
                                                                      f"({settings.TENANT_API_EXPORTS_PER_HOUR} an hour).")
    return None


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
