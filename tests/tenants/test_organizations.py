import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from tenants.models import DataKey, Interaction, Organization, PrivacyPolicy
from tests.factories import api_client, record


def create_org(*args) -> dict:
    out = StringIO()
    call_command("create_org", *args, stdout=out)
    return json.loads(out.getvalue())


def test_create_org_prints_the_org_and_an_owner_key(db):
    created = create_org("--name", "Acme Corp", "--owner-email", "Boss@Acme.example")
    assert set(created) == {"org", "api_key"} and created["org"] == "acme-corp"
    client = api_client(created["api_key"])
    assert client.get("/api/v1/members").json()[0] | {"id": 0, "created_at": 0, "joined_at": 0} == {
        "id": 0, "email": "boss@acme.example", "role": "owner", "created_at": 0, "joined_at": 0
    }


def test_create_org_takes_privacy_options(db):
    created = create_org("--name", "Acme", "--owner-email", "a@acme.example", "--no-store-content", "--retention-days", "7")
    policy = PrivacyPolicy.objects.for_org(Organization.objects.get(slug=created["org"])).get()
    assert (policy.training_enabled, policy.store_content, policy.retention_days, policy.redact) == (False, False, 7, True)


def test_two_orgs_with_one_name_get_distinct_slugs(db):
    assert create_org("--name", "Acme", "--owner-email", "a@x.example")["org"] == "acme"
    assert create_org("--name", "Acme", "--owner-email", "b@x.example")["org"] == "acme-2"


def test_create_org_refuses_a_bad_email(db):
    with pytest.raises(CommandError, match="not an email"):
        create_org("--name", "Acme", "--owner-email", "nobody")


def test_an_owner_deletes_the_organization_after_confirming_its_slug(acme, globex):
    record(acme.client)
    assert acme.client.delete("/api/v1/organization", {"confirm": "wrong"}, format="json").status_code == 400
    assert acme.client.delete("/api/v1/organization", {"confirm": acme.org.slug}, format="json").status_code == 204
    assert not Organization.objects.filter(pk=acme.org.pk).exists()
    assert not DataKey.objects.across_orgs().filter(org_id=acme.org.pk).exists()
    assert acme.client.get("/api/v1/organization").status_code == 401
    assert Interaction.objects.for_org(globex.org).count() == 0 and globex.client.get("/api/v1/organization").status_code == 200


def test_deleting_an_organization_deletes_the_people_who_belonged_to_no_other(acme, globex):
    from django.contrib.auth import get_user_model

    from tenants.organizations import Principal, member_add, org_delete

    owner_of_globex = Principal(org=globex.org, role="owner", actor="test")
    member_add(org=globex.org, email="owner@acme.example", role="viewer", by=owner_of_globex)  # in both
    member_add(org=acme.org, email="dev@acme.example", role="viewer", by=Principal(org=acme.org, role="owner", actor="test"))
    org_delete(org=acme.org, confirm_slug=acme.org.slug)
    emails = set(get_user_model().objects.values_list("email", flat=True))
    assert "dev@acme.example" not in emails and {"owner@acme.example", "owner@globex.example"} <= emails


def test_under_asgi_the_export_is_streamed_batch_by_batch_not_read_whole_first(transactional_db, acme, monkeypatch):
    """Django's ASGI handler reads a synchronous iterator into a list before sending a byte:
    an organization's whole export, decrypted, in memory."""
    import asyncio

    from django.test import AsyncClient

    from tenants.api import views

    monkeypatch.setattr(views, "EXPORT_BATCH", 2)
    for _ in range(5):
        record(acme.client)

    async def export() -> tuple[bool, list[str]]:
        response = await AsyncClient().get("/api/v1/export", headers={"Authorization": f"Bearer {acme.key}"})
        return response.is_async, [chunk.decode() async for chunk in response.streaming_content]

    is_async, batches = asyncio.run(export())
    assert is_async and len(batches) > 3 and all(batch.count("\n") <= 2 for batch in batches)
    assert sum(json.loads(line)["kind"] == "interaction" for batch in batches for line in batch.splitlines()) == 5


def test_a_recording_that_arrives_after_the_keys_were_destroyed_is_refused_and_makes_no_key(acme):
    from tenants import data_keys
    from tenants.errors import Conflict
    from tenants.recording import InteractionContent, interaction_record

    data_keys.org_keys_shred(org=acme.org)  # the first step of a deletion; the rows go next
    with pytest.raises(Conflict, match="being deleted"):
        interaction_record(org=acme.org, content=InteractionContent([{"role": "user", "content": "x"}], "y"), source="gateway")
    assert not DataKey.objects.across_orgs().filter(org_id=acme.org.pk).exists()
    assert not Interaction.objects.for_org(acme.org).exists()


def test_the_export_holds_all_of_the_orgs_data_as_json_lines(acme):
    interaction_id = record(acme.client, text="exported prompt")
    acme.client.post("/api/v1/feedback", {"events": [{"interaction_id": interaction_id, "type": "edit_accepted", "idempotency_key": "k"}]}, format="json")
    acme.client.post("/api/v1/tasks", {}, format="json")
    response = acme.client.get("/api/v1/export")
    assert response.status_code == 200 and response["Content-Type"] == "application/x-ndjson"
    lines = [json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines()]
    kinds = [line["kind"] for line in lines]
    assert kinds[:2] == ["organization", "privacy_policy"]
    assert {"member", "api_key", "audit_event", "task", "interaction", "feedback"} <= set(kinds)
    [interaction] = [line for line in lines if line["kind"] == "interaction"]
    assert interaction["messages"][0]["content"] == "exported prompt"
    assert not [line for line in lines if "key_hash" in line]


def test_only_admins_export(viewer):
    assert viewer.get("/api/v1/export").status_code == 403


@pytest.mark.parametrize("options, complaint", [
    (("--retention-days", "0"), "retention_days"),
    (("--retention-days", "-3"), "retention_days"),
    (("--training-enabled", "--no-store-content"), "training_enabled must be off"),
])
def test_create_org_refuses_a_policy_it_cannot_honour(db, options, complaint):
    with pytest.raises(CommandError, match=complaint):
        create_org("--name", "Acme", "--owner-email", "a@acme.example", *options)
    assert not Organization.objects.exists()


def test_create_org_can_opt_in_to_training(db):
    created = create_org("--name", "Acme", "--owner-email", "a@acme.example", "--training-enabled")
    assert PrivacyPolicy.objects.for_org(Organization.objects.get(slug=created["org"])).get().training_enabled
