"""Selecting everything the platform holds about an organization, for its export.

Rows come in primary-key order in chunks, so exporting a large organization runs in constant
memory; the API turns each (kind, row) into one JSON line.
"""

from collections.abc import Iterator

from tenants.audit import audit_record
from tenants.models import ApiKey, AuditEvent, FeedbackEvent, Interaction, Membership, Organization, PrivacyPolicy
from tenants.selectors import tasks_list

CHUNK = 500


def org_export(*, org: Organization, actor: str) -> Iterator[tuple[str, object]]:
    """Everything of the organization as (kind, row), in a fixed order; the export is audited."""
    audit_record(org=org, actor=actor, action="organization.export")
    return _rows(org)


def _rows(org: Organization) -> Iterator[tuple[str, object]]:
    yield "organization", org
    yield "privacy_policy", PrivacyPolicy.objects.for_org(org).get()
    yield from (("member", m) for m in Membership.objects.for_org(org).select_related("user").order_by("pk"))
    yield from (("api_key", k) for k in ApiKey.objects.for_org(org).order_by("created_at"))
    yield from (("audit_event", e) for e in _chunked(AuditEvent.objects.for_org(org)))
    yield from (("task", t) for t in _chunked(tasks_list(org=org)))
    yield from (("interaction", i) for i in _chunked(Interaction.objects.for_org(org).select_related("org")))
    yield from (("feedback", f) for f in _chunked(FeedbackEvent.objects.for_org(org)))


def _chunked(queryset):
    last = None
    while True:
        page = queryset.order_by("pk")
        if last is not None:
            page = page.filter(pk__gt=last)
        rows = list(page[:CHUNK])
        yield from rows
        if len(rows) < CHUNK:
            return
        last = rows[-1].pk
