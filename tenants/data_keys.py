"""Organizations' data keys: sealing and opening content, rotation and crypto-shredding.

Unwrapped keys are cached in process memory for a short time (KEY_CACHE_SECONDS) so that
reading a page of interactions does not unwrap the same key a hundred times. A cached key is
used only while its row is known to exist, checked again each KEY_RECHECK_SECONDS: shredding
clears this process's cache at once, and every other process stops using the key within a
second (an organization deleted, a version destroyed by rotation).
"""

import json
import logging
import time
from dataclasses import dataclass
from functools import cache

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from tenants import crypto
from tenants.errors import Conflict
from tenants.locking import OrgRows
from tenants.models import DataKey, Interaction, Organization

log = logging.getLogger(__name__)

KEY_CACHE_SECONDS = 60.0
KEY_RECHECK_SECONDS = 1.0
_clock = time.monotonic


@dataclass
class _CachedKey:
    key: bytes
    expires: float
    checked: float


_cache: dict[tuple[str, int], _CachedKey] = {}


@cache
def _keyring_for(spec: str) -> crypto.MasterKeyring:
    return crypto.MasterKeyring.parse(spec)


def keyring() -> crypto.MasterKeyring:
    return _keyring_for(settings.MASTER_KEYS)


def _wrap_context(org: Organization, version: int) -> bytes:
    return f"{org.pk}|{version}".encode()


def record_context(org: Organization, record_type: str, record_id, field: str) -> bytes:
    """Associated data of a sealed field: a ciphertext opens only in the row it was made for."""
    return f"{org.pk}|{record_type}|{record_id}|{field}".encode()


def data_key_create(*, org: Organization) -> DataKey:
    """Make a new active data key version; the previous active one (if any) is retired."""
    with transaction.atomic():
        current = DataKey.objects.for_org(org).select_for_update().filter(active=True).first()
        version = 1 + (DataKey.objects.for_org(org).order_by("-version").values_list("version", flat=True).first() or 0)
        if current is not None:
            DataKey.objects.for_org(org).filter(pk=current.pk).update(active=False, retired_at=timezone.now())
        master_key_id, wrapped = keyring().wrap(crypto.new_data_key(), _wrap_context(org, version))
        return DataKey.objects.create(org=org, version=version, wrapped=wrapped, master_key_id=master_key_id)


def _unwrap(org: Organization, data_key: DataKey) -> bytes:
    return keyring().unwrap(data_key.master_key_id, bytes(data_key.wrapped), _wrap_context(org, data_key.version))


def _key(org: Organization, version: int) -> bytes:
    now, name = _clock(), (str(org.pk), version)
    cached = _cache.get(name)
    if cached is not None and cached.expires > now:
        if cached.checked + KEY_RECHECK_SECONDS > now:
            return cached.key
        if DataKey.objects.for_org(org).filter(version=version).exists():
            cached.checked = now
            return cached.key
        _cache.pop(name, None)
    data_key = DataKey.objects.for_org(org).filter(version=version).first()
    if data_key is None:
        raise crypto.DecryptionError(f"Data key version {version} of {org.slug} does not exist (destroyed?).")
    key = _unwrap(org, data_key)
    _cache[name] = _CachedKey(key=key, expires=now + KEY_CACHE_SECONDS, checked=now)
    return key


def _active_version(org: Organization) -> int:
    """The version to seal with, share-locked until the caller's transaction ends so that a
    rotation cannot destroy it under a write in flight (tenants/locking.py). Read on every
    write, not cached: a rotation must take effect for writers at once (a writer that seals
    under the version last seen, active_version_seen, checks it is still active as it writes)."""
    rows = _active_versions.read(org.pk)
    _versions_seen[org.pk] = rows[0][0] if rows else None
    if not rows:
        # Every organization gets its key when it is made, and a rotation retires one only for
        # its successor: none means its keys were destroyed and its rows are going. Making a
        # fresh key here would seal a late write under a key that outlives the deletion.
        raise Conflict(f"{org.slug}'s data keys are destroyed: the organization is being deleted.")
    return rows[0][0]


_active_versions = OrgRows(lambda org_id: DataKey.objects.for_org(org_id).filter(active=True).values_list("version"), for_share=True)
_versions_seen: dict = {}


def active_version_seen(org_id) -> int | None:
    """The active version this process last read for the organization, if any: possibly stale,
    for a writer that checks it is still active as it writes (tenants/recording_pg.py)."""
    return _versions_seen.get(org_id)


def content_seal(*, org: Organization, context: bytes, payload: dict) -> tuple[bytes, int]:
    version = _active_version(org)
    plaintext = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
    return crypto.seal(_key(org, version), version, plaintext, context), version


def content_open(*, org: Organization, context: bytes, blob: bytes) -> dict:
    blob = bytes(blob)
    return json.loads(crypto.open_sealed(_key(org, crypto.sealed_version(blob)), blob, context))


def _interaction_context(org: Organization, interaction_id) -> bytes:
    return record_context(org, "interaction", interaction_id, "content")


def interaction_content_seal(*, interaction: Interaction, payload: dict) -> None:
    interactions_content_seal([(interaction, payload)])


