"""Purging recorded content: by age (retention_days) and all at once (zero-retention mode).

Purging drops the ciphertext and keeps the row: metrics and feedback outlive the text.
"""

from datetime import timedelta

from django.utils import timezone

from tenants.models import Interaction, Organization, PrivacyPolicy


def content_purge_expired(*, org: Organization, now=None) -> int:
    now = now or timezone.now()
    policy = PrivacyPolicy.objects.for_org(org).get()
    cutoff = now - timedelta(days=policy.retention_days)
    return _purge(Interaction.objects.for_org(org).filter(created_at__lt=cutoff), now)


def content_purge_all(*, org: Organization) -> int:
    return _purge(Interaction.objects.for_org(org), timezone.now())


def _purge(interactions, now) -> int:
    return interactions.filter(content__isnull=False).update(content=None, content_key_version=None, content_purged_at=now)


def content_purge_expired_everywhere() -> dict[str, int]:
    """The scheduled sweep: each organization purged under its own policy."""
    return {org.slug: content_purge_expired(org=org) for org in Organization.objects.order_by("slug")}
