"""Recordings of one organization, on PostgreSQL, in one statement.

Below saturation the gateway's group commit holds one completion or a few, and a transaction
of their own cost most of those completions' CPU: eight round trips (the policy read before, BEGIN,
the policy and the data key share-locked, the insert, the storage row, COMMIT; docs/figures.md,
the gateway's CPU by request rate). This statement does the same work at once, in autocommit:
it share-locks the organization's privacy policy and active data key only if they are still
what the content was prepared and sealed under (tenants/locking.py says why they are locked),
inserts the interactions, and adds their bytes to the organization's storage use. If either
changed, it writes nothing and the caller takes the transactional path, which reads them again.

A row lock taken in a statement is kept until its transaction ends, so a policy change or a
key's destruction still waits for this recording to commit, as with the transaction; and a
change committed meanwhile is seen, since READ COMMITTED checks a locked row's newest version
against the statement's conditions.
"""

import functools

from django.db import connection

from tenants.models import DataKey, Interaction, PrivacyPolicy, StorageUsage


def interactions_insert_if_unchanged(interactions: list[Interaction], *, store_content: bool, redact: bool, key_version: int | None,
                                     added_bytes: int) -> bool:
    """Whether the interactions, all of one organization, were stored (all of them, committed)
    or none. `key_version`: what their content is sealed under, None when they have none."""
    org_id = interactions[0].org_id
    fields = _insert_fields()
    values = [field.get_db_prep_save(field.pre_save(interaction, True), connection) for interaction in interactions for field in fields]
    with connection.cursor() as cursor:
        cursor.execute(_statement(len(interactions)), [org_id, store_content, redact, org_id, key_version, *values, key_version is None,
                                                       org_id, added_bytes, org_id])
        stored = cursor.rowcount == 1
    if stored:
        for interaction in interactions:
            interaction._state.adding, interaction._state.db = False, connection.alias
    return stored


@functools.cache
def _insert_fields() -> tuple:
    return tuple(Interaction._meta.local_concrete_fields)


@functools.lru_cache(maxsize=64)  # by the number of rows (the gateway's groups hold up to 64)
def _statement(rows: int) -> str:
    quoted = connection.ops.quote_name

    def table(model) -> str:
        return quoted(model._meta.db_table)

    def column(model, name: str) -> str:
        return quoted(model._meta.get_field(name).column)

    columns = ", ".join(quoted(field.column) for field in _insert_fields())
    # Typed, since a column that is NULL in every row would otherwise be read as text.
    row = "(" + ", ".join(f"CAST(%s AS {field.db_type(connection)})" for field in _insert_fields()) + ")"
    usage, used = table(StorageUsage), column(StorageUsage, "used_bytes")
    return (
        f"WITH policy AS (SELECT 1 FROM {table(PrivacyPolicy)} WHERE {column(PrivacyPolicy, 'org')} = %s"
        f" AND {column(PrivacyPolicy, 'store_content')} = %s AND {column(PrivacyPolicy, 'redact')} = %s FOR SHARE),"
        f" data_key AS (SELECT 1 FROM {table(DataKey)} WHERE {column(DataKey, 'org')} = %s AND {column(DataKey, 'active')}"
        f" AND {column(DataKey, 'version')} = %s FOR SHARE),"
        f" added AS (INSERT INTO {table(Interaction)} ({columns}) SELECT * FROM (VALUES {', '.join([row] * rows)}) AS new_rows"
        f" WHERE EXISTS (SELECT 1 FROM policy) AND (%s OR EXISTS (SELECT 1 FROM data_key))"
        f" AND EXISTS (SELECT 1 FROM {usage} WHERE {column(StorageUsage, 'org')} = %s) RETURNING 1)"
        f" UPDATE {usage} SET {used} = {used} + %s WHERE {column(StorageUsage, 'org')} = %s AND EXISTS (SELECT 1 FROM added)"
    )
