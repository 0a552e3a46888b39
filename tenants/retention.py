"""Purging recorded content: by age (retention_days) and all at once (zero-retention mode).

Purging drops the ciphertext and keeps the row: metrics and feedback outlive the text.
"""

import logging
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from tenants.models import Interaction, Organization, PrivacyPolicy
from tenants.signals import content_erased
from tenants.storage import content_bytes, storage_lock, storage_used_change

log = logging.getLogger(__name__)


def content_purge_expired(*, org: Organization, now=None) -> int:
    now = now or timezone.now()
    retention_days = PrivacyPolicy.objects.for_org(org).values_list("retention_days", flat=True).get()
    cutoff = now - timedelta(days=retention_days)
    return _purge(org, Interaction.objects.for_org(org).filter(created_at__lt=cutoff), now, reason="purged")


def content_purge_all(*, org: Organization) -> int:
    return _purge(org, Interaction.objects.for_org(org), timezone.now(), reason="zero_retention")


def _purge(org: Organization, interactions, now, *, reason: str) -> int:
    """Drop the content; the adapter versions trained on it are tainted in the same transaction."""
    with transaction.atomic():
        storage_lock(org=org)  # recordings and erasures of the organization wait: the set below stays the set purged
        stored = interactions.filter(content__isnull=False)
        ids = [str(pk) for pk in stored.values_list("pk", flat=True)]
        if not ids:
            return 0
        freed = content_bytes(stored)
        purged = stored.update(content=None, content_key_version=None, content_purged_at=now)
        storage_used_change(org=org, delta=-freed)
        content_erased.send(sender=Interaction, org=org, interaction_ids=ids, reason=reason)
    return purged


def content_purge_expired_everywhere() -> dict[str, int | str]:
    """Every organization purged under its own policy; one that fails is reported, not fatal."""
    results: dict[str, int | str] = {}
    for org in Organization.objects.order_by("slug"):
        try:
            results[org.slug] = content_purge_expired(org=org)
        except Exception as error:  # noqa: BLE001 - the others' retention must still hold
            log.exception("Purging the expired content of %s failed", org.slug)
            results[org.slug] = f"failed: {error}"
    return results
