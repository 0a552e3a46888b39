"""One organization's recordings on PostgreSQL, in one statement: under the policy and data key
the process saw last only while they still hold, and a policy change in flight still wins."""

import threading
import time

import pytest
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext

from tenants import data_keys
from tenants.models import DataKey, Interaction, PrivacyPolicy
from tenants.recording import InteractionContent, Recording, SampledTokens, interaction_content, interaction_record, interactions_record
from tenants.storage import storage_usage
from tests.factories import make_tenant

pytestmark = pytest.mark.skipif(connection.vendor != "postgresql", reason="the one-statement recording is PostgreSQL's")

SECRET = 'password = "hunter2-correct-horse"'


def _record(org, text: str = "def add(a, b):\n    return a + b") -> Interaction:
    tokens = SampledTokens(prompt_ids=[1, 2, 3], completion_ids=[7, 8], logprobs=[-0.5, -0.25])
    content = InteractionContent([{"role": "user", "content": f"Fix it. {SECRET}"}], text, tokens)
    return interaction_record(org=org, content=content, source=Interaction.Source.GATEWAY, latency_ms=12.5, prompt_tokens=3,
                              completion_tokens=2)


def test_a_recording_alone_is_one_statement_once_the_policy_and_key_are_known(transactional_db):
    org = make_tenant("Acme").org
    _record(org)  # the transactional path: it reads the policy and the key
    used_before = storage_usage(org=org)[0]
    with CaptureQueriesContext(connection) as queries:
        interaction = _record(org)
    assert len(queries.captured_queries) == 1, [query["sql"][:80] for query in queries.captured_queries]
    stored = Interaction.objects.for_org(org).get(pk=interaction.pk)
    assert (stored.latency_ms, stored.completion_tokens, stored.content_key_version) == (12.5, 2, 1)
    opened = interaction_content(interaction=stored)
    assert opened["completion"].startswith("def add") and SECRET not in str(opened)  # redacted, sealed
    assert "tokens" not in opened  # token ids spell the secret redaction replaced
    assert storage_usage(org=org)[0] - used_before == len(stored.content) + 512


@pytest.mark.parametrize("change", [{"store_content": False}, {"redact": False}])
def test_a_policy_changed_since_it_was_seen_is_honoured(transactional_db, change):
    org = make_tenant("Acme").org
    _record(org)
    PrivacyPolicy.objects.for_org(org).update(**change)  # not through this process's reads
    interaction = Interaction.objects.for_org(org).get(pk=_record(org).pk)
    if change == {"store_content": False}:
        assert interaction.content is None
        with CaptureQueriesContext(connection) as queries:  # the new policy seen: one statement again, with no key to check
            again = _record(org)
        assert len(queries.captured_queries) == 1 and Interaction.objects.for_org(org).get(pk=again.pk).content is None
    else:
        assert SECRET in str(interaction_content(interaction=interaction))
        assert Interaction.objects.for_org(org).count() == 2


def test_a_key_rotated_since_it_was_seen_is_not_sealed_under(transactional_db):
    org = make_tenant("Acme").org
    _record(org)
    data_keys.data_key_create(org=org)  # version 2, active; version 1 retired
    interaction = Interaction.objects.for_org(org).get(pk=_record(org).pk)
    assert interaction.content_key_version == 2
    assert interaction_content(interaction=interaction)["completion"].startswith("def add")


def test_a_key_destroyed_since_it_was_seen_is_not_needed(transactional_db, monkeypatch):
    org = make_tenant("Acme").org
    _record(org)
    data_keys.data_key_create(org=org)
    DataKey.objects.for_org(org).filter(version=1).delete()
    monkeypatch.setattr(data_keys, "KEY_RECHECK_SECONDS", 0.0)  # this process's copy of version 1 is checked again at once
    interaction = Interaction.objects.for_org(org).get(pk=_record(org).pk)
    assert interaction.content_key_version == 2


def test_a_policy_change_in_flight_wins(transactional_db):
    """Zero retention committed while the statement waits on the policy's row: no content stored."""
    org = make_tenant("Acme").org
    _record(org)
    changing = threading.Event()

    def switch_to_zero_retention() -> None:
        try:
            with transaction.atomic():
                PrivacyPolicy.objects.for_org(org).update(store_content=False)
                changing.set()
                time.sleep(0.5)  # the recording's statement waits for this transaction
        finally:
            connections.close_all()

    other = threading.Thread(target=switch_to_zero_retention)
    other.start()
    assert changing.wait(10)
    started = time.monotonic()
    interaction = _record(org)
    waited = time.monotonic() - started
    other.join(10)
    assert waited > 0.2
    assert Interaction.objects.for_org(org).get(pk=interaction.pk).content is None


def test_one_organizations_group_is_one_statement_and_a_mixed_group_a_transaction(transactional_db):
    acme, globex = make_tenant("Acme").org, make_tenant("Globex", store_content=False).org
    _record(acme), _record(globex)

    def recording(org) -> Recording:
        return Recording(org=org, content=InteractionContent([{"role": "user", "content": "hi"}], "ok"), source=Interaction.Source.GATEWAY)

    with CaptureQueriesContext(connection) as queries:
        group = interactions_record([recording(acme), recording(acme), recording(acme)])
    assert len(queries.captured_queries) == 1
    assert [interaction_content(interaction=i)["completion"] for i in Interaction.objects.for_org(acme).filter(pk__in=[g.pk for g in group])] == ["ok"] * 3
    with CaptureQueriesContext(connection) as queries:
        mixed = interactions_record([recording(acme), recording(globex)])
    assert len(queries.captured_queries) > 1
    assert Interaction.objects.across_orgs().filter(pk__in=[m.pk for m in mixed], content__isnull=True).count() == 1
