"""The canary's decision rule on its own: the candidate's arm against the incumbent's, from
interactions and feedback recorded here for each.

No verdict while either arm is short of min_interactions with a settled outcome (an accepted
edit settles once it persisted or was reverted). With enough on both sides, a check shown
beyond its margin rolls the candidate back (a drop in the edit-persisted rate, a rise in the
dissatisfied rate or in latency, and a rise in invalid tool calls, of every completion served);
a candidate shown better on the edit-persisted rate and within every guardrail's margin is
promoted; anything less waits, until max_hours stops the canary
(expired). Cycles take the decision through tests/training/test_cycles.py; the error rates
over thousands of simulated canaries are checked in test_canary_sequential.py.
"""

from datetime import timedelta

import pytest
from django.utils import timezone

from serving.canary import PROMOTE, ROLL_BACK, WAIT, CanaryPolicy, CanaryReport, canary_evaluate
from serving.models import AdapterVersion
from serving.sequential import Moments
from tenants.models import Interaction
from tests.factories import give, record, registered_adapter, served

MINIMUM = 40  # interactions a side before a verdict, in these tests
GUARDRAILS = {"edit_persisted_rate", "dissatisfied_rate", "latency"}
CHECKS = GUARDRAILS | {"invalid_tool_call_rate"}  # the detector: it only ever rolls back


@pytest.fixture
def candidate(acme, adapters_root, tmp_path) -> AdapterVersion:
    return registered_adapter(acme.org, tmp_path)


@pytest.fixture
def started():
    """When the canary started: an hour ago."""
    return timezone.now() - timedelta(hours=1)


def arm(org, served_by: str | None, count: int, *, persisted: int, dissatisfied: int = 0, latency_ms: float = 100.0) -> list[Interaction]:
    """`count` interactions served by `served_by` (None: the base model), each with its outcome
    known: the first `persisted` accepted edits persisted and the others were reverted, the first
    `dissatisfied` were followed by a dissatisfied user. Latencies spread a little around
    `latency_ms`."""
    return [served(org, adapter=served_by, latency_ms=latency_ms + i % 5 - 2,
                   feedback=("edit_accepted", "edit_persisted" if i < persisted else "edit_reverted",
                             *(("dissatisfied_followup",) if i < dissatisfied else ())))
            for i in range(count)]


def verdict(org, candidate, started, *, incumbent=None, **policy) -> CanaryReport:
    policy = CanaryPolicy(**{"min_interactions": MINIMUM, **policy})
    return canary_evaluate(org=org, candidate=candidate, incumbent=incumbent, since=started, policy=policy)


def failed(report: CanaryReport) -> set[str]:
    return {check.name for check in report.checks if not check.passed}


def test_it_waits_while_an_arm_is_short_of_its_minimum(acme, candidate, started):
    arm(acme.org, candidate.name, MINIMUM, persisted=20)
    arm(acme.org, None, MINIMUM - 1, persisted=20)
    report = verdict(acme.org, candidate, started)
    assert report.decision == WAIT and not report.expired
    assert (report.candidate.interactions, report.incumbent.interactions) == (MINIMUM, MINIMUM - 1)


def test_no_verdict_is_taken_on_fewer_interactions_even_against_a_worse_candidate(acme, candidate, started):
    arm(acme.org, candidate.name, 30, persisted=0, dissatisfied=30, latency_ms=500)
    arm(acme.org, None, 30, persisted=30)
    report = verdict(acme.org, candidate, started)
    assert failed(report) == GUARDRAILS  # each guardrail already sees it worse
    assert report.decision == WAIT and not report.expired


def test_it_promotes_a_candidate_shown_better_and_within_every_margin(acme, candidate, started):
    arm(acme.org, candidate.name, MINIMUM, persisted=30, dissatisfied=2)
    arm(acme.org, None, MINIMUM, persisted=8, dissatisfied=20)
    report = verdict(acme.org, candidate, started)
    assert report.decision == PROMOTE and not report.expired
    assert {check.name: check.passed for check in report.checks} == dict.fromkeys(CHECKS, True)
    persisted = next(check for check in report.checks if check.name == "edit_persisted_rate")
    assert persisted.interval[0] > 0 and persisted.sequential["samples"] == {"candidate": MINIMUM, "incumbent": MINIMUM}
    better = next(test for test in persisted.sequential["tests"] if test["claim"] == "better")
    assert better["reached"] and better["log_likelihood_ratio"] >= better["boundary"] > 0


