"""A real Celery worker consumes a task from the broker and writes to the test database."""

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from tenants.models import Interaction
from tenants.recording import InteractionContent, interaction_record
from tenants.tasks import purge_expired_content
from tests.factories import make_tenant
from tests.worker import running_worker


@pytest.mark.worker
def test_worker_purges_expired_content(transactional_db):
    org = make_tenant("Acme", retention_days=1).org
    interaction = interaction_record(
        org=org,
        content=InteractionContent(messages=[{"role": "user", "content": "hi"}], completion="x"),
        source="api",
    )
    Interaction.objects.for_org(org).update(created_at=timezone.now() - timedelta(days=3))
    assert Interaction.objects.for_org(org).get(pk=interaction.pk).content is not None

    def purged() -> bool:
        # A fresh connection each time: on SQLite, a read snapshot left open on this thread's
        # connection (a cursor an earlier test never finished) would hide the worker's write.
        connection.close()
        return Interaction.objects.for_org(org).filter(pk=interaction.pk, content__isnull=True).exists()

    with running_worker() as worker:
        purge_expired_content.delay()
        worker.wait_until(purged, timeout=60, what="the worker to purge the expired content")

    row = Interaction.objects.for_org(org).get(pk=interaction.pk)
    assert row.content is None
    assert row.content_key_version is None
    assert row.content_purged_at is not None
