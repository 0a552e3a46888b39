"""Per-organization admission: request rate, token rate and concurrency, on a fake clock."""

import pytest

from serving.gateway.limits import Limiter, RateLimited, retry_after_header
from serving.policies import Limits


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def limiter(clock):
    return Limiter(clock=clock)


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


@pytest.mark.parametrize(("seconds", "header"), [(0.0, "1"), (0.2, "1"), (1.0, "1"), (1.01, "2"), (59.5, "60")])
def test_retry_after_is_whole_seconds_rounded_up(seconds, header):
    assert retry_after_header(seconds) == header


def test_a_limit_of_zero_suspends_the_organization(limiter):
    with pytest.raises(RateLimited, match="suspended") as raised:
        limiter.admit("acme", Limits(requests_per_minute=100, tokens_per_minute=10**6, max_concurrent=0))
    assert raised.value.retry_after_s == 60.0
