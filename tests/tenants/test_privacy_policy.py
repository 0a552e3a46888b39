from tenants.models import AuditEvent, Interaction, Role
from tests.factories import make_tenant, record

URL = "/api/v1/privacy-policy"


def test_a_new_organization_does_not_train_on_its_data_by_default(db):
    tenant = make_tenant("Initech")
    assert tenant.client.get(URL).json() == {
        "training_enabled": False, "store_content": True, "retention_days": 30, "redact": True, "tainted_adapters": "retrain",
    }


def test_an_admin_changes_the_policy_and_the_change_is_audited(acme, admin):
    response = admin.put(URL, {"retention_days": 7, "redact": False}, format="json")
    assert response.status_code == 200
    assert response.json()["retention_days"] == 7
    [audit] = acme.client.get("/api/v1/audit-log").json()["results"][:1]
    assert audit["action"] == "privacy_policy.update"
    assert audit["actor"].startswith("key:osk_")
    assert audit["before"]["retention_days"] == 30 and audit["after"]["retention_days"] == 7
    assert audit["before"]["redact"] is True and audit["after"]["redact"] is False


def test_a_viewer_reads_the_policy_but_cannot_change_it(acme, viewer):
    assert viewer.get(URL).status_code == 200
    response = viewer.put(URL, {"training_enabled": False}, format="json")
    assert response.status_code == 403
    assert "admin" in response.json()["error"]["message"]


def test_an_unchanged_policy_writes_no_audit_event(acme):
    before = AuditEvent.objects.for_org(acme.org).count()
    acme.client.put(URL, {"training_enabled": True}, format="json")
    assert AuditEvent.objects.for_org(acme.org).count() == before


def test_it_rejects_unknown_fields_and_bad_values_and_changes_nothing(acme):
    for body in ({"retention_days": 0}, {"retention_days": "soon"}, {"store_everything": True}, {"redact": "maybe"}):
        response = acme.client.put(URL, body, format="json")
        assert response.status_code == 400, body
        assert response.json()["error"]["message"]
    assert acme.client.get(URL).json()["retention_days"] == 30


def test_zero_retention_mode_stores_metrics_and_feedback_but_never_text(acme):
    acme.client.put(URL, {"store_content": False, "training_enabled": False}, format="json")
    interaction_id = record(acme.client, text="Task: secret plans", latency_ms=42)
    stored = Interaction.objects.for_org(acme.org).get(pk=interaction_id)
    assert stored.content is None and stored.latency_ms == 42
    body = acme.client.get(f"/api/v1/interactions/{interaction_id}").json()
    assert body["messages"] is None and body["completion"] is None
    feedback = {"events": [{"interaction_id": interaction_id, "type": "edit_accepted", "idempotency_key": "k"}]}
    assert acme.client.post("/api/v1/feedback", feedback, format="json").json()["created"] == 1


def test_turning_zero_retention_on_purges_text_already_stored(acme):
    interaction_id = record(acme.client)
    acme.client.put(URL, {"store_content": False, "training_enabled": False}, format="json")
    purged = Interaction.objects.for_org(acme.org).get(pk=interaction_id)
    assert purged.content is None and purged.content_purged_at is not None
    audit = acme.client.get("/api/v1/audit-log").json()["results"][0]
    assert audit["after"]["purged_interactions"] == 1


def test_redaction_replaces_secrets_before_storage(acme):
    interaction_id = record(acme.client, text="deploy with token ghp_" + "a1B2" * 9 + " and mail bob@corp.example")
    body = acme.client.get(f"/api/v1/interactions/{interaction_id}").json()
    content = body["messages"][0]["content"]
    assert "ghp_" not in content and "bob@corp.example" not in content
    assert body["redactions"] == 2


def test_with_redaction_off_text_is_stored_as_sent(acme):
    acme.client.put(URL, {"redact": False}, format="json")
    interaction_id = record(acme.client, text="mail bob@corp.example")
    assert acme.client.get(f"/api/v1/interactions/{interaction_id}").json()["messages"][0]["content"] == "mail bob@corp.example"


def test_only_an_owner_key_carries_owner_rights(acme):
    assert acme.client_with_role(Role.ADMIN).delete("/api/v1/organization", {"confirm": acme.org.slug}, format="json").status_code == 403


def test_zero_retention_with_training_on_is_refused_because_training_needs_text(acme):
    response = acme.client.put(URL, {"store_content": False}, format="json")
    assert response.status_code == 400
    assert "training_enabled must be off" in response.json()["error"]["message"]
    assert acme.client.get(URL).json()["store_content"] is True
