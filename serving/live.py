"""How each model does on an organization's live traffic: the outcomes of the completions the
gateway served with it, by version. The canary judges its two arms on these counts while it
runs (serving.canary); they go on being counted for as long as a version serves, so an admin
sees whether what the gates measured on their suite holds for real users, invalid tool calls
above all.

Only completions the gateway served count: a recording through the API names its adapter and
latency itself, and any key may make one. An accepted edit's outcome is known only once it
persisted or was reverted, hours later: the rates of outcomes are of the completions whose outcome
is known ("settled"), so that a version that served a moment ago is not judged before its outcomes
arrive. Invalid tool calls are the exception: a caller reports one as soon as it fails to parse,
so their rate is of every completion served; of the settled ones it would be overstated, since an
invalid call settles at once and an accepted edit hours later.
"""

from dataclasses import dataclass
from datetime import datetime
from functools import reduce
from operator import or_

from django.conf import settings
from django.db.models import Avg, Count, F, Q, QuerySet
from django.db.models.lookups import GreaterThan

from tenants.models import FeedbackEvent, Interaction, Organization, feedback_bit

PENDING = ("edit_accepted",)  # an outcome still to come: persisted or reverted
_SETTLING = reduce(or_, (feedback_bit(kind) for kind in FeedbackEvent.Type.values if kind not in PENDING))


@dataclass(frozen=True)
class LiveFigures:
    model: str  # the served name: <org>@v<N>, or the base model's
    adapter: str | None  # None: the base model
    served: int  # completions the gateway served with it
    settled: int  # of those, the ones whose outcome is known: what the outcomes' rates are of
    edit_persisted: int
    dissatisfied: int  # dissatisfied follow-ups
    tool_call_invalid: int  # invalid tool calls, as the callers reported them (at once: rated per served)
    latency_mean_ms: float | None

    @property
    def edit_persisted_rate(self) -> float | None:
        return _rate(self.edit_persisted, self.settled)

    @property
    def dissatisfied_rate(self) -> float | None:
        return _rate(self.dissatisfied, self.settled)

    @property
    def tool_call_invalid_rate(self) -> float | None:
        return _rate(self.tool_call_invalid, self.served)


def _rate(count: int, of: int) -> float | None:
    return count / of if of else None


def got(*kinds: str) -> Q:
    """Interactions that got feedback of any of these kinds: told by their own row
    (Interaction.feedback_seen), with no look at the feedback table."""
    return Q(GreaterThan(F("feedback_seen").bitand(reduce(or_, map(feedback_bit, kinds))), 0))


SETTLED = Q(GreaterThan(F("feedback_seen").bitand(_SETTLING), 0))


def gateway_served(*, org: Organization, since: datetime) -> QuerySet[Interaction]:
    """The completions the gateway served since `since`."""
    return Interaction.objects.for_org(org).filter(created_at__gte=since, source=Interaction.Source.GATEWAY)


def outcome_counts() -> dict:
    """A model's completions and what came of them, as aggregates: the live figures take them by
    version, the canary per arm (serving.canary). Outcomes are counted of the settled ones,
    invalid tool calls of every one served."""
    return {"served": Count("pk"), "settled": Count("pk", filter=SETTLED),
            "persisted": Count("pk", filter=SETTLED & got("edit_persisted")),
            "dissatisfied": Count("pk", filter=SETTLED & got("dissatisfied_followup")),
            "invalid": Count("pk", filter=got("tool_call_invalid"))}


def live_figures(*, org: Organization, since: datetime) -> list[LiveFigures]:
    """Every model that served the organization since `since`, the base model first, then by
    version; one GROUP BY over the interactions alone."""
    rows = (gateway_served(org=org, since=since).order_by().values("adapter")
            .annotate(**outcome_counts(), latency=Avg("latency_ms", filter=SETTLED)))
    figures = [LiveFigures(model=row["adapter"] or settings.SERVING_BASE_MODEL_NAME, adapter=row["adapter"], served=row["served"],
                           settled=row["settled"], edit_persisted=row["persisted"], dissatisfied=row["dissatisfied"],
                           tool_call_invalid=row["invalid"], latency_mean_ms=row["latency"]) for row in rows]
    return sorted(figures, key=lambda f: (f.adapter is not None, version_number(f.adapter or "")))


def version_number(name: str) -> int:
    """`acme@v12` → 12, 0 for a name of no version: versions in the order they were made, not as strings."""
    number = name.rpartition("@v")[2]
    return int(number) if number.isdigit() else 0
