"""The canary: the candidate's share of end users against the incumbent's, on live traffic,
with the seed's A/B metrics, judged on every tick by the sequential rule of serving.canary_rule.

Each arm is the interactions the gateway served with its version since the canary started whose
outcome is known (serving.live): an accepted edit counts only once it persisted or was reverted,
since that verdict arrives hours later and counting it early would favour whichever arm served
less recently. Invalid tool calls, reported at once, are a rate of every completion served.
"""

from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Avg, Count, F, Q
from django.utils import timezone

from serving import live, taint
from serving.canary_rule import PROMOTE, ROLL_BACK, WAIT, Arm, CanaryReport, canary_decide
from serving.models import AdapterVersion, CanarySettings
from serving.overrides import policy_for, policy_update
from serving.policies import CanaryPolicy
from serving.sequential import Moments
from tenants.models import Organization

__all__ = ["PROMOTE", "ROLL_BACK", "WAIT", "Arm", "CanaryReport", "canary_evaluate", "canary_policy_for", "canary_policy_update"]


def canary_policy_for(org: Organization) -> CanaryPolicy:
    return policy_for(org=org, model=CanarySettings, defaults=_deployment_defaults())


def canary_policy_update(*, org: Organization, changes, actor: str) -> CanaryPolicy:
    """Change the named settings; a canary running now keeps its share and is judged by the rest."""
    return policy_update(org=org, model=CanarySettings, defaults=_deployment_defaults(), changes=changes, actor=actor,
                         action="canary_policy.update")


def _deployment_defaults() -> CanaryPolicy:
    return CanaryPolicy(**settings.CANARY_POLICY)


def canary_evaluate(*, org: Organization, candidate: AdapterVersion, incumbent: AdapterVersion | None,
                    since: datetime, policy: CanaryPolicy) -> CanaryReport:
    arms = _arm(org, candidate.name, since), _arm(org, incumbent.name if incumbent else None, since)
    expired = timezone.now() - since >= timedelta(hours=policy.max_hours)
    repairing = incumbent is not None and incumbent.tainted_at is not None and taint.taint_policy(org) == taint.RETRAIN
    return canary_decide(*arms, policy=policy, out_of_time=expired, repairing=repairing)


def _arm(org: Organization, served_by: str | None, since: datetime) -> Arm:
    """One aggregate query: the arm's counts and its latencies' first two moments, so that a tick
    costs the same however long the canary has run."""
    served = live.gateway_served(org=org, since=since)
    served = served.filter(adapter=served_by) if served_by else served.filter(adapter__isnull=True)
    timed = live.SETTLED & Q(latency_ms__isnull=False)
    row = served.aggregate(**live.outcome_counts(), timed=Count("pk", filter=timed), mean=Avg("latency_ms", filter=timed),
                           square=Avg(F("latency_ms") * F("latency_ms"), filter=timed))
    latency = Moments()
    if row["timed"]:  # population variance from the moments; never below 0 through rounding
        latency = Moments(row["timed"], row["mean"], max(0.0, row["square"] - row["mean"] ** 2))
    return Arm(interactions=row["settled"], persisted=row["persisted"], dissatisfied=row["dissatisfied"], latency=latency,
               served=row["served"], invalid=row["invalid"])
