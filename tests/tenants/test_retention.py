from datetime import timedelta
from io import StringIO

from django.core.management import call_command
from django.utils import timezone

from tenants.models import FeedbackEvent, Interaction
import pytest

from controlplane.celery import app
from tenants.tasks import purge_expired_content
from tests.factories import make_tenant, record


@pytest.fixture
def eager_celery():
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = False


def age(org, interaction_id: str, days: int) -> None:
    Interaction.objects.for_org(org).filter(pk=interaction_id).update(created_at=timezone.now() - timedelta(days=days))


def content_of(org, interaction_id: str):
    return Interaction.objects.for_org(org).get(pk=interaction_id).content


def test_the_scheduled_task_purges_content_older_than_each_orgs_retention(db, eager_celery):
    short, long_ = make_tenant("Short", retention_days=1), make_tenant("Long", retention_days=90)
    old_short, new_short, old_long = record(short.client), record(short.client), record(long_.client)
    age(short.org, old_short, 2)
    age(long_.org, old_long, 2)
    assert purge_expired_content() == 2  # one task per organization
    assert content_of(short.org, old_short) is None
    assert content_of(short.org, new_short) is not None
    assert content_of(long_.org, old_long) is not None


def test_purging_keeps_metrics_and_feedback(acme):
    interaction_id = record(acme.client, latency_ms=12.5)
    acme.client.post("/api/v1/feedback", {"events": [{"interaction_id": interaction_id, "type": "edit_persisted", "idempotency_key": "k"}]}, format="json")
    age(acme.org, interaction_id, 31)
    call_command("purge_expired_content", stdout=StringIO())
    purged = Interaction.objects.for_org(acme.org).get(pk=interaction_id)
    assert purged.content is None and purged.content_purged_at is not None and purged.latency_ms == 12.5
    assert FeedbackEvent.objects.for_org(acme.org).filter(interaction=purged).count() == 1


def test_the_command_prints_what_it_purged(acme):
    age(acme.org, record(acme.client), 31)
    out = StringIO()
    call_command("purge_expired_content", stdout=out)
    assert '"acme": 1' in out.getvalue()


def test_the_purge_is_scheduled(settings):
    schedule = settings.CELERY_BEAT_SCHEDULE
    assert any(entry["task"] == "tenants.tasks.purge_expired_content" for entry in schedule.values())


def test_one_organization_failing_does_not_stop_the_others(db, monkeypatch):
    import tenants.retention as retention

    make_tenant("Broken", retention_days=1)
    healthy = make_tenant("Healthy", retention_days=1)
    old = record(healthy.client)
    age(healthy.org, old, 2)
    real = retention.content_purge_expired

    def purge(*, org, now=None):
        if org.slug == "broken":
            raise RuntimeError("disk on fire")
        return real(org=org, now=now)

    monkeypatch.setattr(retention, "content_purge_expired", purge)
    assert retention.content_purge_expired_everywhere() == {"broken": "failed: disk on fire", "healthy": 1}
    assert content_of(healthy.org, old) is None
