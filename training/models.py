"""Reward specs, training schedules and training runs: how an organization's feedback becomes
the reward its adapter learns from, and when and how it does."""

import uuid

from django.db import models

from tenants.models import Organization
from tenants.scoping import TenantManager


class RewardSpec(models.Model):
    """One version of an organization's reward spec; a change is a new version, so every
    training run can name the exact spec it used. Fields are documented in training/rewards.py."""

    class OutcomeCredit(models.TextChoices):
        UNIFORM = "uniform"  # every step of the task gets an equal share of the outcome
        DISCOUNTED = "discounted"  # later steps get more: the share of step i grows as discount^(n-1-i)

    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="reward_specs")
    version = models.PositiveIntegerField()
    weights = models.JSONField()  # feedback event type -> reward per event
    latency_penalty_per_s = models.FloatField()
    kl_coef = models.FloatField()
    outcome_credit = models.CharField(max_length=12, choices=OutcomeCredit.choices)
    outcome_discount = models.FloatField()
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.CharField(max_length=200)

    objects = TenantManager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["org", "version"], name="one_reward_spec_per_version")]


class TrainingSchedule(models.Model):
    """When an organization's adapter is retrained on its own; a missing row means the defaults.
    While `enabled`, a run starts when both hold: `cadence_minutes` have passed since the last run
    started, and at least `min_feedback_events` feedback events arrived since the data of the
    last run. Disabled, runs start only when an admin asks."""

    DEFAULT_CADENCE_MINUTES = 300
    DEFAULT_MIN_FEEDBACK_EVENTS = 100

    org = models.OneToOneField(Organization, on_delete=models.CASCADE, primary_key=True, related_name="training_schedule")
    enabled = models.BooleanField(default=True)
    cadence_minutes = models.PositiveIntegerField(default=DEFAULT_CADENCE_MINUTES)
    min_feedback_events = models.PositiveIntegerField(default=DEFAULT_MIN_FEEDBACK_EVENTS)
    updated_at = models.DateTimeField(auto_now=True)

    objects = TenantManager()


def one_active_per_org(statuses: list[str], *, name: str) -> models.UniqueConstraint:
    """At most one of an organization's rows in these statuses: the database refuses a second,
    so two requests at once cannot both start one."""
    return models.UniqueConstraint(fields=["org"], condition=models.Q(status__in=statuses), name=name)


class TrainingRun(models.Model):
    """One LoRA update of an organization's adapter, from the request to the registered candidate.

    Its row is the run's single source of truth, changed only by compare-and-set (training/runs.py):
    a duplicated or redelivered task, or a second worker, can neither start it twice nor register
    two adapters. A worker holds a running run by its heartbeat; one whose heartbeat stops (the
    worker was killed) is taken over by another attempt, which resumes from the checkpoint.
    """

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"  # `candidate` is the adapter version it produced
        FAILED = "failed"  # `error` says why

    ACTIVE = (Status.QUEUED, Status.RUNNING)

    class Trigger(models.TextChoices):
        SCHEDULE = "schedule"  # the organization's training schedule found it due
        REQUEST = "request"  # an admin asked for it (API)
        ERASURE = "erasure"  # erasure tainted the serving version, and the privacy policy says retrain
        UPLOAD = "upload"  # an adapter trained elsewhere was uploaded: its cycle starts at the gates

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="training_runs")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    trigger = models.CharField(max_length=10, choices=Trigger.choices)
    requested_by = models.CharField(max_length=200)
    # What it trains from and on, fixed when first claimed so that every attempt sees the same data:
    # interactions created and feedback received in (since, until].
    incumbent = models.ForeignKey("serving.AdapterVersion", on_delete=models.SET_NULL, null=True, related_name="+")
    # The version it trains from (None: the base model): the incumbent, or, when erasure tainted
    # the incumbent, its newest untainted ancestor (serving/taint.py).
    parent = models.ForeignKey("serving.AdapterVersion", on_delete=models.SET_NULL, null=True, related_name="+")
    reward_spec_version = models.PositiveIntegerField(null=True)
    since = models.DateTimeField(null=True)
    until = models.DateTimeField(null=True)
    # Lineage: exactly which interactions, and a hash of their ids, rewards and tokens.
    interaction_ids = models.JSONField(default=list)
    dataset_sha256 = models.CharField(max_length=64, blank=True)
    dataset = models.JSONField(null=True)  # examples, off-policy examples, interactions skipped by reason
    candidate = models.OneToOneField("serving.AdapterVersion", on_delete=models.SET_NULL, null=True, related_name="training_run")
    report = models.JSONField(null=True)  # the engine's TrainReport
    error = models.TextField(blank=True)
    attempts = models.PositiveIntegerField(default=0)
    heartbeat_at = models.DateTimeField(null=True)  # the running attempt's last sign of life
    enqueued_at = models.DateTimeField(null=True)  # when its task was last sent
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True)
    finished_at = models.DateTimeField(null=True)

    objects = TenantManager()

    class Meta:
        constraints = [one_active_per_org(["queued", "running"], name="one_active_training_run_per_org")]


class Cycle(models.Model):
    """One turn of an organization's loop: train a candidate, gate it, canary it, then promote
    or roll back (training/cycles.py). Every transition is a compare-and-set on `status`."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"  # its training run is queued or running
        GATING = "gating"  # the candidate is being checked offline
        CANARY = "canary"  # the candidate serves a share of the organization's end users
        PROMOTED = "promoted"  # the candidate serves everyone
        BLOCKED = "blocked"  # a gate refused it
        ROLLED_BACK = "rolled_back"  # the canary showed it worse; the incumbent serves everyone
        FAILED = "failed"  # `error` says why

    ACTIVE = (Status.QUEUED, Status.RUNNING, Status.GATING, Status.CANARY)

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="cycles")
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.QUEUED)
    trigger = models.CharField(max_length=10, choices=TrainingRun.Trigger.choices)
    requested_by = models.CharField(max_length=200)
    training_run = models.OneToOneField(TrainingRun, on_delete=models.SET_NULL, null=True, related_name="cycle")
    incumbent = models.ForeignKey("serving.AdapterVersion", on_delete=models.SET_NULL, null=True, related_name="+")
    candidate = models.ForeignKey("serving.AdapterVersion", on_delete=models.SET_NULL, null=True, related_name="+")
    gate_report = models.JSONField(null=True)
    canary_report = models.JSONField(null=True)
    canary_started_at = models.DateTimeField(null=True)
    error = models.TextField(blank=True)
    stage_seconds = models.JSONField(default=dict)  # train, gates, canary: wall time of each stage
    gate_turn = models.PositiveIntegerField(default=0)  # the gates' turns taken so far: a duplicate turn's message is dropped
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True)

    objects = TenantManager()

    class Meta:
        constraints = [one_active_per_org(["queued", "running", "gating", "canary"], name="one_active_cycle_per_org")]
