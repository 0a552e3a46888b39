"""Reward specs: how an organization's feedback becomes the reward its adapter learns from."""

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
