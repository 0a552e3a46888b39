from datetime import timedelta

from django.utils import timezone

from django.contrib.auth.models import User

from tenants.models import ApiKey, AuditEvent, Membership, Role
from tests.factories import api_client


def test_a_new_key_is_shown_once_and_stored_only_as_a_hash(acme):
    response = acme.client.post("/api/v1/api-keys", {"name": "ci", "role": "viewer"}, format="json")
    assert response.status_code == 201
    raw_key = response.json()["key"]
    stored = ApiKey.objects.for_org(acme.org).get(pk=response.json()["id"])
    assert raw_key not in (stored.key_hash, stored.prefix) and raw_key.startswith(stored.prefix)
    listed = acme.client.get("/api/v1/api-keys").json()
    assert all("key" not in row for row in listed)
    assert api_client(raw_key).get("/api/v1/privacy-policy").status_code == 200


def test_a_revoked_key_stops_working_at_once(acme):
    created = acme.client.post("/api/v1/api-keys", {"name": "ci"}, format="json").json()
    assert acme.client.delete(f"/api/v1/api-keys/{created['id']}").json()["revoked_at"] is not None
    response = api_client(created["key"]).get("/api/v1/privacy-policy")
    assert response.status_code == 401
    assert response.json()["error"]["message"] == "Unknown or revoked API key."


def test_using_a_key_records_when_it_was_last_used(acme):
    created = acme.client.post("/api/v1/api-keys", {"name": "ci"}, format="json").json()
    assert created["last_used_at"] is None
    api_client(created["key"]).get("/api/v1/privacy-policy")
    assert acme.client.get(f"/api/v1/api-keys/{created['id']}").json()["last_used_at"] is not None


def test_last_used_is_written_at_most_once_a_minute(acme):
    key = ApiKey.objects.for_org(acme.org).get()
    recent = timezone.now() - timedelta(seconds=5)
    ApiKey.objects.for_org(acme.org).filter(pk=key.pk).update(last_used_at=recent)
    acme.client.get("/api/v1/privacy-policy")
    assert ApiKey.objects.for_org(acme.org).get().last_used_at == recent


def test_an_admin_cannot_mint_an_owner_key_or_revoke_one(acme, admin):
    assert admin.post("/api/v1/api-keys", {"name": "x", "role": "owner"}, format="json").status_code == 403
    owner_key = ApiKey.objects.for_org(acme.org).get(role=Role.OWNER)
    assert admin.delete(f"/api/v1/api-keys/{owner_key.pk}").status_code == 403


def test_a_viewer_cannot_mint_keys(viewer):
    assert viewer.post("/api/v1/api-keys", {"name": "x"}, format="json").status_code == 403


def test_malformed_keys_and_headers_are_401(db):
    for header in ("Bearer", "Bearer a b", "Bearer osk_nope", "Bearer \u00e9"):
        client = api_client("x")
        client.credentials(HTTP_AUTHORIZATION=header)
        assert client.get("/api/v1/privacy-policy").status_code == 401, header


def test_members_are_added_with_roles_and_audited(acme):
    response = acme.client.post("/api/v1/members", {"email": "dev@acme.example", "role": "viewer"}, format="json")
    assert response.status_code == 201
    member_id = response.json()["id"]
    assert acme.client.patch(f"/api/v1/members/{member_id}", {"role": "admin"}, format="json").json()["role"] == "admin"
    assert acme.client.delete(f"/api/v1/members/{member_id}").status_code == 204
    actions = set(AuditEvent.objects.for_org(acme.org).values_list("action", flat=True))
    assert {"member.add", "member.role", "member.remove"} <= actions


def test_adding_a_member_twice_is_a_conflict(acme):
    acme.client.post("/api/v1/members", {"email": "dev@acme.example", "role": "viewer"}, format="json")
    assert acme.client.post("/api/v1/members", {"email": "dev@acme.example", "role": "admin"}, format="json").status_code == 409


