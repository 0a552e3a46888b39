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

from django.conf import settings
from django.db.models import Exists, OuterRef
from django.utils import timezone

from serving.models import AdapterVersion, CanarySettings
from serving.overrides import policy_for, policy_update
from serving.policies import CanaryPolicy
from serving.statistics import mean
from serving.verdicts import Check, no_regression, no_rise, rate_comparison, relative_mean_comparison
from tenants.models import FeedbackEvent, Interaction, Organization

WAIT, PROMOTE, ROLL_BACK = "wait", "promote", "roll_back"
PENDING = ("edit_accepted",)  # an outcome still to come: persisted or reverted


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
            no_regression("canary", "edit_persisted_rate", rate_comparison(c.persisted, c.interactions, i.persisted, i.interactions),
                          policy.edit_persisted_rate),
            no_rise("canary", "dissatisfied_rate", rate_comparison(c.dissatisfied, c.interactions, i.dissatisfied, i.interactions),
                    policy.dissatisfied_rate),
        ]
        if c.latencies_ms and i.latencies_ms:
            checks.append(no_rise("canary", "latency", relative_mean_comparison(c.latencies_ms, i.latencies_ms), policy.latency,
                                  note="mean ms; interval and threshold relative to the incumbent's mean"))
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
