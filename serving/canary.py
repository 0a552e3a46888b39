"""The canary: the candidate's share of end users against the incumbent's, on live traffic,
with the seed's A/B metrics, judged on every tick by the sequential rule of serving.canary_rule.

Each arm is the interactions the gateway served with its version since the canary started whose
outcome is known: an accepted edit counts only once it persisted or was reverted, since that
verdict arrives hours later and counting it early would favour whichever arm served less recently.
"""

from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Exists, OuterRef
from django.utils import timezone

from serving import taint
from serving.canary_rule import PROMOTE, ROLL_BACK, WAIT, Arm, CanaryReport, canary_decide
from serving.models import AdapterVersion, CanarySettings
from serving.overrides import policy_for, policy_update
from serving.policies import CanaryPolicy
from serving.sequential import Moments
from tenants.models import FeedbackEvent, Interaction, Organization

__all__ = ["PROMOTE", "ROLL_BACK", "WAIT", "Arm", "CanaryReport", "canary_evaluate", "canary_policy_for", "canary_policy_update"]

PENDING = ("edit_accepted",)  # an outcome still to come: persisted or reverted


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
    # Served by the gateway only: a recording through the API names its adapter and latency
    # itself, and any key may make one.
    interactions = Interaction.objects.for_org(org).filter(created_at__gte=since, source=Interaction.Source.GATEWAY)
    interactions = interactions.filter(adapter=served_by) if served_by else interactions.filter(adapter__isnull=True)

    def has(*types: str):
        return Exists(FeedbackEvent.objects.for_org(org).filter(interaction=OuterRef("pk"), type__in=types))

    settled = Exists(FeedbackEvent.objects.for_org(org).filter(interaction=OuterRef("pk")).exclude(type__in=PENDING))
    rows = (interactions.annotate(settled=settled, persisted=has("edit_persisted"), dissatisfied=has("dissatisfied_followup"))
            .filter(settled=True).values_list("persisted", "dissatisfied", "latency_ms"))
    rows = list(rows)
    return Arm(interactions=len(rows), persisted=sum(p for p, _, _ in rows), dissatisfied=sum(d for _, d, _ in rows),
               latency=Moments.of(latency for _, _, latency in rows if latency is not None))