def test_an_email_longer_than_an_account_can_hold_is_a_400_that_stores_nothing(acme):
    """The account's key is its email, 150 characters: PostgreSQL refused a longer one (a 500)."""
    long = "a" * 140 + "@example.com"
    members = Membership.objects.for_org(acme.org).count()
    response = acme.client.post("/api/v1/members", {"email": long, "role": "viewer"}, format="json")
    assert response.status_code == 400 and "email" in response.json()["error"]["details"]
    assert Membership.objects.for_org(acme.org).count() == members and not User.objects.filter(username=long).exists()


def test_the_last_owner_cannot_be_removed_or_demoted(acme):
    [owner] = acme.client.get("/api/v1/members").json()
    assert acme.client.delete(f"/api/v1/members/{owner['id']}").status_code == 409
    assert acme.client.patch(f"/api/v1/members/{owner['id']}", {"role": "viewer"}, format="json").status_code == 409


def test_an_admin_cannot_make_owners(acme, admin):
    assert admin.post("/api/v1/members", {"email": "x@acme.example", "role": "owner"}, format="json").status_code == 403


def test_a_console_user_acts_in_their_organization(acme):
    from django.contrib.auth import get_user_model
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_login(get_user_model().objects.get(email="owner@acme.example"))
    assert client.get("/api/v1/organization").json()["org"] == acme.org.slug


def test_a_console_user_without_membership_is_refused(db):
    from django.contrib.auth import get_user_model
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_login(get_user_model().objects.create(username="stranger@x.example", email="stranger@x.example"))
    assert client.get("/api/v1/organization").status_code in (401, 403)


def test_removing_or_demoting_a_member_revokes_the_keys_beyond_their_new_rights(acme):
    from django.contrib.auth import get_user_model

    from tenants.organizations import Principal, api_key_create, member_add, member_remove, member_set_role

    owner = Principal(org=acme.org, role=Role.OWNER, actor="test")
    dev = member_add(org=acme.org, email="dev@acme.example", role=Role.ADMIN, by=owner)
    as_dev = f"user:{get_user_model().objects.get(email='dev@acme.example').email}"
    admin_key, admin_raw = api_key_create(org=acme.org, name="dev admin", role=Role.ADMIN, actor=as_dev)
    viewer_key, viewer_raw = api_key_create(org=acme.org, name="dev viewer", role=Role.VIEWER, actor=as_dev)
    member_set_role(membership=dev, role=Role.VIEWER, by=owner)
    assert api_client(admin_raw).get("/api/v1/organization").status_code == 401
    assert api_client(viewer_raw).get("/api/v1/organization").status_code == 200
    member_remove(membership=dev, by=owner)
    assert api_client(viewer_raw).get("/api/v1/organization").status_code == 401
    assert acme.client.get("/api/v1/organization").status_code == 200  # others' keys untouched


def test_removing_a_member_revokes_the_keys_minted_with_their_keys_down_the_whole_chain(acme):
    from django.contrib.auth import get_user_model

    from tenants.organizations import Principal, api_key_create, member_add, member_remove

    owner = Principal(org=acme.org, role=Role.OWNER, actor="test")
    dev = member_add(org=acme.org, email="dev@acme.example", role=Role.ADMIN, by=owner)
    _, dev_raw = api_key_create(org=acme.org, name="dev admin", role=Role.ADMIN,
                                actor=f"user:{get_user_model().objects.get(email='dev@acme.example').email}")
    child = api_client(dev_raw).post("/api/v1/api-keys", {"name": "ci", "role": "admin"}, format="json").json()["key"]
    grandchild = api_client(child).post("/api/v1/api-keys", {"name": "bot", "role": "viewer"}, format="json").json()["key"]
    unrelated = acme.client.post("/api/v1/api-keys", {"name": "ops", "role": "viewer"}, format="json").json()["key"]
    member_remove(membership=dev, by=owner)
    for raw in (dev_raw, child, grandchild):
        assert api_client(raw).get("/api/v1/organization").status_code == 401
    assert api_client(unrelated).get("/api/v1/organization").status_code == 200


