"""Row locks that Django's ORM does not offer.

Recording an interaction reads two rows that other transactions may change under it: the
privacy policy (zero-retention mode must purge *and* stop new text atomically) and the active
data key (rotation must not destroy a key a write is still sealing with). Recorders take
those rows FOR SHARE: many recorders at once, but a policy change or a key destruction waits
until every in-flight recording has committed, and recordings after it see the change.

SQLite needs none of this: a write transaction (IMMEDIATE, see settings) holds the whole
database, so nothing changes between a recorder's read and its insert.
"""

from django.db import connection
from django.db.models import QuerySet


def lock_for_share(queryset: QuerySet) -> None:
    if connection.vendor != "postgresql":
        return
    sql, params = queryset.values("pk").query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(f"{sql} FOR SHARE", params)
