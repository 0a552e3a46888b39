"""Per-organization admission at the gateway: a request rate, a token rate and a cap on
requests in flight, so that one organization's flood cannot starve the others.

Token buckets refill continuously. The token bucket is charged after the completion, when
its size is known, and may go negative: the organization then waits until it has paid the
debt. Two limiters keep the same rules:

- `Limiter`, in the gateway process, touched only from its event loop (so it needs no lock):
  the embedded default, with one gateway process;
- `SharedLimiter`, in Redis, for several gateway processes: each check is one atomic script,
  and a request in flight holds a lease that its process renews while it runs, so that the
  slots of a process killed mid-request come back when their leases run out.
"""

import asyncio
import itertools
import logging
import math
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from redis import asyncio as aioredis
from redis.exceptions import RedisError

from serving.policies import Limits

log = logging.getLogger(__name__)


class RateLimited(Exception):
    def __init__(self, message: str, retry_after_s: float):
        super().__init__(message)
        self.message = message
        self.retry_after_s = retry_after_s


def _suspended() -> RateLimited:
    return RateLimited("This organization's access to the gateway is suspended (a limit of 0).", 60.0)


def _too_many_in_flight(limits: Limits) -> RateLimited:
    return RateLimited(f"Too many requests in flight for this organization (limit {limits.max_concurrent}).", 1.0)


def _request_rate(limits: Limits, wait_s: float) -> RateLimited:
    return RateLimited(f"Request rate limit reached ({limits.requests_per_minute} per minute).", wait_s)


def _token_rate(limits: Limits, wait_s: float) -> RateLimited:
    return RateLimited(f"Token rate limit reached ({limits.tokens_per_minute} per minute).", wait_s)


def _is_suspended(limits: Limits) -> bool:
    return 0 in (limits.requests_per_minute, limits.tokens_per_minute, limits.max_concurrent)


# In the gateway process -----------------------------------------------------------------------------

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

    async def admit(self, org_id, limits: Limits) -> "Admission":
        return self.admit_now(org_id, limits)

    def admit_now(self, org_id, limits: Limits) -> "Admission":
        """Take one request slot, or raise RateLimited saying when to come back."""
        if _is_suspended(limits):
            raise _suspended()
        now = self.clock()
        state = self._orgs.get(org_id)
        if state is None:
            state = self._orgs[org_id] = _OrgState(
                requests=_Bucket(limits.requests_per_minute, now), tokens=_Bucket(limits.tokens_per_minute, now)
            )
        state.requests.refill(now, limits.requests_per_minute)
        state.tokens.refill(now, limits.tokens_per_minute)
        if state.in_flight >= limits.max_concurrent:
            raise _too_many_in_flight(limits)
        if state.requests.level < 1.0:
            raise _request_rate(limits, state.requests.wait_for(1.0, limits.requests_per_minute))
        if state.tokens.level <= 0.0:
            raise _token_rate(limits, state.tokens.wait_for(1.0, limits.tokens_per_minute))
        state.requests.level -= 1.0
        state.in_flight += 1
        return Admission(lambda tokens: _local_release(state, tokens))


def _local_release(state: _OrgState, tokens: int) -> None:
    state.in_flight -= 1
    state.tokens.level -= tokens


class Admission:
    """One admitted request's slot. Released exactly once, however the request ends: a
    stream's generator may be dropped without ever running, and its finalizer then releases
    the slot too (on the event loop, like every other call), so release is idempotent."""

    def __init__(self, give_back: Callable[[int], None]):
        self._give_back: Callable[[int], None] | None = give_back
        self._held: list = []

    def attach(self, held) -> None:
        """Something else the request holds (its turn at the model servers), given back with it."""
        self._held.append(held)

    def release(self, *, tokens: int = 0) -> None:
        """Give back the slot and charge the tokens the request used (0 if it failed)."""
        give_back, self._give_back = self._give_back, None
        if give_back is None:
            return
        give_back(tokens)
        for held in self._held:
            held.release()


# In Redis, shared by every gateway process -----------------------------------------------------------

# Time is Redis's own (TIME), one clock for every gateway process: a host whose clock ran ahead
# would otherwise hold back every other process's refills, and one behind would see the others'
# leases as expired. A script's first ARGV is "now" only where a test drives the clock.
_NOW = """
local now = tonumber(ARGV[1])
if not now then local t = redis.call('TIME'); now = tonumber(t[1]) + tonumber(t[2]) / 1000000 end
"""

# KEYS: the organization's buckets (a hash), its leases in flight (a sorted set by expiry).
# ARGV: now, requests per minute, tokens per minute, max in flight, the slot's id, its lease in s.
# Returns {0} when admitted, else {1 in flight | 2 request rate | 3 token rate, seconds to wait}.
_ADMIT = _NOW + """
local rpm, tpm, cap = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local b = redis.call('HMGET', KEYS[1], 'requests', 'tokens', 'updated')
local requests, tokens, updated = tonumber(b[1]) or rpm, tonumber(b[2]) or tpm, tonumber(b[3]) or now
local elapsed = math.max(0, now - updated)
requests = math.min(rpm, requests + elapsed * rpm / 60)
tokens = math.min(tpm, tokens + elapsed * tpm / 60)
updated = math.max(now, updated)
redis.call('HSET', KEYS[1], 'requests', tostring(requests), 'tokens', tostring(tokens), 'updated', tostring(updated))
redis.call('EXPIRE', KEYS[1], 86400)
if redis.call('ZCARD', KEYS[2]) >= cap then return {1, '1'} end
if requests < 1 then return {2, tostring((1 - requests) * 60 / rpm)} end
if tokens <= 0 then return {3, tostring((1 - tokens) * 60 / tpm)} end
redis.call('HSET', KEYS[1], 'requests', tostring(requests - 1))
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[6]), ARGV[5])
redis.call('EXPIRE', KEYS[2], 86400)
return {0, '0'}
"""