def test_revoking_a_key_revokes_what_was_minted_with_it(acme, admin):
    made = admin.post("/api/v1/api-keys", {"name": "child", "role": "viewer"}, format="json").json()["key"]
    admin_key_id = ApiKey.objects.for_org(acme.org).get(name="admin key").pk
    assert acme.client.delete(f"/api/v1/api-keys/{admin_key_id}").status_code == 200
    assert api_client(made).get("/api/v1/organization").status_code == 401


def test_the_last_owner_key_stays_while_no_owner_can_log_in(acme):
    from django.contrib.auth import get_user_model

    owner_key = ApiKey.objects.for_org(acme.org).get(role=Role.OWNER)
    acme.client.post("/api/v1/api-keys", {"name": "second owner", "role": "owner"}, format="json")
    for key in (owner_key, ApiKey.objects.for_org(acme.org).get(name="second owner")):
        # the second was minted with the first, so revoking the first would take both
        response = acme.client.delete(f"/api/v1/api-keys/{key.pk}")
        assert (key.name, response.status_code) == (key.name, 409 if key == owner_key else 200), response.content
    assert "last owner key" in acme.client.delete(f"/api/v1/api-keys/{owner_key.pk}").json()["error"]["message"]
    assert acme.client.get("/api/v1/organization").status_code == 200

    owner = get_user_model().objects.get(email="owner@acme.example")
    owner.set_password("a long enough passphrase")
    owner.save()
    assert acme.client.delete(f"/api/v1/api-keys/{owner_key.pk}").status_code == 200  # the owner can still log in
    assert acme.client.get("/api/v1/organization").status_code == 401


def test_member_and_audit_ids_tell_nothing_of_other_organizations(acme, globex):
    """Ids from a sequence shared by every organization would let one count the others' rows."""
    import uuid

    for org in (acme, globex, acme):
        org.client.post("/api/v1/members", {"email": f"{uuid.uuid4().hex[:8]}@example.com", "role": "viewer"}, format="json")
    members = acme.client.get("/api/v1/members").json()
    events = acme.client.get("/api/v1/audit-log").json()["results"]
    for row in members + events:
        assert uuid.UUID(row["id"]).version == 4, row
    one = members[-1]["id"]
    assert acme.client.get(f"/api/v1/members/{one}").json()["id"] == one
    assert globex.client.get(f"/api/v1/members/{one}").status_code == 404


def test_an_organization_has_at_most_so_many_members_and_keys_in_use(acme, settings):
    """Each member is an account of the platform's, and the pages list them all."""
    settings.MAX_MEMBERS = Membership.objects.for_org(acme.org).count() + 1
    assert acme.client.post("/api/v1/members", {"email": "one@acme.example", "role": "viewer"}, format="json").status_code == 201
    refused = acme.client.post("/api/v1/members", {"email": "two@acme.example", "role": "viewer"}, format="json")
    assert refused.status_code == 409 and "the most it may have" in refused.json()["error"]["message"]
    assert not User.objects.filter(username="two@acme.example").exists()
    settings.MAX_API_KEYS = ApiKey.objects.for_org(acme.org).filter(revoked_at__isnull=True).count() + 1
    minted = acme.client.post("/api/v1/api-keys", {"name": "ci", "role": "viewer"}, format="json")
    assert minted.status_code == 201
    assert acme.client.post("/api/v1/api-keys", {"name": "ci 2", "role": "viewer"}, format="json").status_code == 409
    assert acme.client.delete(f"/api/v1/api-keys/{minted.json()['id']}").status_code == 200  # revoked
    assert acme.client.post("/api/v1/api-keys", {"name": "ci 2", "role": "viewer"}, format="json").status_code == 201
