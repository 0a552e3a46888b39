"""Each organization's storage quota: what it has recorded (interactions' sealed content plus a
fixed allowance for each row of interactions, feedback events and background tasks), counted as
it is written, purged and erased. Past the quota, new recordings, feedback and tasks are refused
with a clear error until retention, erasure or a larger quota makes room; nothing stored is
touched.
"""

from django.conf import settings
from django.db.models import F, Sum, Value
from django.db.models.functions import Length

from tenants.errors import QuotaExceeded
from tenants.models import Organization, StorageUsage

# Each row's allowance, its content aside: columns and index entries, rounded up.
INTERACTION_ROW_BYTES = 512  # metrics, ids, indexes
FEEDBACK_ROW_BYTES = 256  # ids, type, value, idempotency key (up to 200 characters), times
TASK_ROW_BYTES = 64


def interaction_bytes(content: bytes | None) -> int:
    return INTERACTION_ROW_BYTES + len(content or b"")


def storage_usage(*, org: Organization) -> tuple[int, int]:
    """(bytes used, quota in bytes) of the organization."""
    used, quota = StorageUsage.objects.for_org(org).values_list("used_bytes", "quota_bytes").first() or (0, None)
    return used, settings.STORAGE_QUOTA_BYTES if quota is None else quota


def storage_quota_check(*, org: Organization) -> None:
    """Raise QuotaExceeded if what the organization has recorded fills its quota (read without a
    lock: concurrent writes may pass it by a few, never by more)."""
    used, quota = storage_usage(org=org)
    if used >= quota:
        raise QuotaExceeded(
            f"This organization's recordings fill its storage quota ({used:,} of {quota:,} bytes): nothing more is "
            "recorded until retention, erasure or a larger quota makes room.",
            details={"used_bytes": used, "quota_bytes": quota},
        )


def storage_lock(*, org: Organization) -> None:
    """The organization's storage lock until the transaction ends (its usage row's on
    PostgreSQL, the database's write lock on SQLite): a purge or an erasure takes it before it
    counts what it removes, so that no other removal lands in between."""
    storage_used_change(org=org, delta=0)


def storage_used_change(*, org: Organization, delta: int) -> None:
    """Inside the transaction that writes or removes the bytes (it locks the usage row)."""
    # The delta typed as the column: a bare int makes the ORM build a new field for it on every
    # call, a visible share of what recording a completion costs.
    added = F("used_bytes") + Value(delta, output_field=StorageUsage._meta.get_field("used_bytes"))
    if not StorageUsage.objects.for_org(org).update(used_bytes=added):
        StorageUsage.objects.for_org(org).get_or_create(org=org)
        StorageUsage.objects.for_org(org).update(used_bytes=added)


def content_bytes(interactions) -> int:
    """The sealed content's bytes among these interactions (for a purge, before it)."""
    return interactions.aggregate(total=Sum(Length("content")))["total"] or 0
