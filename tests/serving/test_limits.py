"""Per-organization admission: request rate, token rate and concurrency, on a fake clock, by
the gateway process's own limiter and by the one shared through Redis, which keeps the same
rules across every gateway process and gives back the slots of a process that died."""

import asyncio
import time
import uuid

import pytest

from serving.gateway.limits import Limiter, RateLimited, SharedLimiter, retry_after_header
from serving.policies import Limits


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Gateway:
    """One gateway process's limiter, driven from a test: its own event loop, organization
    names made unique to the test (a shared Redis outlives it)."""

    def __init__(self, limiter, runner: asyncio.Runner, prefix: str):
        self.limiter, self.runner, self.prefix = limiter, runner, prefix

    def admit(self, org: str, limits: Limits) -> "Slot":
        return Slot(self, self.runner.run(self.limiter.admit(f"{self.prefix}-{org}", limits)))

    def settle(self) -> None:
        if isinstance(self.limiter, SharedLimiter):
            self.runner.run(self.limiter.settled())


class Slot:
    def __init__(self, gateway: Gateway, admission):
        self.gateway, self.admission = gateway, admission

    def release(self, tokens: int = 0) -> None:
        async def release():
            self.admission.release(tokens=tokens)

        self.gateway.runner.run(release())
        self.gateway.settle()


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def runner():
    with asyncio.Runner() as runner:
        yield runner


@pytest.fixture
def gateways(request, clock, runner):
    """Make gateway processes that limit together: one in-process limiter, or Redis-shared ones."""
    prefix = uuid.uuid4().hex
    made = []

    def make(kind: str, lease_s: float = 30.0) -> Gateway:
        if kind == "local":
            limiter = Limiter(clock=clock)
        else:
            limiter = SharedLimiter(request.getfixturevalue("redis_url"), lease_s=lease_s, clock=clock)
        made.append(limiter)
        return Gateway(limiter, runner, prefix)

    yield make
    for limiter in made:
        if isinstance(limiter, SharedLimiter):
            runner.run(limiter.close())


@pytest.fixture(params=["local", "shared"])
def limiter(request, gateways) -> Gateway:
    return gateways(request.param)


def test_requests_beyond_the_rate_wait_until_the_bucket_refills(limiter, clock):
    limits = Limits(requests_per_minute=60, tokens_per_minute=10**6, max_concurrent=100)
    for _ in range(60):
        limiter.admit("acme", limits).release()
    with pytest.raises(RateLimited) as raised:
        limiter.admit("acme", limits)
    assert raised.value.retry_after_s == pytest.approx(1.0)
    clock.now += 1.0
    limiter.admit("acme", limits)


def test_tokens_are_charged_after_the_fact_and_the_debt_is_paid_in_time(limiter, clock):
    limits = Limits(requests_per_minute=1000, tokens_per_minute=600, max_concurrent=100)
    limiter.admit("acme", limits).release(tokens=1200)  # one huge completion: 600 tokens of debt
    with pytest.raises(RateLimited, match="Token rate") as raised:
        limiter.admit("acme", limits)
    assert raised.value.retry_after_s == pytest.approx(60.1)
    clock.now += 61
    limiter.admit("acme", limits)


def test_the_concurrency_cap_counts_requests_in_flight(limiter):
    limits = Limits(requests_per_minute=1000, tokens_per_minute=10**6, max_concurrent=2)
    first = limiter.admit("acme", limits)
    limiter.admit("acme", limits)
    with pytest.raises(RateLimited, match="in flight"):
        limiter.admit("acme", limits)
    first.release(tokens=10)
    first.release(tokens=10)  # a second release of the same request gives nothing back
    limiter.admit("acme", limits)
    with pytest.raises(RateLimited, match="in flight"):
        limiter.admit("acme", limits)


def test_one_organizations_exhausted_limits_leave_anothers_untouched(limiter):
    limits = Limits(requests_per_minute=1, tokens_per_minute=10**6, max_concurrent=1)
    limiter.admit("acme", limits)
    with pytest.raises(RateLimited):
        limiter.admit("acme", limits)
    limiter.admit("globex", limits)


def test_a_limit_of_zero_suspends_the_organization(limiter):
    with pytest.raises(RateLimited, match="suspended") as raised:
        limiter.admit("acme", Limits(requests_per_minute=100, tokens_per_minute=10**6, max_concurrent=0))
    assert raised.value.retry_after_s == 60.0


