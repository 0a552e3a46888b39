"""Celery tasks of the tenants app: thin wrappers that call a service."""

import logging

from celery import shared_task

from tenants.retention import content_purge_expired_everywhere

log = logging.getLogger(__name__)


@shared_task
def purge_expired_content() -> dict[str, int]:
    purged = content_purge_expired_everywhere()
    log.info("Purged expired content: %s", purged)
    return purged