def test_a_candidate_no_worse_but_not_shown_better_waits(acme, candidate, started):
    arm(acme.org, candidate.name, MINIMUM, persisted=22, dissatisfied=4)
    arm(acme.org, None, MINIMUM, persisted=20, dissatisfied=4)
    report = verdict(acme.org, candidate, started)
    assert report.decision == WAIT and failed(report) == set()
    better = next(t for c in report.checks if c.name == "edit_persisted_rate" for t in c.sequential["tests"] if t["claim"] == "better")
    assert not better["reached"] and better["log_likelihood_ratio"] < better["boundary"]


def test_a_significant_drop_in_the_edit_persisted_rate_rolls_back(acme, candidate, started):
    arm(acme.org, candidate.name, MINIMUM, persisted=4)
    arm(acme.org, None, MINIMUM, persisted=30)
    report = verdict(acme.org, candidate, started)
    assert report.decision == ROLL_BACK and not report.expired
    assert failed(report) == {"edit_persisted_rate"}


def test_a_drop_the_test_cannot_tell_from_chance_is_no_roll_back(acme, candidate, started):
    arm(acme.org, candidate.name, MINIMUM, persisted=18)
    arm(acme.org, None, MINIMUM, persisted=20)
    report = verdict(acme.org, candidate, started)
    assert report.decision == WAIT and failed(report) == set()


def test_a_rise_in_the_dissatisfied_rate_rolls_back(acme, candidate, started):
    arm(acme.org, candidate.name, MINIMUM, persisted=20, dissatisfied=30)
    arm(acme.org, None, MINIMUM, persisted=20, dissatisfied=2)
    report = verdict(acme.org, candidate, started)
    assert report.decision == ROLL_BACK and failed(report) == {"dissatisfied_rate"}


def test_a_rise_in_latency_rolls_back(acme, candidate, started):
    arm(acme.org, candidate.name, MINIMUM, persisted=20, latency_ms=200)
    arm(acme.org, None, MINIMUM, persisted=20, latency_ms=100)
    report = verdict(acme.org, candidate, started)
    assert report.decision == ROLL_BACK and failed(report) == {"latency"}


