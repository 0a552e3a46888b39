"""Recording under load from another organization: what one recording may hold while it runs."""

from django.db import connection

from tenants import recording
from tenants.models import Interaction, PrivacyPolicy
from tenants.recording import InteractionContent, interaction_content, interaction_record
from tenants.retention import content_purge_all
from tests.factories import make_tenant

SECRET = 'password = "hunter2-correct-horse"'


def _record(org) -> Interaction:
    return interaction_record(org=org, content=InteractionContent([{"role": "user", "content": SECRET}], "ok"), source="api")


def test_redaction_runs_before_the_write_transaction(transactional_db, monkeypatch):
    """On SQLite the write transaction holds every organization's writes: redaction, whose cost
    grows with the content, must be over before it opens."""
    org = make_tenant("Acme").org
    in_transaction = []
    redact_interaction = recording.aside.redact_interaction

    def watched(*args, **kwargs):
        in_transaction.append(connection.in_atomic_block)
        return redact_interaction(*args, **kwargs)

    monkeypatch.setattr(recording.aside, "redact_interaction", watched)
    interaction = _record(org)
    assert in_transaction == [False]
    assert SECRET not in str(interaction_content(interaction=interaction))


def _policy_changed_after_the_first_read(monkeypatch, **change) -> list:
    """The recording's reads of the policy, the first before the change (while it redacts), the
    second after it (inside its transaction)."""
    text_policy, reads = recording.text_policy, []

    def read(org_id, *, locked):
        policy = text_policy(org_id, locked=locked)
        if not reads:
            PrivacyPolicy.objects.for_org(org_id).update(**change)
        reads.append({name: getattr(policy, name) for name in change})
        return policy

    monkeypatch.setattr(recording, "text_policy", read)
    return reads


def test_redaction_turned_on_while_a_recording_was_redacting_is_honoured(transactional_db, monkeypatch):
    org = make_tenant("Acme", redact=False).org
    reads = _policy_changed_after_the_first_read(monkeypatch, redact=True)
    interaction = _record(org)
    assert reads == [{"redact": False}, {"redact": True}]
    assert interaction.redactions == 1 and SECRET not in str(interaction_content(interaction=interaction))


def test_zero_retention_turned_on_while_a_recording_was_redacting_stores_no_text(transactional_db, monkeypatch):
    org = make_tenant("Acme").org
    reads = _policy_changed_after_the_first_read(monkeypatch, store_content=False)
    interaction = _record(org)
    assert reads == [{"store_content": True}, {"store_content": False}]
    assert Interaction.objects.for_org(org).get(pk=interaction.pk).content is None


def test_the_end_user_is_sealed_with_the_content_and_purged_with_it(acme):
    acme.client.put("/api/v1/privacy-policy", {"redact": False}, format="json")
    interaction = interaction_record(org=acme.org, content=InteractionContent([{"role": "user", "content": "x"}], "y"),
                                     source="gateway", end_user="jane.doe@acme.example")
    row = Interaction.objects.for_org(acme.org).filter(pk=interaction.pk).values().get()
    assert "jane.doe" not in repr(row)  # no plaintext column holds it
    url = f"/api/v1/interactions/{interaction.pk}"
    assert acme.client.get(url).json()["end_user"] == "jane.doe@acme.example"
    content_purge_all(org=acme.org)
    assert acme.client.get(url).json()["end_user"] is None


def test_an_end_user_is_redacted_like_the_messages(acme):
    """The `user` field is the client's to fill: an email there is personal data like any other."""
    interaction = interaction_record(org=acme.org, content=InteractionContent([{"role": "user", "content": "x"}], "y"),
                                     source="gateway", end_user="jane.doe@acme.example")
    assert acme.client.get(f"/api/v1/interactions/{interaction.pk}").json()["end_user"] == "[REDACTED:email]"
    assert interaction_record(org=acme.org, content=InteractionContent([{"role": "user", "content": "x"}], "y"),
                              source="gateway", end_user="user-1729").content is not None
    assert acme.client.get("/api/v1/interactions").json()["results"][0]["end_user"] == "user-1729"


def test_zero_retention_stores_no_end_user(acme):
    acme.client.put("/api/v1/privacy-policy", {"store_content": False, "training_enabled": False}, format="json")
    interaction = interaction_record(org=acme.org, content=InteractionContent([{"role": "user", "content": "x"}], "y"),
                                     source="gateway", end_user="jane.doe@acme.example")
    assert "jane.doe" not in repr(Interaction.objects.for_org(acme.org).filter(pk=interaction.pk).values().get())
    assert acme.client.get(f"/api/v1/interactions/{interaction.pk}").json()["end_user"] is None
