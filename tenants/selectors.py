"""Reads of an organization's lists, for the API and the console alike: each takes the
organization first and returns a query scoped to it, in the order the pages show it."""

from dataclasses import dataclass
from datetime import UTC, datetime

from django.db import connection
from django.db.models import Avg, Count, Exists, F, OuterRef, QuerySet, Subquery
from django.db.models.functions import Length, Substr, TruncHour
from django.db.models.lookups import GreaterThan

from tenants.models import ApiKey, AuditEvent, BackgroundTask, FeedbackEvent, Interaction, Membership, Organization, feedback_bit


def audit_events_list(*, org: Organization) -> QuerySet[AuditEvent]:
    return AuditEvent.objects.for_org(org)


def members_list(*, org: Organization) -> QuerySet[Membership]:
    return Membership.objects.for_org(org).select_related("user").order_by("pk")


def api_keys_list(*, org: Organization) -> QuerySet[ApiKey]:
    return ApiKey.objects.for_org(org).order_by("created_at")


def interactions_list(*, org: Organization, filters: dict | None = None, feedback_type: str | None = None) -> QuerySet[Interaction]:
    """Filters are field lookups already validated by the caller (adapter, task_id, ...);
    `feedback_type` keeps the interactions with at least one event of that type. The content
    is left in the database, its size annotated (`content_size`): a page chooses its rows by
    it, then reads their content with `interaction_contents`."""
    interactions = Interaction.objects.for_org(org).select_related("org").filter(**(filters or {}))
    if feedback_type is not None:
        events = FeedbackEvent.objects.for_org(org).filter(interaction=OuterRef("pk"), type=feedback_type)
        interactions = interactions.filter(Exists(events))
    return interactions.defer("content").annotate(content_size=Length("content"))


def stored_content_count(*, org: Organization) -> int:
    """Interactions whose text is still stored: what zero retention would purge."""
    return Interaction.objects.for_org(org).filter(content__isnull=False).count()


def interaction_contents(*, org: Organization, ids: list) -> dict:
    """The sealed content of these interactions, by id (None where there is none)."""
    return dict(Interaction.objects.for_org(org).filter(pk__in=ids).values_list("pk", "content"))


def feedback_list(*, org: Organization, filters: dict | None = None) -> QuerySet[FeedbackEvent]:
    return FeedbackEvent.objects.for_org(org).filter(**(filters or {}))


def feedback_types_of(*, org: Organization, ids: list) -> dict:
    """The types of feedback each of these interactions got, in the order it arrived, by id."""
    types: dict = {}
    for interaction_id, kind in (FeedbackEvent.objects.for_org(org).filter(interaction_id__in=ids)
                                 .order_by("received_at").values_list("interaction_id", "type")):
        types.setdefault(interaction_id, []).append(kind)
    return types


def interaction_feedback(*, interaction: Interaction) -> QuerySet[FeedbackEvent]:
    return FeedbackEvent.objects.for_org(interaction.org).filter(interaction=interaction).order_by("occurred_at")


def task_steps(*, task: BackgroundTask) -> QuerySet[Interaction]:
    """The task's interactions in the order they happened: its steps."""
    return interactions_list(org=task.org, filters={"task": task}).order_by("created_at")


def tasks_list(*, org: Organization) -> QuerySet[BackgroundTask]:
    """The organization's tasks with their outcome (if it arrived) and number of interactions."""
    outcome = FeedbackEvent.objects.for_org(org).filter(task=OuterRef("pk"), type=FeedbackEvent.Type.TASK_OUTCOME)
    return BackgroundTask.objects.for_org(org).annotate(
        outcome=Subquery(outcome.values("value")[:1]),
        outcome_at=Subquery(outcome.values("received_at")[:1]),
        interaction_count=Count("interactions"),
    )


# The feedback the console plots, as a share of the interactions served.
PLOTTED_FEEDBACK = ("edit_persisted", "dissatisfied_followup", "tool_call_invalid")


@dataclass
class HourOfVersion:
    """What one served version did in one hour."""

    hour: datetime
    adapter: str | None  # None: the base model
    interactions: int
    latency_ms: float | None  # mean, of those that have one
    with_feedback: dict  # feedback type (PLOTTED_FEEDBACK) -> interactions with at least one event of it


def interaction_hours(*, org: Organization, since: datetime) -> list[HourOfVersion]:
    """Per hour and served version since `since`, oldest first: interactions, mean latency, and
    how many got each plotted kind of feedback. One GROUP BY over the interactions alone, whatever
    the number of rows: each knows the kinds of feedback it got (Interaction.feedback_seen)."""
    with_kind = {kind: Count("pk", filter=GreaterThan(F("feedback_seen").bitand(feedback_bit(kind)), 0)) for kind in PLOTTED_FEEDBACK}
    rows = (Interaction.objects.for_org(org).filter(created_at__gte=since).annotate(hour=_hour_of("created_at"))
            .values("hour", "adapter").annotate(n=Count("pk"), latency=Avg("latency_ms"), **with_kind).order_by("hour", "adapter"))
    return [HourOfVersion(_as_hour(row["hour"]), row["adapter"], row["n"], row["latency"], {kind: row[kind] for kind in PLOTTED_FEEDBACK})
            for row in rows]


def _hour_of(field: str):
    # SQLite keeps UTC times as text, and Django truncates them with a Python function called
    # per row (0.5 s for 100,000 rows); the text's first 13 characters are the hour, cut in C.
    return Substr(field, 1, 13) if connection.vendor == "sqlite" else TruncHour(field)


def _as_hour(value) -> datetime:
    if isinstance(value, str):  # SQLite: "2026-12-03 10", UTC
        return datetime.strptime(value, "%Y-%m-%d %H").replace(tzinfo=UTC)
    return value
