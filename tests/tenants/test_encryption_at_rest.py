"""Content is ciphertext at rest, bound to its organization and row, and dies with its key."""

import os
import subprocess
import sys

import pytest
from django.core.management import call_command
from django.db import connection
from django.test import override_settings

from tenants import crypto, data_keys
from tenants.models import DataKey, Interaction
from tenants.organizations import org_delete
from tests.factories import record

SECRET_PLAINTEXT = "Task: Return the frobnicated zanzibar of a list."  # a marker found nowhere else


def raw_rows_of_every_table() -> list[bytes]:
    """Every cell of every table as bytes, read with raw SQL, bypassing the ORM."""
    cells = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            cursor.execute(f'SELECT * FROM "{table}"')
            for row in cursor.fetchall():
                for cell in row:
                    cells.append(bytes(cell) if isinstance(cell, (bytes, memoryview)) else str(cell).encode())
    return cells


def test_no_recorded_plaintext_is_in_any_table(acme):
    record(acme.client, text=SECRET_PLAINTEXT, completion="zanzibar frobnication")
    cells = raw_rows_of_every_table()
    assert not [cell for cell in cells if b"zanzibar" in cell]


def test_the_recorded_content_reads_back_through_the_api(acme):
    interaction_id = record(acme.client, text=SECRET_PLAINTEXT)
    body = acme.client.get(f"/api/v1/interactions/{interaction_id}").json()
    assert body["messages"] == [{"role": "user", "content": SECRET_PLAINTEXT}]


def file_bytes(path: str) -> bytes:
    """The file's bytes, read by another process: closing a descriptor of the database file in
    this one would drop every POSIX lock this process holds on it (SQLite's connections, the
    in-process gateway's among them), and a worker writing next would find it "disk I/O error"."""
    return subprocess.run([sys.executable, "-c", "import sys; sys.stdout.buffer.write(open(sys.argv[1], 'rb').read())", path],
                          check=True, capture_output=True).stdout


@pytest.mark.skipif(connection.vendor != "sqlite", reason="reads the SQLite database file")
@pytest.mark.django_db(transaction=True)  # committed, so that the rows reach the file
def test_the_database_file_holds_no_plaintext(acme):
    record(acme.client, text=SECRET_PLAINTEXT)
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    raw = file_bytes(connection.settings_dict["NAME"])
    assert b"owner@acme.example" in raw  # the scan does see committed rows
    assert b"zanzibar" not in raw


def test_ciphertext_does_not_open_in_another_row(acme):
    first = Interaction.objects.for_org(acme.org).get(pk=record(acme.client))
    second = Interaction.objects.for_org(acme.org).get(pk=record(acme.client))
    second.content = first.content  # an attacker with write access swaps ciphertexts
    with pytest.raises(crypto.DecryptionError):
        data_keys.interaction_content_open(interaction=second)


def test_ciphertext_does_not_open_in_another_organization(acme, globex):
    mine = Interaction.objects.for_org(acme.org).get(pk=record(acme.client))
    theirs = Interaction.objects.for_org(globex.org).get(pk=record(globex.client))
    theirs.content, theirs.pk = mine.content, mine.pk  # even with the same row id
    with pytest.raises(crypto.DecryptionError):
        data_keys.interaction_content_open(interaction=theirs)


def test_after_deleting_an_organization_nothing_of_it_decrypts(acme):
    interaction = Interaction.objects.for_org(acme.org).select_related("org").get(pk=record(acme.client, text=SECRET_PLAINTEXT))
    wrapped = [bytes(k.wrapped) for k in DataKey.objects.for_org(acme.org)]
    org_delete(org=acme.org, confirm_slug=acme.org.slug)
    assert not Interaction.objects.across_orgs().filter(pk=interaction.pk).exists()
    # Even a copy of the row (a backup) no longer opens: the key is gone, and no cache keeps it.
    with pytest.raises(crypto.DecryptionError):
        data_keys.interaction_content_open(interaction=interaction)
    assert not [cell for cell in raw_rows_of_every_table() if any(w in cell for w in wrapped)]


