"""Adapter versions and the routing table that says which one serves an organization.

An adapter version is immutable once registered: its served name (`<org>@v<N>`) always means
the same weights, because vLLM keys its prefix cache on the name. Promotion and rollback move
the route, never the files.
"""

import uuid

from django.db import models

from tenants.models import Organization
from tenants.scoping import TenantManager


class AdapterVersion(models.Model):
    class Status(models.TextChoices):
        CANDIDATE = "candidate"  # registered, not yet through the gates
        CANARY = "canary"  # serving a share of the organization's traffic
        SERVING = "serving"  # the organization's incumbent
        BLOCKED = "blocked"  # refused by a gate; never served
        RETIRED = "retired"  # served once, replaced since

    class Origin(models.TextChoices):
        TRAINED = "trained"  # by this platform's training runs
        UPLOADED = "uploaded"  # trained elsewhere, uploaded as a PEFT directory (serving/uploads.py)

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="adapter_versions")
    version = models.PositiveIntegerField()
    name = models.CharField(max_length=100, unique=True)  # "<org slug>@v<version>", what clients and vLLM see
    base_model = models.CharField(max_length=200)  # the base it was trained on; loading onto another is refused
    path = models.CharField(max_length=300)  # relative to SERVING_ADAPTERS_ROOT; resolved and confined there
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.CANDIDATE)
    # Lineage, filled by training: what it was trained from and on.
    parent = models.ForeignKey("self", on_delete=models.SET_NULL, null=True, related_name="children")
    dataset_sha256 = models.CharField(max_length=64, blank=True)
    reward_spec_version = models.PositiveIntegerField(null=True)  # the reward spec its training used
    origin = models.CharField(max_length=10, choices=Origin.choices, default=Origin.TRAINED)
    gate_report = models.JSONField(null=True)
    # Erasure reached it (serving/taint.py): content it was trained on, or an ancestor's, is gone.
    tainted_at = models.DateTimeField(null=True)
    taint = models.JSONField(null=True)  # why, in counts: {"erased": n, "purged": n, "zero_retention": n, "via": ancestor}
    weights_deleted_at = models.DateTimeField(null=True)  # a tainted version retired under the retrain policy
    # What this version replaced when it was last deployed (None: the base model); rollback
    # returns there, so successive rollbacks walk back through the deployment history.
    replaced = models.ForeignKey("self", on_delete=models.SET_NULL, null=True, related_name="+")
    deployed_at = models.DateTimeField(null=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TenantManager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["org", "version"], name="one_adapter_per_version")]

    def __str__(self) -> str:
        return self.name


class TrainedOn(models.Model):
    """One interaction an adapter version was trained on: its lineage, as rows, so that an
    erasure finds the versions it reaches by an index rather than by reading every run."""

    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+", db_index=False)
    adapter = models.ForeignKey(AdapterVersion, on_delete=models.CASCADE, related_name="trained_on")
    # Not a foreign key: the interaction may be erased, and its id must still name it here.
    interaction_id = models.UUIDField()

    objects = TenantManager()

    class Meta:
        indexes = [models.Index(fields=["org", "interaction_id"])]


class Route(models.Model):
    """What an organization's `model="default"` is served by: its incumbent (None: the base
    model) and, during a canary, a candidate taking `canary_share` of the end users."""

    org = models.OneToOneField(Organization, on_delete=models.CASCADE, primary_key=True, related_name="route")
    # RESTRICT: a routed version cannot be deleted on its own, only with its organization.
    serving = models.ForeignKey(AdapterVersion, on_delete=models.RESTRICT, null=True, related_name="+")
    canary = models.ForeignKey(AdapterVersion, on_delete=models.RESTRICT, null=True, related_name="+")
    canary_share = models.FloatField(default=0.0)
    updated_at = models.DateTimeField(auto_now=True)

    objects = TenantManager()


class TrafficLimits(models.Model):
    """An organization's share of the gateway; a missing row or field means the default of
    serving.policies.Limits with settings.GATEWAY_LIMITS over it. Enforced per gateway process
    (docs/api.md, "Limits")."""

    org = models.OneToOneField(Organization, on_delete=models.CASCADE, primary_key=True, related_name="traffic_limits")
    requests_per_minute = models.PositiveIntegerField(null=True)
    tokens_per_minute = models.PositiveIntegerField(null=True)  # prompt + completion tokens
    max_concurrent = models.PositiveIntegerField(null=True)  # requests in flight at once
    # What the platform's operator granted above the deployment's defaults, by setting: the most
    # the organization's own admins may set (serving/traffic.py).
    granted = models.JSONField(default=dict)

    objects = TenantManager()


class Alert(models.Model):
    """Something an organization's admins must see: today, a hacking detector that fired on a
    candidate (which was blocked), with the detector's figures."""

    class Kind(models.TextChoices):
        REWARD_HACKING = "reward_hacking"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="alerts")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    adapter = models.ForeignKey(AdapterVersion, on_delete=models.CASCADE, related_name="alerts")
    message = models.TextField()
    figures = models.JSONField()  # the checks that fired, as in the gate report
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    acknowledged_at = models.DateTimeField(null=True)  # open while null
    acknowledged_by = models.CharField(max_length=200, blank=True)  # the actor, as in the audit log

    objects = TenantManager()


class PolicyOverrides(models.Model):
    """An organization's own values for some of a policy's settings (serving.overrides); a
    missing row or key means the default."""

    values = models.JSONField(default=dict)
    updated_at = models.DateTimeField(auto_now=True)

    objects = TenantManager()

    class Meta:
        abstract = True


class GateThresholds(PolicyOverrides):
    """Of serving.policies.Thresholds: the gates' tolerances."""

    org = models.OneToOneField(Organization, on_delete=models.CASCADE, primary_key=True, related_name="gate_thresholds")


class CanarySettings(PolicyOverrides):
    """Of serving.policies.CanaryPolicy."""

    org = models.OneToOneField(Organization, on_delete=models.CASCADE, primary_key=True, related_name="canary_settings")


class SuiteResult(models.Model):
    """One pass of a model over the gates' global suite: its scored responses, sampled once. A
    version's weights never change, so the passes of its gate run as a candidate serve again
    when it is the incumbent, and the base model's serve every organization. Passes are fresh
    draws at temperature 1; the gates take more of them when the first cannot decide."""

    suite = models.CharField(max_length=64)  # fingerprint of the suite's prompts and sampling settings
    model = models.CharField(max_length=300)  # the served name; for the base, with its directory's fingerprint
    sample_pass = models.PositiveIntegerField(default=0)  # 0, 1, ...: the passes of one model over one suite
    adapter = models.ForeignKey(AdapterVersion, on_delete=models.CASCADE, null=True, related_name="+")  # None: the base
    verdicts = models.JSONField()  # per suite item, in order: {"kind", "correct", "tokens"}
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["suite", "model", "sample_pass"], name="one_result_per_model_suite_and_pass")]