def interactions_content_seal(sealing: list[tuple[Interaction, dict]], *, versions: dict | None = None) -> None:
    """Seal each interaction's payload into its content, the active version read (and
    share-locked) once per organization: a group of recordings in one transaction. `versions`
    (by organization id): what to seal under instead, for a writer that checks as it writes
    that the version is still active."""
    versions = dict(versions or {})
    for interaction, payload in sealing:
        org = interaction.org
        version = versions[org.pk] if org.pk in versions else versions.setdefault(org.pk, _active_version(org))
        plaintext = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
        interaction.content = crypto.seal(_key(org, version), version, plaintext, _interaction_context(org, interaction.pk))
        interaction.content_key_version = version


def interaction_content_open(*, interaction: Interaction) -> dict | None:
    if interaction.content is None:
        return None
    return content_open(org=interaction.org, context=_interaction_context(interaction.org, interaction.pk), blob=interaction.content)


def org_keys_rotate(*, org: Organization, batch_size: int = 500) -> dict:
    """Rotate an organization's data key without stopping reads or writes.

    1. A new version becomes active: writes use it from their next transaction on.
    2. Every row sealed under an older version is re-encrypted (compare-and-set on the old
       ciphertext, so a concurrent erase or purge wins).
    3. After a grace period longer than any write transaction, a last pass catches rows written
       with the old key just before step 1; then the old versions are destroyed.
    Data keys still wrapped by an older master key are rewrapped under the current one.
    """
    new = data_key_create(org=org)
    reencrypted = _reencrypt_older_than(org, new.version, batch_size)
    time.sleep(settings.KEY_ROTATION_GRACE_SECONDS)
    reencrypted += _reencrypt_older_than(org, new.version, batch_size)
    destroyed = _destroy_unused_versions(org, below=new.version)
    rewrapped = _rewrap_under_current_master(org)
    return {"org": org.slug, "active_version": new.version, "reencrypted": reencrypted,
            "destroyed_versions": destroyed, "rewrapped": rewrapped}


def _reencrypt_older_than(org: Organization, version: int, batch_size: int) -> int:
    done = 0
    while True:
        batch = list(
            Interaction.objects.for_org(org)
            .filter(content__isnull=False, content_key_version__lt=version)
            .select_related("org")[:batch_size]
        )
        if not batch:
            return done
        for interaction in batch:
            old_blob = bytes(interaction.content)
            payload = interaction_content_open(interaction=interaction)
            interaction_content_seal(interaction=interaction, payload=payload)
            done += Interaction.objects.for_org(org).filter(pk=interaction.pk, content=old_blob).update(
                content=interaction.content, content_key_version=interaction.content_key_version
            )


def _destroy_unused_versions(org: Organization, *, below: int) -> list[int]:
    """Destroy the old versions no row is sealed with any more. Locking them first waits for
    writes that share-locked them (tenants/locking.py); a version such a write still used
    survives until the next rotation instead of taking that row's content with it."""
    with transaction.atomic():
        old = list(DataKey.objects.for_org(org).select_for_update().filter(version__lt=below).values_list("version", flat=True))
        in_use = set(Interaction.objects.for_org(org).filter(content_key_version__in=old).values_list("content_key_version", flat=True).distinct())
        if in_use:
            log.warning("Data key versions %s of %s are still in use; they stay until the next rotation.", sorted(in_use), org.slug)
        destroyed = _destroy_versions(org, DataKey.objects.for_org(org).filter(version__in=set(old) - in_use))
    _checkpoint_sqlite_wal()
    return destroyed


def _destroy_versions(org: Organization, data_keys) -> list[int]:
    """Overwrite, then delete, then push the change out of SQLite's write-ahead log: with
    secure_delete on, the key's bytes then leave both database files."""
    versions = list(data_keys.values_list("version", flat=True))
    with transaction.atomic():
        data_keys.update(wrapped=b"\0" * 60, master_key_id="destroyed")
        DataKey.objects.for_org(org).filter(version__in=versions).delete()
    for version in versions:
        _cache.pop((str(org.pk), version), None)
    _checkpoint_sqlite_wal()
    return versions


def _checkpoint_sqlite_wal() -> None:
    if connection.vendor != "sqlite" or connection.in_atomic_block:
        return
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        busy, _, _ = cursor.fetchone()
    if busy:
        log.warning("A reader kept the SQLite WAL from being truncated; destroyed key bytes may linger there until the next checkpoint.")


def _rewrap_under_current_master(org: Organization) -> int:
    ring = keyring()
    stale = DataKey.objects.for_org(org).exclude(master_key_id=ring.current_id)
    count = 0
    for data_key in stale:
        master_key_id, wrapped = ring.wrap(_unwrap(org, data_key), _wrap_context(org, data_key.version))
        count += DataKey.objects.for_org(org).filter(pk=data_key.pk, master_key_id=data_key.master_key_id).update(
            wrapped=wrapped, master_key_id=master_key_id
        )
    return count


def org_keys_shred(*, org: Organization) -> list[int]:
    """Destroy every data key of the organization: its content can never be opened again."""
    destroyed = _destroy_versions(org, DataKey.objects.for_org(org))
    log.info("Destroyed data keys %s of organization %s", destroyed, org.slug)
    return destroyed
