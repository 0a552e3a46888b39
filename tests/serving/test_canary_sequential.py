"""The sequential canary over thousands of simulated canaries (benchmarks/canary_sequential.py,
which records the figures): an A/A canary is promoted, and rolled back, at most alpha of the
time however often it is judged, a real lift is promoted, and one that breaks tool calls is
rolled back."""

import math

import pytest

from benchmarks.canary_sequential import REGIMES, SCENARIOS, simulate
from serving.policies import CanaryPolicy
from serving.sequential import Estimate, confidence_sequence, log_likelihood_ratio

A_A, PLUS_5, PLUS_15, BREAKS_CALLS, BENDS_CALLS = SCENARIOS


def run(scenario, *, canaries: int, regime: str = "early", **policy) -> dict:
    return simulate(scenario, regime=REGIMES[regime], canaries=canaries, policy=CanaryPolicy(**policy), horizon=600, tick=20, seed=1)


@pytest.mark.parametrize("regime, alpha", [("early", 0.05), ("early", 0.2), ("late", 0.2)])
def test_an_a_a_canary_is_promoted_or_rolled_back_at_most_alpha_of_the_time(regime, alpha):
    rates = run(A_A, canaries=2000, regime=regime, alpha=alpha)
    assert rates["promoted"] <= alpha and rates["rolled_back"] <= alpha
    assert rates["expired"] >= 1 - 2 * alpha  # what the test cannot tell apart runs out of time


def test_a_lift_of_fifteen_points_is_promoted_within_a_few_hundred_outcomes():
    rates = run(PLUS_15, canaries=200)
    assert rates["promoted"] >= 0.95 and rates["rolled_back"] == 0
    assert rates["median_outcomes_to_decision"] <= 300


def test_a_smaller_lift_takes_longer_to_show():
    small, large = run(PLUS_5, canaries=200), run(PLUS_15, canaries=200)
    assert small["rolled_back"] == 0 and small["median_outcomes_to_decision"] > large["median_outcomes_to_decision"]


def test_a_lift_that_breaks_tool_calls_is_rolled_back_however_much_better_it_persists():
    rates = run(BREAKS_CALLS, canaries=200)
    assert rates["rolled_back"] >= 0.9 and rates["promoted"] <= 0.05
    # a smaller rise, beyond the margin but slow to show, holds the promotion back all the same
    assert run(BENDS_CALLS, canaries=200)["promoted"] <= 0.1 < run(PLUS_5, canaries=200)["promoted"]


def test_the_confidence_sequence_is_where_the_test_reaches_its_boundary():
    estimate, alpha, tau = Estimate(0.12, 0.002), 0.05, 0.1
    low, high = confidence_sequence(estimate, alpha=alpha, tau=tau)
    for edge in (low, high):
        assert log_likelihood_ratio(estimate, null=edge, tau=tau) == pytest.approx(math.log(1 / alpha))
    assert log_likelihood_ratio(estimate, null=estimate.value, tau=tau) < 0  # the estimate itself is never rejected


def test_a_candidate_replacing_a_tainted_version_needs_to_be_as_good_not_better():
    from serving.canary_rule import PROMOTE, ROLL_BACK, WAIT, Arm, canary_decide
    from serving.sequential import Moments

    def arm(persisted: int, n: int = 20_000) -> Arm:
        return Arm(interactions=n, persisted=persisted, dissatisfied=n // 3, latency=Moments(n=n, mean=1000.0, variance=100.0 ** 2),
                   served=n, invalid=n // 100)

    same = arm(3000), arm(3000)  # A/A, enough outcomes to show a 2-point margin
    assert canary_decide(*same, policy=CanaryPolicy(), out_of_time=False).decision == WAIT
    assert canary_decide(*same, policy=CanaryPolicy(), out_of_time=False, repairing=True).decision == PROMOTE
    worse = arm(1500), arm(3000)
    assert canary_decide(*worse, policy=CanaryPolicy(), out_of_time=False, repairing=True).decision == ROLL_BACK


def test_a_canary_reports_no_change_beyond_what_its_figure_allows():
    """A rate can change by one at most, a mean fall by no more than all of it: the confidence
    sequence, a normal approximation, knows neither."""
    from serving.canary_rule import Arm, canary_decide
    from serving.sequential import Moments

    all_of_them = Arm(interactions=8, persisted=8, dissatisfied=0, latency=Moments(n=8, mean=10.0, variance=400.0), served=8, invalid=0)
    none_of_them = Arm(interactions=8, persisted=0, dissatisfied=8, latency=Moments(n=8, mean=5000.0, variance=1.0), served=8, invalid=8)
    report = canary_decide(all_of_them, none_of_them, policy=CanaryPolicy(), out_of_time=False)
    intervals = {check.name: check.interval for check in report.checks}
    assert intervals["edit_persisted_rate"][1] == 1.0 and intervals["dissatisfied_rate"][0] == -1.0
    assert intervals["latency"][0] == -1.0 and intervals["invalid_tool_call_rate"][0] == -1.0
    assert all(-1.0 <= low <= high <= 1.0 for name, (low, high) in intervals.items() if name != "latency")
