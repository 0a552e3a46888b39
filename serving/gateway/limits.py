"""Per-organization admission at the gateway: a request rate, a token rate and a cap on
requests in flight, so that one organization's flood cannot starve the others.

Token buckets refill continuously. The token bucket is charged after the completion, when
its size is known, and may go negative: the organization then waits until it has paid the
debt. State lives in the gateway process and is touched only from its event loop, so it
needs no lock; with several gateway processes, give each its share of the limits.
"""

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from serving.policies import Limits


class RateLimited(Exception):
    def __init__(self, message: str, retry_after_s: float):
        super().__init__(message)
        self.message = message
        self.retry_after_s = retry_after_s


@dataclass
class _Bucket:
    level: float
    updated: float

    def refill(self, now: float, capacity: float) -> None:
        self.level = min(capacity, self.level + (now - self.updated) * capacity / 60.0)
        self.updated = now

    def wait_for(self, amount: float, capacity: float) -> float:
        """Seconds until the bucket holds `amount`."""
        return max(0.0, (amount - self.level) * 60.0 / capacity)


@dataclass
class _OrgState:
    requests: _Bucket
    tokens: _Bucket
    in_flight: int = 0


@dataclass
class Limiter:
    clock: Callable[[], float] = time.monotonic
    _orgs: dict[object, _OrgState] = field(default_factory=dict)

    def admit(self, org_id, limits: Limits) -> "Admission":
        """Take one request slot, or raise RateLimited saying when to come back."""
        if 0 in (limits.requests_per_minute, limits.tokens_per_minute, limits.max_concurrent):
            raise RateLimited("This organization's access to the gateway is suspended (a limit of 0).", 60.0)
        now = self.clock()
        state = self._orgs.get(org_id)
        if state is None:
            state = self._orgs[org_id] = _OrgState(
                requests=_Bucket(limits.requests_per_minute, now), tokens=_Bucket(limits.tokens_per_minute, now)
            )
        state.requests.refill(now, limits.requests_per_minute)
        state.tokens.refill(now, limits.tokens_per_minute)
        if state.in_flight >= limits.max_concurrent:
            raise RateLimited(f"Too many requests in flight for this organization (limit {limits.max_concurrent}).", 1.0)
        if state.requests.level < 1.0:
            raise RateLimited(
                f"Request rate limit reached ({limits.requests_per_minute} per minute).",
                state.requests.wait_for(1.0, limits.requests_per_minute),
            )
        if state.tokens.level <= 0.0:
            raise RateLimited(
                f"Token rate limit reached ({limits.tokens_per_minute} per minute).",
                state.tokens.wait_for(1.0, limits.tokens_per_minute),
            )
        state.requests.level -= 1.0
        state.in_flight += 1
        return Admission(state)


class Admission:
    """One admitted request's slot. Released exactly once, however the request ends: a
    stream's generator may be dropped without ever running, and its finalizer then releases
    the slot too (on the event loop, like every other call), so release is idempotent."""

    def __init__(self, state: _OrgState):
        self._state: _OrgState | None = state

    def release(self, *, tokens: int = 0) -> None:
        """Give back the slot and charge the tokens the request used (0 if it failed)."""
        if self._state is None:
            return
        self._state.in_flight -= 1
        self._state.tokens.level -= tokens
        self._state = None


def retry_after_header(seconds: float) -> str:
    """Retry-After takes whole seconds; round up so a client never comes back too early."""
    return str(max(1, math.ceil(seconds)))