def test_a_rise_in_invalid_tool_calls_rolls_back_a_candidate_better_on_everything_else(acme, candidate, started):
    arm(acme.org, candidate.name, MINIMUM, persisted=30, dissatisfied=2)
    for _ in range(MINIMUM // 2):
        served(acme.org, adapter=candidate.name, latency_ms=100.0, feedback=("tool_call_invalid",))
    arm(acme.org, None, MINIMUM + MINIMUM // 2, persisted=8, dissatisfied=20)
    report = verdict(acme.org, candidate, started)
    assert report.decision == ROLL_BACK and failed(report) == {"invalid_tool_call_rate"}
    assert verdict(acme.org, candidate, started, invalid_tool_call_rate=0.5).decision == PROMOTE


def test_invalid_tool_calls_are_a_rate_of_every_completion_served(acme, candidate, started):
    """A caller reports an invalid call at once, an accepted edit's outcome comes hours later:
    of the settled completions alone, the invalid calls' share would be overstated."""
    arm(acme.org, candidate.name, MINIMUM, persisted=30, dissatisfied=2)
    served(acme.org, adapter=candidate.name, latency_ms=100.0, feedback=("tool_call_invalid",))
    for _ in range(9):
        served(acme.org, adapter=candidate.name, latency_ms=100.0, feedback=("edit_accepted",))
    arm(acme.org, None, MINIMUM, persisted=8, dissatisfied=20)
    measured = verdict(acme.org, candidate, started)
    assert (measured.candidate.served, measured.candidate.invalid, measured.candidate.interactions) == (MINIMUM + 10, 1, MINIMUM + 1)
    invalid = next(check for check in measured.checks if check.name == "invalid_tool_call_rate")
    assert invalid.candidate == pytest.approx(1 / (MINIMUM + 10)) and invalid.reference == 0
    assert invalid.sequential["samples"] == {"candidate": MINIMUM + 10, "incumbent": MINIMUM}
    assert [test["claim"] for test in invalid.sequential["tests"]] == ["inferior"]  # nothing a promotion waits for
    assert measured.decision == PROMOTE


def test_each_check_tolerates_what_the_policy_allows(acme, candidate, started):
    arm(acme.org, candidate.name, MINIMUM, persisted=4, dissatisfied=30, latency_ms=200)
    arm(acme.org, None, MINIMUM, persisted=30, dissatisfied=2, latency_ms=100)
    strict = verdict(acme.org, candidate, started)
    lenient = verdict(acme.org, candidate, started, edit_persisted_rate=0.9, dissatisfied_rate=0.9, latency=1.5)
    assert strict.decision == ROLL_BACK and failed(strict) == GUARDRAILS
    assert lenient.decision == WAIT and failed(lenient) == set()  # within the margins, but not better


def test_a_stricter_alpha_needs_more_evidence(acme, candidate, started):
    arm(acme.org, candidate.name, MINIMUM, persisted=26, dissatisfied=2)
    arm(acme.org, None, MINIMUM, persisted=6, dissatisfied=16)
    assert verdict(acme.org, candidate, started).decision == PROMOTE
    assert verdict(acme.org, candidate, started, alpha=0.001).decision == WAIT


def test_an_accepted_edit_counts_only_once_it_persisted_or_was_reverted(acme, candidate, started):
    arm(acme.org, candidate.name, 30, persisted=28)
    pending = [served(acme.org, adapter=candidate.name, latency_ms=100.0, feedback=("edit_accepted",)) for _ in range(10)]
    served(acme.org, adapter=candidate.name, latency_ms=100.0, feedback=())  # no outcome at all
    arm(acme.org, None, MINIMUM, persisted=6, dissatisfied=16)
    waiting = verdict(acme.org, candidate, started)
    assert waiting.decision == WAIT and waiting.candidate.interactions == 30

    for interaction in pending:  # hours later, their outcomes arrive
        give(acme.org, interaction, "edit_persisted")
    settled = verdict(acme.org, candidate, started)
    assert settled.decision == PROMOTE and settled.candidate.interactions == MINIMUM


def test_a_canary_without_a_verdict_after_max_hours_expires_and_rolls_back(acme, candidate):
    arm(acme.org, candidate.name, MINIMUM, persisted=22)  # perhaps better, but not shown to be
    arm(acme.org, None, MINIMUM, persisted=20)
    now = timezone.now()
    in_time = verdict(acme.org, candidate, now - timedelta(hours=23), max_hours=24)
    late = verdict(acme.org, candidate, now - timedelta(hours=24, minutes=1), max_hours=24)
    assert (in_time.decision, in_time.expired) == (WAIT, False)
    assert (late.decision, late.expired) == (ROLL_BACK, True)


def test_a_canary_short_of_its_minimum_expires_too(acme, candidate):
    arm(acme.org, candidate.name, 10, persisted=10)
    arm(acme.org, None, 10, persisted=0)
    report = verdict(acme.org, candidate, timezone.now() - timedelta(hours=25), max_hours=24)
    assert (report.decision, report.expired) == (ROLL_BACK, True)


def test_a_canary_shown_better_is_promoted_however_long_it_ran(acme, candidate):
    arm(acme.org, candidate.name, MINIMUM, persisted=30, dissatisfied=2)
    arm(acme.org, None, MINIMUM, persisted=8, dissatisfied=16)
    report = verdict(acme.org, candidate, timezone.now() - timedelta(hours=25), max_hours=24)
    assert (report.decision, report.expired) == (PROMOTE, False)


def test_each_arm_is_what_its_version_served_since_the_canary_started(acme, candidate, started, tmp_path):
    incumbent = registered_adapter(acme.org, tmp_path)
    arm(acme.org, candidate.name, MINIMUM, persisted=30, dissatisfied=2)
    arm(acme.org, incumbent.name, MINIMUM, persisted=8, dissatisfied=16)
    earlier = arm(acme.org, incumbent.name, 10, persisted=10)
    Interaction.objects.for_org(acme.org).filter(pk__in=[i.pk for i in earlier]).update(created_at=started - timedelta(minutes=1))
    arm(acme.org, None, 10, persisted=10)  # the base model's, which serves no arm here
    report = verdict(acme.org, candidate, started, incumbent=incumbent)
    assert (report.candidate.interactions, report.incumbent.interactions) == (MINIMUM, MINIMUM)
    assert report.decision == PROMOTE


def test_another_organizations_traffic_is_in_neither_arm(acme, globex, candidate, started):
    arm(acme.org, candidate.name, MINIMUM, persisted=30, dissatisfied=2)
    arm(acme.org, None, MINIMUM, persisted=8, dissatisfied=16)
    arm(globex.org, None, MINIMUM, persisted=MINIMUM, latency_ms=500)
    report = verdict(acme.org, candidate, started)
    assert report.incumbent.interactions == MINIMUM
    assert report.decision == PROMOTE and failed(report) == set()


def test_only_what_the_gateway_served_counts_in_an_arm(acme, viewer, candidate, started):
    """A viewer's key could record interactions naming any adapter, with any latency, through
    POST /api/v1/interactions, and so promote or roll back a canary; those recordings (and
    external ones naming no adapter, which fell into the base model's arm) are in neither arm."""
    arm(acme.org, candidate.name, MINIMUM, persisted=8, dissatisfied=16)
    arm(acme.org, None, MINIMUM, persisted=30, dissatisfied=2)
    for adapter in (candidate.name, None):
        for _ in range(3 * MINIMUM):
            interaction_id = record(viewer, adapter=adapter, latency_ms=1.0)
            give(acme.org, Interaction.objects.for_org(acme.org).get(pk=interaction_id), "edit_persisted")
    report = verdict(acme.org, candidate, started)
    assert (report.candidate.interactions, report.incumbent.interactions) == (MINIMUM, MINIMUM)
    assert report.decision == ROLL_BACK


def test_the_report_shows_each_arm_and_each_test(acme, candidate, started):
    arm(acme.org, candidate.name, MINIMUM, persisted=30, dissatisfied=2)
    arm(acme.org, None, MINIMUM, persisted=8, dissatisfied=16)
    shown = verdict(acme.org, candidate, started).as_dict()
    assert shown["candidate"]["interactions"] == MINIMUM and shown["candidate"]["latency_mean_ms"] == pytest.approx(100, abs=2)
    assert shown["alpha"] == 0.05
    for check in shown["checks"]:
        assert {"samples", "estimate", "tests"} <= check["sequential"].keys()
        assert all({"claim", "null", "log_likelihood_ratio", "boundary", "reached"} <= t.keys() for t in check["sequential"]["tests"])


def test_an_arm_is_counted_in_the_database_with_its_latencies_moments(acme, candidate, started):
    """The arm is one aggregate query (a tick costs the same however long the canary ran): its
    counts and its latencies' mean and variance are those of the rows themselves, and a
    completion with no latency recorded counts in the rates but not in the latency."""
    latencies = [80.0, 95.5, 120.0, 1_800.0, 310.25]
    for index, latency in enumerate(latencies):
        served(acme.org, adapter=candidate.name, latency_ms=latency,
               feedback=("edit_accepted", "edit_persisted" if index % 2 else "edit_reverted"))
    served(acme.org, adapter=candidate.name, latency_ms=None, feedback=("dissatisfied_followup",))
    measured = verdict(acme.org, candidate, started).candidate
    expected = Moments.of(latencies)
    assert (measured.interactions, measured.persisted, measured.dissatisfied) == (6, 2, 1)
    assert measured.latency.n == expected.n == 5
    assert measured.latency.mean == pytest.approx(expected.mean)
    assert measured.latency.variance == pytest.approx(expected.variance)
