from tenants.models import AuditEvent, Organization


def audit_record(*, org: Organization, actor: str, action: str, target: str = "", before=None, after=None) -> AuditEvent:
    return AuditEvent.objects.create(org=org, actor=actor, action=action, target=target, before=before, after=after)
