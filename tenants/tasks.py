"""Celery tasks of the tenants app: thin wrappers that take ids and call a service."""

import logging

from celery import shared_task

from tenants.models import Organization
from tenants.retention import content_purge_expired

log = logging.getLogger(__name__)


@shared_task
def purge_expired_content() -> int:
    """The scheduled sweep: one task per organization, so that one organization's failure
    neither stops nor delays the others'."""
    org_ids = list(Organization.objects.values_list("pk", flat=True))
    for org_id in org_ids:
        purge_org_expired_content.delay(str(org_id))
    return len(org_ids)


@shared_task
def purge_org_expired_content(org_id: str) -> int:
    org = Organization.objects.filter(pk=org_id).first()
    if org is None:  # deleted since the sweep was scheduled
        return 0
    purged = content_purge_expired(org=org)
    log.info("Purged the expired content of %d interactions of %s", purged, org.slug)
    return purged
