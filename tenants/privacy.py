"""Privacy policies: read, change (audited), and what a change sets in motion."""

from dataclasses import dataclass
from typing import ClassVar, Literal

from django.db import transaction

from tenants.audit import audit_record
from tenants.errors import Conflict
from tenants.models import Organization, PrivacyPolicy
from tenants.ranges import PolicyError, check, known_changes, policy_changed, policy_values, settings_of
from tenants.retention import content_purge_all


@dataclass(frozen=True)
class PrivacySettings:
    """What an organization allows done with its data; the model's defaults for a new one."""

    training_enabled: bool = False  # no training on a customer's data unless they opt in
    store_content: bool = True
    retention_days: int = 30
    redact: bool = True
    tainted_adapters: Literal["retrain", "keep"] = "retrain"

    HELP: ClassVar[dict[str, str]] = {
        "training_enabled": "Train this organization's adapter on its own users' interactions.",
        "store_content": "Keep prompt and completion text. Off is zero retention: only metrics and feedback are kept, "
                         "and nothing can be trained.",
        "retention_days": "Recorded text older than this is purged.",
        "redact": "Replace secrets (keys, tokens, passwords) and personal data (emails, phone numbers, addresses) "
                  "before anything is stored.",
        "tainted_adapters": "When erased or purged content trained an adapter version: retrain (the next cycle trains from "
                            "the newest version it did not reach, and the tainted ones are retired and their weights deleted "
                            "once a clean one serves) or keep (they may serve on; each is recorded in the audit log).",
    }

    RANGES: ClassVar[dict[str, tuple[float, float]]] = {"retention_days": (1, 3650)}

    def __post_init__(self) -> None:
        check(self)
        if self.training_enabled and not self.store_content:
            raise PolicyError({"training_enabled": "Training needs stored content: with store_content off (zero retention) "
                                                   "training_enabled must be off."})


def policy_get(*, org: Organization) -> PrivacyPolicy:
    return PrivacyPolicy.objects.for_org(org).get()


def policy_validate(values) -> PrivacySettings:
    """The settings `values` name over the defaults, or PolicyError naming each bad one,
    whichever path sets them (API, create_org)."""
    return PrivacySettings(**known_changes(PrivacySettings, values))


def trainable_check(*, org: Organization) -> None:
    """Refuse (Conflict) to train on an organization that does not allow it or keeps no text."""
    policy = policy_get(org=org)
    if not policy.training_enabled:
        raise Conflict("Training is off in this organization's privacy policy (training_enabled).")
    if not policy.store_content:
        raise Conflict("This organization keeps no text (store_content is off): there is nothing to train on.")


def policy_update(*, org: Organization, changes: dict, actor: str) -> PrivacyPolicy:
    """Apply changes to the policy and audit them (who, when, before, after).

    Turning `store_content` off is zero-retention mode: text already stored is purged in the
    same transaction, so "we keep no text" is true from the moment the change is acknowledged.
    """
    with transaction.atomic():
        policy = PrivacyPolicy.objects.for_org(org).select_for_update().get()
        before = {name: getattr(policy, name) for name in settings_of(PrivacySettings)}
        after = policy_values(policy_changed(PrivacySettings(**before), changes))
        for field, value in after.items():
            setattr(policy, field, value)
        if after == before:
            return policy
        policy.save()
        purged = content_purge_all(org=org) if before["store_content"] and not after["store_content"] else 0
        audit_record(org=org, actor=actor, action="privacy_policy.update", before=before,
                     after=after | ({"purged_interactions": purged} if purged else {}))
    return policy
