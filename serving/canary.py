"""The canary's verdict: the candidate's share of end users against the incumbent's, on live
traffic, with the seed's A/B metrics.

Each arm is the interactions it served since the canary started whose outcome is known: an
accepted edit counts only once it persisted or was reverted, since that verdict arrives hours
later and counting it early would favour whichever arm served less recently. Once both arms
have `min_interactions`, they are compared with confidence intervals: edit-persisted rate (no
significant drop), dissatisfied-follow-up rate and latency (no significant rise); any check
failing rolls the candidate back, none failing promotes it. No verdict is taken on less, in
either direction, until the canary has run `max_hours`: a candidate that could not show on its
organization's traffic in that time that it is no worse is rolled back ("expired"), so a
quiet organization's loop moves on instead of waiting forever.
"""

from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import ClassVar

from django.conf import settings
from django.db.models import Exists, OuterRef
from django.utils import timezone

from serving.gates import Check, no_regression, no_rise
from serving.models import AdapterVersion, CanarySettings
from serving.overrides import check_ranges, policy_for, policy_update
from serving.statistics import bootstrap_difference_interval, mean, rate_difference_interval
from tenants.models import FeedbackEvent, Interaction, Organization

WAIT, PROMOTE, ROLL_BACK = "wait", "promote", "roll_back"
PENDING = ("edit_accepted",)  # an outcome still to come: persisted or reverted


@dataclass(frozen=True)
class CanaryPolicy:
    """How a canary runs and decides: these defaults, with settings.CANARY_POLICY's values (from
    the environment) over them, and the organization's own over those (`/api/v1/canary-policy`)."""

    share: float = 0.5  # of the organization's end users, fixed when the canary starts
    min_interactions: int = 100  # with a settled outcome, in each arm, before a verdict
    edit_persisted_rate: float = 0.02  # the drop tolerated
    dissatisfied_rate: float = 0.02  # the rise tolerated
    latency: float = 0.25  # the rise tolerated, relative to the incumbent's mean
    max_hours: float = 168.0  # a canary still short of min_interactions after this long is rolled back

    # What an organization may set each to (serving.overrides). Both arms need users: on a
    # sliver of them, one arm would take weeks to reach its minimum.
    RANGES: ClassVar[dict[str, tuple[float, float]]] = {
        "share": (0.01, 0.99), "min_interactions": (1, 100_000),
        "edit_persisted_rate": (0, 10), "dissatisfied_rate": (0, 10), "latency": (0, 10), "max_hours": (0.01, 8760),
    }

    def __post_init__(self) -> None:
        check_ranges(self)


def canary_policy_for(org: Organization) -> CanaryPolicy:
    return policy_for(org=org, model=CanarySettings, defaults=_deployment_defaults())


def canary_policy_update(*, org: Organization, changes, actor: str) -> CanaryPolicy:
    """Change the named settings; a canary running now keeps its share and is judged by the rest."""
    return policy_update(org=org, model=CanarySettings, defaults=_deployment_defaults(), changes=changes, actor=actor,
                         action="canary_policy.update")


def _deployment_defaults() -> CanaryPolicy:
    return CanaryPolicy(**settings.CANARY_POLICY)


@dataclass(frozen=True)
class Arm:
    interactions: int  # served, with a known outcome
    persisted: int
    dissatisfied: int
    latencies_ms: list[float]


@dataclass(frozen=True)
class CanaryReport:
    decision: str  # wait, promote or roll_back
    min_interactions: int  # what each arm needs before a verdict
    expired: bool  # rolled back for running out of time before both arms had min_interactions
    checks: list[Check]
    candidate: Arm
    incumbent: Arm

    def as_dict(self) -> dict:
        report = asdict(self)
        for arm in ("candidate", "incumbent"):
            latencies = report[arm].pop("latencies_ms")
            report[arm]["latency_mean_ms"] = round(mean(latencies), 1)
        return report


def canary_evaluate(*, org: Organization, candidate: AdapterVersion, incumbent: AdapterVersion | None,
                    since: datetime, policy: CanaryPolicy) -> CanaryReport:
    arms = _arm(org, candidate.name, since), _arm(org, incumbent.name if incumbent else None, since)
    c, i = arms
    checks = []
    if c.interactions and i.interactions:
        checks = [
            no_regression("canary", "edit_persisted_rate", c.persisted / c.interactions, i.persisted / i.interactions,
                          rate_difference_interval(c.persisted, c.interactions, i.persisted, i.interactions),
                          policy.edit_persisted_rate, c.interactions),
            no_rise("canary", "dissatisfied_rate", c.dissatisfied / c.interactions, i.dissatisfied / i.interactions,
                  rate_difference_interval(c.dissatisfied, c.interactions, i.dissatisfied, i.interactions),
                  policy.dissatisfied_rate, c.interactions),
        ]
        if c.latencies_ms and i.latencies_ms:
            low, high = bootstrap_difference_interval(c.latencies_ms, i.latencies_ms, mean, resamples=1000)
            base = max(mean(i.latencies_ms), 1.0)
            checks.append(no_rise("canary", "latency", mean(c.latencies_ms), mean(i.latencies_ms), (low / base, high / base), policy.latency,
                                len(c.latencies_ms), note="mean ms; interval and threshold relative to the incumbent's mean"))
    short = min(c.interactions, i.interactions) < policy.min_interactions
    expired = short and timezone.now() - since >= timedelta(hours=policy.max_hours)
    if expired or (not short and any(not check.passed for check in checks)):
        decision = ROLL_BACK
    elif short:
        decision = WAIT
    else:
        decision = PROMOTE
    return CanaryReport(decision=decision, min_interactions=policy.min_interactions, expired=expired, checks=checks,
                        candidate=c, incumbent=i)


def _arm(org: Organization, served_by: str | None, since: datetime) -> Arm:
    interactions = Interaction.objects.for_org(org).filter(created_at__gte=since)
    interactions = interactions.filter(adapter=served_by) if served_by else interactions.filter(adapter__isnull=True)

    def has(*types: str):
        return Exists(FeedbackEvent.objects.for_org(org).filter(interaction=OuterRef("pk"), type__in=types))

    settled = Exists(FeedbackEvent.objects.for_org(org).filter(interaction=OuterRef("pk")).exclude(type__in=PENDING))
    rows = (interactions.annotate(settled=settled, persisted=has("edit_persisted"), dissatisfied=has("dissatisfied_followup"))
            .filter(settled=True).values_list("persisted", "dissatisfied", "latency_ms"))
    rows = list(rows)
    return Arm(interactions=len(rows), persisted=sum(p for p, _, _ in rows), dissatisfied=sum(d for _, d, _ in rows),
               latencies_ms=[latency for _, _, latency in rows if latency is not None])
