"""Privacy policies: read, change (audited), and what a change sets in motion."""

from django.db import transaction

from tenants.audit import audit_record
from tenants.errors import InvalidInput
from tenants.models import Organization, PrivacyPolicy
from tenants.retention import content_purge_all

MAX_RETENTION_DAYS = 3650


def policy_get(*, org: Organization) -> PrivacyPolicy:
    return PrivacyPolicy.objects.for_org(org).get()


def policy_validate(values: dict) -> None:
    """Refuse a policy that cannot be honoured, whichever path sets it (API, create_org)."""
    unknown = set(values) - set(PrivacyPolicy.FIELDS)
    if unknown:
        raise InvalidInput(f"Unknown privacy policy field(s): {', '.join(sorted(unknown))}.")
    days = values.get("retention_days")
    if days is not None and (isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= MAX_RETENTION_DAYS):
        raise InvalidInput(f"retention_days must be a whole number of days between 1 and {MAX_RETENTION_DAYS}.")
    if values.get("training_enabled") and values.get("store_content") is False:
        raise InvalidInput("Training needs stored content: with store_content off (zero retention) training_enabled must be off.")


def policy_update(*, org: Organization, changes: dict, actor: str) -> PrivacyPolicy:
    """Apply changes to the policy and audit them (who, when, before, after).

    Turning `store_content` off is zero-retention mode: text already stored is purged in the
    same transaction, so "we keep no text" is true from the moment the change is acknowledged.
    """
    with transaction.atomic():
        policy = PrivacyPolicy.objects.for_org(org).select_for_update().get()
        before = policy.as_dict()
        after = before | changes
        policy_validate(after)
        for field, value in changes.items():
            setattr(policy, field, value)
        if after == before:
            return policy
        policy.save()
        purged = content_purge_all(org=org) if before["store_content"] and not after["store_content"] else 0
        audit_record(org=org, actor=actor, action="privacy_policy.update", before=before,
                     after=after | ({"purged_interactions": purged} if purged else {}))
    return policy
