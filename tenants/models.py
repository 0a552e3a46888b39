"""Organizations and everything recorded for them.

Every table below `Organization` carries an `org` foreign key and a `TenantManager`
(tenants/scoping.py), so each read names the organization it is for. Content (prompts,
completions, logprobs) is stored only as ciphertext under the organization's data key.
"""

import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone

from tenants.scoping import TenantManager


class Role(models.TextChoices):
    OWNER = "owner"
    ADMIN = "admin"
    VIEWER = "viewer"


ROLE_RANK = {Role.VIEWER: 0, Role.ADMIN: 1, Role.OWNER: 2}


def role_at_least(role: str, needed: str) -> bool:
    return ROLE_RANK[Role(role)] >= ROLE_RANK[Role(needed)]


class Organization(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    slug = models.SlugField(max_length=63, unique=True)
    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.slug


class Membership(models.Model):
    # The API's id: the row's own is a sequence shared by every organization, which would let one
    # count the others' members.
    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=10, choices=Role.choices)
    created_at = models.DateTimeField(auto_now_add=True)
    # Null while it waits for its person: added to an account that already has a password, it
    # grants nothing until they accept its link, logged in (tenants/invitations.py).
    joined_at = models.DateTimeField(default=timezone.now, null=True)

    objects = TenantManager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["org", "user"], name="one_membership_per_user")]


class Invitation(models.Model):
    """A single-use link that lets a member set their password and enter the console
    (tenants/invitations.py). Only the token's SHA-256 is kept, like an API key's."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="invitations")
    # Removing the member removes their links with them.
    membership = models.ForeignKey(Membership, on_delete=models.CASCADE, related_name="invitations")
    token_hash = models.CharField(max_length=64, unique=True)
    created_by = models.CharField(max_length=200)  # the actor, as in the audit log
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    accepted_at = models.DateTimeField(null=True)

    objects = TenantManager()


class ApiKey(models.Model):
    """A bearer key. Only its SHA-256 is kept: keys are 256-bit random, so a slow hash adds
    nothing, and a fast one keeps authentication to one indexed lookup."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=100)
    role = models.CharField(max_length=10, choices=Role.choices)
    prefix = models.CharField(max_length=16)  # shown in lists so admins can tell keys apart
    key_hash = models.CharField(max_length=64, unique=True)
    created_by = models.CharField(max_length=200)  # the actor, as in the audit log
    # The key this one was made with, if any: revoking a key revokes what was minted with it.
    minted_by = models.ForeignKey("self", on_delete=models.SET_NULL, null=True, related_name="minted")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)  # the gateway and the API read the newest (tenants/key_hashes.py)
    last_used_at = models.DateTimeField(null=True)
    revoked_at = models.DateTimeField(null=True)

    objects = TenantManager()


class PrivacyPolicy(models.Model):
    org = models.OneToOneField(Organization, on_delete=models.CASCADE, primary_key=True, related_name="privacy_policy")
    # No training on a customer's data unless they opt in.
    training_enabled = models.BooleanField(default=False)
    # Off is zero-retention mode: metrics and feedback only, never text.
    store_content = models.BooleanField(default=True)
    retention_days = models.PositiveIntegerField(default=30)
    redact = models.BooleanField(default=True)
    # What follows when erasure reaches an adapter version trained on the erased content
    # (serving/taint.py): retrain from the newest untainted ancestor, or keep serving it.
    tainted_adapters = models.CharField(max_length=8, choices=[("retrain", "retrain"), ("keep", "keep")], default="retrain")
    updated_at = models.DateTimeField(auto_now=True)

    objects = TenantManager()


class AuditEvent(models.Model):
    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)  # the API's id, like Membership's
    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="audit_events")
    at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.CharField(max_length=200)
    action = models.CharField(max_length=64)
    target = models.CharField(max_length=200, blank=True)
    before = models.JSONField(null=True)
    after = models.JSONField(null=True)

    objects = TenantManager()


class DataKey(models.Model):
    """One version of an organization's data key, wrapped by a master key.

    Ciphertexts name the version that sealed them, so reads keep working while `rotate_keys`
    re-encrypts; only the newest version is `active` for writes.
    """

    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="data_keys")
    version = models.PositiveIntegerField()
    wrapped = models.BinaryField()
    master_key_id = models.CharField(max_length=64)
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    retired_at = models.DateTimeField(null=True)

    objects = TenantManager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["org", "version"], name="one_data_key_per_version"),
            models.UniqueConstraint(
                fields=["org"], condition=models.Q(active=True), name="one_active_data_key"
            ),
        ]


