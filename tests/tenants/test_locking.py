"""The recording path's reads: SQL built once, each organization's own rows, share locks that
hold a policy change or a key's destruction back until the recording commits."""

import threading

import pytest
from django.db import OperationalError, connection, connections, transaction

from tenants import data_keys
from tenants.models import DataKey, PrivacyPolicy
from tenants.recording import text_policy
from tests.factories import make_tenant


def test_each_read_names_its_own_organizations_rows(db):
    acme, globex = make_tenant("Acme", redact=False).org, make_tenant("Globex", store_content=False).org
    for _ in range(2):  # the second from the SQL built by the first
        assert (text_policy(acme.pk, locked=False).redact, text_policy(globex.pk, locked=True).store_content) == (False, False)
        assert text_policy(acme.pk, locked=True).store_content and text_policy(globex.pk, locked=False).redact


def test_an_organization_without_a_policy_is_an_error_not_a_default(db):
    org = make_tenant("Acme").org
    PrivacyPolicy.objects.for_org(org).delete()
    with pytest.raises(PrivacyPolicy.DoesNotExist):
        text_policy(org.pk, locked=True)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="share locks are PostgreSQL's; SQLite's write lock holds the database")
@pytest.mark.parametrize("change", ["policy", "key"])
def test_a_recording_in_flight_holds_back_a_change_to_what_it_read(transactional_db, change):
    org = make_tenant("Acme").org
    read, blocked = threading.Event(), []

    def change_it() -> None:
        read.wait(10)
        try:
            with transaction.atomic():
                with connection.cursor() as cursor:
                    cursor.execute("SET LOCAL lock_timeout = '300ms'")
                if change == "policy":
                    PrivacyPolicy.objects.for_org(org).update(store_content=False)
                else:
                    DataKey.objects.for_org(org).delete()
        except OperationalError:
            blocked.append(True)
        finally:
            connections.close_all()

    other = threading.Thread(target=change_it)
    other.start()
    with transaction.atomic():
        text_policy(org.pk, locked=True) if change == "policy" else data_keys._active_version(org)
        read.set()
        other.join(10)
    assert blocked == [True]
