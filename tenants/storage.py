"""Each organization's storage quota: what it has recorded (interactions' sealed content plus a
fixed allowance for each row of interactions, feedback events and background tasks), counted as
it is written, purged and erased. Past the quota, new recordings, feedback and tasks are refused
with a clear error until retention, erasure or a larger quota makes room; nothing stored is
touched.
"""

import functools

from django.conf import settings
from django.db import connection
from django.db.models import Sum
from django.db.models.functions import Length

from tenants.errors import QuotaExceeded
from tenants.locking import OrgRows, org_id_for_database
from tenants.models import Organization, StorageUsage

# Each row's allowance, its content aside: columns and index entries, rounded up.
INTERACTION_ROW_BYTES = 512  # metrics, ids, indexes
FEEDBACK_ROW_BYTES = 256  # ids, type, value, idempotency key (up to 200 characters), times
TASK_ROW_BYTES = 64


def interaction_bytes(content: bytes | None) -> int:
    return INTERACTION_ROW_BYTES + len(content or b"")


def storage_usage(*, org: Organization) -> tuple[int, int]:
    """(bytes used, quota in bytes) of the organization."""
    rows = _usage_rows.read(org.pk)
    used, quota = rows[0] if rows else (0, None)
    return used, settings.STORAGE_QUOTA_BYTES if quota is None else quota


# Read by every gateway process once a second for each organization with traffic: SQL built once.
_usage_rows = OrgRows(lambda org_id: StorageUsage.objects.for_org(org_id).values_list("used_bytes", "quota_bytes"))


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
    if not _used_bytes_add(org.pk, delta):
        StorageUsage.objects.for_org(org).get_or_create(org=org)
        _used_bytes_add(org.pk, delta)


def _used_bytes_add(org_id, delta: int) -> int:
    """The rows changed: 0 when the organization has no usage row yet. In SQL of its own since
    every recording runs it, and the ORM took longer to build this UPDATE than to run it."""
    with connection.cursor() as cursor:
        cursor.execute(_used_bytes_add_sql(connection.vendor), [delta, org_id_for_database(org_id)])
        return cursor.rowcount


@functools.cache
def _used_bytes_add_sql(vendor: str) -> str:
    quoted = connection.ops.quote_name
    table, used = quoted(StorageUsage._meta.db_table), quoted(StorageUsage._meta.get_field("used_bytes").column)
    return f"UPDATE {table} SET {used} = {used} + %s WHERE {quoted(StorageUsage._meta.pk.column)} = %s"


def content_bytes(interactions) -> int:
    """The sealed content's bytes among these interactions (for a purge, before it)."""
    return interactions.aggregate(total=Sum(Length("content")))["total"] or 0
