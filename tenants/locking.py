"""Reads on the recording path: row locks the ORM does not offer, on SQL it builds once.

Recording an interaction reads two rows that other transactions may change under it: the
privacy policy (zero-retention mode must purge *and* stop new text atomically) and the active
data key (rotation must not destroy a key a write is still sealing with). Recorders take
those rows FOR SHARE: many recorders at once, but a policy change or a key destruction waits
until every in-flight recording has committed, and recordings after it see the change.
SQLite needs none of this: a write transaction (IMMEDIATE, see settings) holds the whole
database, so nothing changes between a recorder's read and its insert.

The gateway records every completion it serves, and refreshes each organization's route,
limits and storage use every second or so; building a statement through the ORM costs several
times running it (docs/figures.md, the gateway's CPU): the ORM builds each of these reads once,
for a placeholder organization, and every call runs that SQL with its own.
"""

import uuid
from collections.abc import Callable

from django.db import connection
from django.db.models import QuerySet

from tenants.models import Organization

_PLACEHOLDER = uuid.UUID(int=0x0C0FFEE0)  # never an organization's: uuid4 sets version bits this lacks


def org_id_for_database(org_id: uuid.UUID) -> object:
    """An organization's id as the database driver takes it (hex text on SQLite)."""
    return Organization._meta.pk.get_db_prep_value(org_id, connection)


class OrgRows:
    """One organization's rows of a values_list queryset, share-locked on PostgreSQL when asked."""

    def __init__(self, build: Callable[[uuid.UUID], QuerySet], *, for_share: bool = False):
        self._build, self._for_share = build, for_share
        self._compiled: dict[str, tuple[str, list, int]] = {}  # by database alias: (sql, params, the org id's place)

    def read(self, org_id: uuid.UUID) -> list[tuple]:
        sql, params, at = self._compiled.get(connection.alias) or self._compile()
        params = [*params[:at], org_id_for_database(org_id), *params[at + 1:]]
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.fetchall()

    def _compile(self) -> tuple[str, list, int]:
        sql, params = self._build(_PLACEHOLDER).query.get_compiler(connection.alias).as_sql()
        (at,) = [i for i, param in enumerate(params) if param == org_id_for_database(_PLACEHOLDER)]
        if self._for_share and connection.vendor == "postgresql":
            sql += " FOR SHARE"
        self._compiled[connection.alias] = compiled = (sql, list(params), at)
        return compiled