# KEYS as above; ARGV: the slot's id, the tokens it used. The debt is charged even when the
# slot's lease had already run out.
_RELEASE = """
redis.call('ZREM', KEYS[2], ARGV[1])
if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('HINCRBYFLOAT', KEYS[1], 'tokens', -tonumber(ARGV[2])) end
return 0
"""

# KEYS: a slot's leases in flight; ARGV: now, the lease in s, the slot's id. Renews only a slot still there.
_RENEW = _NOW + """
return redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[2]), ARGV[3])
"""


class SharedLimiter:
    """The limits of every gateway process together, kept in Redis. While Redis cannot be
    reached, each process falls back to its own `Limiter` (the limits per process, not
    shared) rather than refusing every request."""

    def __init__(self, url: str, *, lease_s: float = 30.0, clock: Callable[[], float] | None = None):
        """`clock`: None keeps time on Redis's clock (_NOW); a test passes its own."""
        self.url, self.lease_s, self.clock = url, lease_s, clock
        self._process = uuid.uuid4().hex
        self._serial = itertools.count()
        self._live: dict[str, tuple[str, str]] = {}  # slot -> its keys, renewed while held
        self._redis: aioredis.Redis | None = None
        self._scripts: dict[str, object] = {}
        self._renewing: asyncio.Task | None = None
        self._releasing: set[asyncio.Task] = set()
        self._fallback = Limiter()

    async def admit(self, org_id, limits: Limits) -> Admission:
        if _is_suspended(limits):
            raise _suspended()
        keys = (f"gateway:limits:{org_id}:buckets", f"gateway:limits:{org_id}:in-flight")
        slot = f"{self._process}:{next(self._serial)}"
        try:
            code, wait = await self._script(_ADMIT)(
                keys=keys, args=(self._now(), limits.requests_per_minute, limits.tokens_per_minute, limits.max_concurrent, slot, self.lease_s),
            )
        except RedisError as error:
            log.warning("Redis unreachable for the shared limits (%s); this process limits on its own for now", error)
            return self._fallback.admit_now(org_id, limits)
        if int(code) == 1:
            raise _too_many_in_flight(limits)
        if int(code) == 2:
            raise _request_rate(limits, float(wait))
        if int(code) == 3:
            raise _token_rate(limits, float(wait))
        self._live[slot] = keys
        self._keep_renewing()
        return Admission(lambda tokens: self._release(slot, tokens))

    def _release(self, slot: str, tokens: int) -> None:
        keys = self._live.pop(slot)
        try:
            task = asyncio.get_running_loop().create_task(self._script(_RELEASE)(keys=keys, args=(slot, tokens)))
        except RuntimeError:  # no loop any more: the lease runs out instead
            return
        self._releasing.add(task)
        task.add_done_callback(self._released)

    def _released(self, task: asyncio.Task) -> None:
        self._releasing.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("Could not give a slot back to the shared limits (its lease will run out): %s", task.exception())

    async def settled(self) -> None:
        """Wait until every slot given back has reached Redis."""
        while self._releasing:
            await asyncio.wait(list(self._releasing))

    def _now(self) -> float | str:
        return "" if self.clock is None else self.clock()

    def _client(self) -> aioredis.Redis:
        if self._redis is None:
            self._redis = aioredis.Redis.from_url(self.url, socket_timeout=1.0, socket_connect_timeout=1.0)
            self._scripts = {}
        return self._redis

    def _script(self, source: str):
        """The script, sent by its hash (EVALSHA): Redis loads the text once, not with every request."""
        client = self._client()
        if source not in self._scripts:
            self._scripts[source] = client.register_script(source)
        return self._scripts[source]

    def _keep_renewing(self) -> None:
        if self._renewing is None or self._renewing.done():
            self._renewing = asyncio.get_running_loop().create_task(self._renew_forever())

    async def _renew_forever(self) -> None:
        """Every third of a lease, push the expiry of each slot this process holds forward."""
        while self._live:
            await asyncio.sleep(self.lease_s / 3)
            await self.renew()

    async def renew(self) -> None:
        renew = self._script(_RENEW)
        try:
            async with self._client().pipeline(transaction=False) as pipe:
                for slot, (_, in_flight) in list(self._live.items()):
                    await renew(keys=(in_flight,), args=(self._now(), self.lease_s, slot), client=pipe)
                await pipe.execute()
        except RedisError as error:
            log.warning("Could not renew the gateway's leases in Redis: %s", error)

    async def close(self) -> None:
        await self.settled()
        if self._renewing is not None:
            self._renewing.cancel()
        if self._redis is not None:
            await self._redis.aclose()
            self._redis = None


def retry_after_header(seconds: float) -> str:
    """Retry-After takes whole seconds; round up so a client never comes back too early."""
    return str(max(1, math.ceil(seconds)))