@pytest.mark.skipif(connection.vendor != "sqlite", reason="reads the SQLite database file")
@pytest.mark.django_db(transaction=True)  # committed, so that the rows reach the file
def test_a_deleted_organizations_wrapped_key_leaves_the_database_files(acme):
    wrapped = bytes(DataKey.objects.for_org(acme.org).get().wrapped)
    path = connection.settings_dict["NAME"]
    org_delete(org=acme.org, confirm_slug=acme.org.slug)
    for file in (path, path + "-wal"):  # the write-ahead log too: org_delete checkpoints it
        if os.path.exists(file):
            assert wrapped not in file_bytes(file), file


def test_rotation_reencrypts_content_and_destroys_the_old_key(acme):
    interaction_ids = [record(acme.client, text=f"{SECRET_PLAINTEXT} {i}") for i in range(3)]
    old = DataKey.objects.for_org(acme.org).get()
    call_command("rotate_keys", org=acme.org.slug, stdout=open("/dev/null", "w"))
    [new] = DataKey.objects.for_org(acme.org)
    assert new.version == old.version + 1 and new.active
    assert set(Interaction.objects.for_org(acme.org).values_list("content_key_version", flat=True)) == {new.version}
    for i, interaction_id in enumerate(interaction_ids):
        body = acme.client.get(f"/api/v1/interactions/{interaction_id}").json()
        assert body["messages"][0]["content"] == f"{SECRET_PLAINTEXT} {i}"


def test_writes_during_rotation_use_the_new_key_and_old_rows_still_read(acme):
    before = record(acme.client, text="before")
    new = data_keys.data_key_create(org=acme.org)  # step 1 of a rotation that has not re-encrypted yet
    during = record(acme.client, text="during")
    versions = dict(Interaction.objects.for_org(acme.org).values_list("pk", "content_key_version"))
    assert versions[Interaction.objects.for_org(acme.org).get(pk=during).pk] == new.version
    assert acme.client.get(f"/api/v1/interactions/{before}").json()["messages"][0]["content"] == "before"


def test_rotating_the_master_key_rewraps_every_data_key(acme):
    import base64

    record(acme.client, text="still readable")
    old_spec = data_keys.keyring().current_id + ":" + base64.b64encode(data_keys.keyring().keys[data_keys.keyring().current_id]).decode()
    new_spec = "next-1:" + base64.b64encode(b"n" * 32).decode() + "," + old_spec
    with override_settings(MASTER_KEYS=new_spec):
        data_keys.org_keys_rotate(org=acme.org)
        assert set(DataKey.objects.for_org(acme.org).values_list("master_key_id", flat=True)) == {"next-1"}
    # With only the new master key configured, everything still opens.
    data_keys._cache.clear()
    with override_settings(MASTER_KEYS="next-1:" + base64.b64encode(b"n" * 32).decode()):
        [row] = acme.client.get("/api/v1/interactions").json()["results"]
        assert row["messages"][0]["content"] == "still readable"


def test_rotation_keeps_an_old_key_that_a_late_write_still_sealed_with(acme):
    late = Interaction.objects.for_org(acme.org).select_related("org").get(pk=record(acme.client, text="late"))
    old_version = late.content_key_version
    data_keys.data_key_create(org=acme.org)  # rotation step 1, after which this write would have landed
    assert data_keys._destroy_unused_versions(acme.org, below=old_version + 1) == []
    assert data_keys.interaction_content_open(interaction=late)["messages"][0]["content"] == "late"


def test_another_process_stops_using_a_destroyed_key_within_a_second(acme, monkeypatch):
    """Its cache would otherwise keep the key for a minute after the organization was deleted."""
    clock = [1000.0]
    monkeypatch.setattr(data_keys, "_clock", lambda: clock[0])
    row = Interaction.objects.for_org(acme.org).select_related("org").get(pk=record(acme.client, text="soon gone"))
    assert data_keys.interaction_content_open(interaction=row)["messages"][0]["content"] == "soon gone"  # the key is cached here
    DataKey.objects.for_org(acme.org).delete()  # as another process's org_delete does, without touching this cache
    clock[0] += 0.5
    assert data_keys.interaction_content_open(interaction=row)  # within the recheck interval the cache still serves
    clock[0] += 0.6
    with pytest.raises(crypto.DecryptionError):
        data_keys.interaction_content_open(interaction=row)
