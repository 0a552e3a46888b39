"""Alerts: what an organization's admins must see (today, a reward-hacking detector that fired
and blocked a candidate), until one of them acknowledges it."""

from django.db import transaction
from django.utils import timezone

from serving.models import Alert
from tenants.audit import audit_record
from tenants.errors import NotFound
from tenants.models import Organization


def alert_get(*, org: Organization, alert_id) -> Alert:
    alert = Alert.objects.for_org(org).select_related("adapter").filter(pk=alert_id).first()
    if alert is None:
        raise NotFound("No such alert in this organization.")
    return alert


def alert_acknowledge(*, alert: Alert, actor: str) -> Alert:
    """Mark the alert seen (once: acknowledging it again changes nothing); audited."""
    with transaction.atomic():
        now = timezone.now()
        acknowledged = Alert.objects.for_org(alert.org).filter(pk=alert.pk, acknowledged_at__isnull=True).update(
            acknowledged_at=now, acknowledged_by=actor)
        if acknowledged:
            audit_record(org=alert.org, actor=actor, action="alert.acknowledge", target=str(alert.pk),
                         after={"adapter": alert.adapter.name, "kind": alert.kind})
    alert.refresh_from_db(fields=["acknowledged_at", "acknowledged_by"])
    return alert
