"""Reads of an organization's lists, for the API and the console alike: each takes the
organization first and returns a query scoped to it, in the order the pages show it."""

from dataclasses import dataclass
from datetime import UTC, datetime

from django.db import connection
from django.db.models import Avg, Count, Exists, F, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Length, Substr, Trunc
from django.db.models.lookups import GreaterThan

from tenants.models import ApiKey, AuditEvent, BackgroundTask, FeedbackEvent, Interaction, Membership, Organization, feedback_bit


def audit_events_list(*, org: Organization) -> QuerySet[AuditEvent]:
    return AuditEvent.objects.for_org(org)


def members_list(*, org: Organization) -> QuerySet[Membership]:
    return Membership.objects.for_org(org).select_related("user").order_by("pk")


REVOKED_KEYS_LISTED = 100  # the newest revoked: keys in use are capped (settings.MAX_API_KEYS), revoked ones are not


def api_keys_list(*, org: Organization) -> list[ApiKey]:
    """The keys in use, then the most recently revoked, oldest first."""
    keys = ApiKey.objects.for_org(org)
    revoked = keys.filter(revoked_at__isnull=False).order_by("-revoked_at").values("pk")[:REVOKED_KEYS_LISTED]
    return list(keys.filter(Q(revoked_at__isnull=True) | Q(pk__in=revoked)).order_by("created_at"))


def api_keys_in_use(*, org: Organization) -> int:
    return ApiKey.objects.for_org(org).filter(revoked_at__isnull=True).count()


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
class ServedPeriod:
    """What one served version did in one period (an hour, or a minute)."""

    start: datetime
    adapter: str | None  # None: the base model
    interactions: int
    latency_ms: float | None  # mean, of those that have one
    with_feedback: dict  # feedback type (PLOTTED_FEEDBACK) -> interactions with at least one event of it


# Periods the overview plots by, with the length of their prefix in SQLite's stored text of a UTC
# time ("2026-12-03 10:15:..."): cut in C, where Django truncates with a Python function per row
# (0.5 s for 100,000 rows).
PERIODS = {"hour": (13, "%Y-%m-%d %H"), "minute": (16, "%Y-%m-%d %H:%M")}


def interactions_by_period(*, org: Organization, since: datetime, period: str = "hour") -> list[ServedPeriod]:
    """Per period and served version since `since`, oldest first: interactions, mean latency,
    and how many got each plotted kind of feedback. One GROUP BY over the interactions alone,
    whatever the number of rows: each knows the kinds of feedback it got (Interaction.feedback_seen)."""
    length, text_format = PERIODS[period]
    start = Substr("created_at", 1, length) if connection.vendor == "sqlite" else Trunc("created_at", period)
    with_kind = {kind: Count("pk", filter=GreaterThan(F("feedback_seen").bitand(feedback_bit(kind)), 0)) for kind in PLOTTED_FEEDBACK}
    rows = (Interaction.objects.for_org(org).filter(created_at__gte=since).annotate(start=start)
            .values("start", "adapter").annotate(n=Count("pk"), latency=Avg("latency_ms"), **with_kind).order_by("start", "adapter"))
    return [ServedPeriod(_as_time(row["start"], text_format), row["adapter"], row["n"], row["latency"],
                         {kind: row[kind] for kind in PLOTTED_FEEDBACK}) for row in rows]


def first_interaction_at(*, org: Organization, since: datetime) -> datetime | None:
    """When the first interaction since `since` was recorded (the (org, created_at) index's first entry)."""
    return Interaction.objects.for_org(org).filter(created_at__gte=since).order_by("created_at").values_list("created_at", flat=True).first()


def _as_time(value, text_format: str) -> datetime:
    if isinstance(value, str):  # SQLite: the prefix of a UTC time
        return datetime.strptime(value, text_format).replace(tzinfo=UTC)
    return value