@pytest.mark.parametrize(("seconds", "header"), [(0.0, "1"), (0.2, "1"), (1.0, "1"), (1.01, "2"), (59.5, "60")])
def test_retry_after_is_whole_seconds_rounded_up(seconds, header):
    assert retry_after_header(seconds) == header


# Across gateway processes --------------------------------------------------------------------------

def test_two_gateway_processes_share_one_organizations_limits(gateways):
    """Two workers do not double an organization's quota: what one admitted, the other counts."""
    first, second = gateways("shared"), gateways("shared")
    rate = Limits(requests_per_minute=4, tokens_per_minute=10**6, max_concurrent=100)
    for gateway in (first, second, first, second):
        gateway.admit("acme", rate).release()
    for gateway in (first, second):
        with pytest.raises(RateLimited, match="Request rate"):
            gateway.admit("acme", rate)

    in_flight = Limits(requests_per_minute=1000, tokens_per_minute=10**6, max_concurrent=2)
    first.admit("globex", in_flight)
    held = second.admit("globex", in_flight)
    with pytest.raises(RateLimited, match="in flight"):
        first.admit("globex", in_flight)
    held.release(tokens=5)
    first.admit("globex", in_flight)

    tokens = Limits(requests_per_minute=1000, tokens_per_minute=100, max_concurrent=100)
    first.admit("initech", tokens).release(tokens=150)
    with pytest.raises(RateLimited, match="Token rate"):
        second.admit("initech", tokens)


def test_a_dead_processs_slots_come_back_when_their_leases_run_out(gateways, clock):
    dead, alive = gateways("shared", lease_s=30), gateways("shared", lease_s=30)
    limits = Limits(requests_per_minute=1000, tokens_per_minute=10**6, max_concurrent=2)
    dead.admit("acme", limits)
    dead.admit("acme", limits)  # the process is killed here: neither slot is ever released
    with pytest.raises(RateLimited, match="in flight"):
        alive.admit("acme", limits)
    clock.now += 29
    with pytest.raises(RateLimited, match="in flight"):
        alive.admit("acme", limits)
    clock.now += 2
    alive.admit("acme", limits)
    alive.admit("acme", limits)


def test_a_live_process_renews_the_leases_of_its_long_requests(gateways, clock, runner):
    gateway, other = gateways("shared", lease_s=30), gateways("shared", lease_s=30)
    limits = Limits(requests_per_minute=1000, tokens_per_minute=10**6, max_concurrent=1)
    long_stream = gateway.admit("acme", limits)
    for _ in range(4):  # two minutes of a stream, renewed every 20 s as the process does
        clock.now += 20
        runner.run(gateway.limiter.renew())
        with pytest.raises(RateLimited, match="in flight"):
            other.admit("acme", limits)
    long_stream.release()
    other.admit("acme", limits)


def test_without_redis_each_process_falls_back_to_its_own_limits(runner, clock):
    unreachable = SharedLimiter("redis://127.0.0.1:1/0", clock=clock)
    limits = Limits(requests_per_minute=1000, tokens_per_minute=10**6, max_concurrent=1)
    gateway = Gateway(unreachable, runner, "acme")
    gateway.admit("acme", limits)
    with pytest.raises(RateLimited, match="in flight"):
        gateway.admit("acme", limits)


def test_on_redis_clock_a_process_whose_clock_is_off_neither_starves_refills_nor_expires_leases(request, runner, monkeypatch):
    """Without a test's clock, time is Redis's: a gateway host an hour ahead (or behind) sets no
    lease and no bucket by its own clock, so the others' refills and leases are untouched."""
    import redis

    url = request.getfixturevalue("redis_url")
    org = f"skew-{uuid.uuid4().hex}"
    ahead = Gateway(SharedLimiter(url, lease_s=30), runner, org)
    limits = Limits(requests_per_minute=60, tokens_per_minute=10**6, max_concurrent=5)
    real_time = time.time
    monkeypatch.setattr(time, "time", lambda: real_time() + 3600)
    held = ahead.admit("acme", limits)
    runner.run(ahead.limiter.renew())
    server = redis.Redis.from_url(url)
    seconds, micros = server.time()
    now = seconds + micros / 1e6
    [(slot, expiry)] = server.zrange(f"gateway:limits:{org}-acme:in-flight", 0, -1, withscores=True)
    assert now + 25 < expiry <= now + 31  # a lease from Redis's clock, not from the host's
    assert float(server.hget(f"gateway:limits:{org}-acme:buckets", "updated")) == pytest.approx(now, abs=5)
    held.release()
    runner.run(ahead.limiter.close())