class BackgroundTask(models.Model):
    """A long-running agent task: many interactions, one outcome that arrives much later."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="background_tasks")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    objects = TenantManager()


class Interaction(models.Model):
    """One completion. Metrics are plaintext; `content` is ciphertext or NULL (never stored,
    purged by retention, or erased)."""

    class Source(models.TextChoices):
        GATEWAY = "gateway"
        API = "api"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # Indexed by the (org, created_at) index below, which serves every org-scoped query.
    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="interactions", db_index=False)
    created_at = models.DateTimeField(auto_now_add=True)
    source = models.CharField(max_length=10, choices=Source.choices)
    adapter = models.CharField(max_length=100, null=True)  # served name, e.g. "acme@v3"; null: base
    task = models.ForeignKey(BackgroundTask, on_delete=models.SET_NULL, null=True, related_name="interactions")
    latency_ms = models.FloatField(null=True)
    prompt_tokens = models.PositiveIntegerField(null=True)
    completion_tokens = models.PositiveIntegerField(null=True)
    redactions = models.PositiveIntegerField(default=0)
    # A stream its client dropped: what was generated until then, recorded so that feedback on
    # it (`interrupted`, say) has something to land on.
    interrupted = models.BooleanField(default=False)
    content = models.BinaryField(null=True)
    content_key_version = models.PositiveIntegerField(null=True)
    content_purged_at = models.DateTimeField(null=True)
    # Which kinds of feedback arrived, one bit per kind (feedback_bit): the overview counts
    # interactions with an edit persisted, per hour, without joining every event.
    feedback_seen = models.PositiveIntegerField(default=0)

    objects = TenantManager()

    class Meta:
        indexes = [
            models.Index(fields=["org", "created_at"]),
            models.Index(fields=["org", "content_key_version"]),
        ]


class FeedbackEvent(models.Model):
    class Type(models.TextChoices):
        EDIT_ACCEPTED = "edit_accepted"
        EDIT_REJECTED = "edit_rejected"
        EDIT_PERSISTED = "edit_persisted"
        EDIT_REVERTED = "edit_reverted"
        DISSATISFIED_FOLLOWUP = "dissatisfied_followup"
        CLARIFICATION_ANSWERED = "clarification_answered"
        TOOL_CALL_INVALID = "tool_call_invalid"
        INTERRUPTED = "interrupted"
        TASK_OUTCOME = "task_outcome"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # Indexed by the (org, idempotency_key) constraint: fewer indexes, faster batch inserts.
    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="feedback_events", db_index=False)
    interaction = models.ForeignKey(Interaction, on_delete=models.CASCADE, null=True, related_name="feedback_events")
    task = models.ForeignKey(BackgroundTask, on_delete=models.CASCADE, null=True, related_name="feedback_events")
    type = models.CharField(max_length=32, choices=Type.choices)
    value = models.FloatField(null=True)
    idempotency_key = models.CharField(max_length=200)
    occurred_at = models.DateTimeField()
    received_at = models.DateTimeField()

    objects = TenantManager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["org", "idempotency_key"], name="feedback_idempotent_per_org"),
            models.CheckConstraint(
                condition=models.Q(interaction__isnull=False) | models.Q(task__isnull=False),
                name="feedback_is_about_something",
            ),
            # A background task has one outcome, even when two deliveries race.
            models.UniqueConstraint(
                fields=["task"], condition=models.Q(type="task_outcome", task__isnull=False), name="one_outcome_per_task"
            ),
        ]
        indexes = [models.Index(fields=["org", "received_at"])]


def feedback_bit(kind: str) -> int:
    """The bit of Interaction.feedback_seen that says an event of this kind arrived. Stored:
    a new kind is added at the end of FeedbackEvent.Type, never in between."""
    return 1 << FeedbackEvent.Type.values.index(kind)


class StorageUsage(models.Model):
    """What an organization's recorded interactions occupy, kept in step with every write,
    purge and erasure (tenants/storage.py), against its quota."""

    org = models.OneToOneField(Organization, on_delete=models.CASCADE, primary_key=True, related_name="storage_usage")
    used_bytes = models.BigIntegerField(default=0)
    quota_bytes = models.BigIntegerField(null=True)  # None: the deployment's (settings.STORAGE_QUOTA_BYTES)

    objects = TenantManager()
