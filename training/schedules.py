"""Training schedules: when an organization's adapter is retrained on its own.

While a schedule is enabled, a run is due when both hold: its cadence has passed since the last
run started (failed ones too, so that a failing organization is not retried every minute), and
enough feedback arrived since the data of the last successful run.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import ClassVar

from django.db import transaction

from tenants.audit import audit_record
from tenants.models import FeedbackEvent, Organization
from tenants.ranges import check, policy_changed, policy_values, settings_of
from training.models import TrainingRun, TrainingSchedule
from training.runs import last_window_end


@dataclass(frozen=True)
class Schedule:
    """An organization's schedule settings; the model's defaults for one that never set them."""

    enabled: bool = True
    cadence_minutes: int = TrainingSchedule.DEFAULT_CADENCE_MINUTES
    min_feedback_events: int = TrainingSchedule.DEFAULT_MIN_FEEDBACK_EVENTS

    HELP: ClassVar[dict[str, str]] = {
        "enabled": "Off: runs start only when an admin asks (POST /api/v1/training-runs).",
        "cadence_minutes": "The least time between the starts of two scheduled runs.",
        "min_feedback_events": "The least feedback events since the last run's data that make a run worth it.",
    }

    RANGES: ClassVar[dict[str, tuple[float, float]]] = {"cadence_minutes": (1, 7 * 24 * 60), "min_feedback_events": (1, 1_000_000)}

    def __post_init__(self) -> None:
        check(self)


def schedule_get(*, org: Organization) -> TrainingSchedule:
    """The organization's schedule; an unsaved one with the defaults when it never set one."""
    return TrainingSchedule.objects.for_org(org).first() or TrainingSchedule(org=org)


def schedule_update(*, org: Organization, changes, actor: str) -> TrainingSchedule:
    """Change the named settings, or refuse them all (PolicyError naming each bad one); audited."""
    with transaction.atomic():
        schedule = schedule_get(org=org)
        before = {name: getattr(schedule, name) for name in settings_of(Schedule)}
        after = policy_values(policy_changed(Schedule(**before), changes))
        if after == before:  # nothing to save, nor to audit
            return schedule
        for name, value in after.items():
            setattr(schedule, name, value)
        schedule.save()
        audit_record(org=org, actor=actor, action="training_schedule.update", before=before, after=after)
    return schedule


@dataclass(frozen=True)
class NextRun:
    """When the schedule will next start a run on its own (None: not while it is disabled)."""

    not_before: datetime | None  # the cadence's earliest start
    feedback_needed: int  # events still to arrive before a run is worth it


def schedule_next(*, org: Organization, now: datetime) -> NextRun:
    schedule = schedule_get(org=org)
    if not schedule.enabled:
        return NextRun(not_before=None, feedback_needed=0)
    last = TrainingRun.objects.for_org(org).order_by("-created_at").first()
    not_before = max(now, last.created_at + timedelta(minutes=schedule.cadence_minutes)) if last else now
    new_feedback = FeedbackEvent.objects.for_org(org)
    if since := last_window_end(org):
        new_feedback = new_feedback.filter(received_at__gt=since)
    arrived = new_feedback[: schedule.min_feedback_events].count()
    return NextRun(not_before=not_before, feedback_needed=schedule.min_feedback_events - arrived)


def run_due(*, org: Organization, now: datetime) -> bool:
    """Whether the schedule asks for a run now (see the module's docstring)."""
    schedule = schedule_get(org=org)
    runs = TrainingRun.objects.for_org(org)
    if not schedule.enabled or runs.filter(status__in=TrainingRun.ACTIVE).exists():
        return False
    last = runs.order_by("-created_at").first()
    if last is not None and now - last.created_at < timedelta(minutes=schedule.cadence_minutes):
        return False
    new_feedback = FeedbackEvent.objects.for_org(org)
    if since := last_window_end(org):
        new_feedback = new_feedback.filter(received_at__gt=since)
    return new_feedback[: schedule.min_feedback_events].count() >= schedule.min_feedback_events
