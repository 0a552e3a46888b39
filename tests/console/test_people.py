"""Members and API keys in the console, with the API's rules on who may grant what."""

from tenants.models import ApiKey, Membership, Role
from tenants.organizations import api_key_authenticate
from tests.console.conftest import person


def test_an_admin_invites_a_member_and_sees_the_link_once(acme, acme_admin):
    page = acme_admin.client.post("/console/members/", {"email": "new@acme.example", "role": "viewer"})
    assert page.status_code == 200 and b"shown only now" in page.content and b"/console/invitations/" in page.content
    assert "no-store" in page["Cache-Control"]
    assert Membership.objects.for_org(acme.org).get(user__username="new@acme.example").role == Role.VIEWER
    listing = acme_admin.client.get("/console/members/")
    assert b"new@acme.example" in listing.content and b"invited, not joined yet" in listing.content
    assert b"/console/invitations/" not in listing.content


def test_a_bad_email_and_an_existing_member_are_named_next_to_the_field(acme_admin, acme_viewer):
    bad = acme_admin.client.post("/console/members/", {"email": "not-an-email", "role": "viewer"})
    assert bad.status_code == 200 and b"Enter a valid email address" in bad.content
    again = acme_admin.client.post("/console/members/", {"email": acme_viewer.email, "role": "admin"})
    assert b"already a member" in again.content
    long = acme_admin.client.post("/console/members/", {"email": "a" * 140 + "@example.com", "role": "viewer"})
    assert long.status_code == 200 and b"150 characters" in long.content


def test_an_admin_cannot_grant_owner_or_touch_an_owner(acme, acme_admin, acme_owner, acme_viewer):
    refused = acme_admin.client.post(f"/console/members/{acme_viewer.membership.public_id}/role/", {"role": "owner"})
    assert refused.status_code == 403
    assert acme_admin.client.post(f"/console/members/{acme_owner.membership.public_id}/remove/").status_code == 403
    listing = acme_admin.client.get("/console/members/").content.decode()
    assert f"/console/members/{acme_owner.membership.public_id}/remove/" not in listing
    assert f"/console/members/{acme_viewer.membership.public_id}/remove/" in listing


def test_an_owner_changes_a_role_and_removes_a_member_whose_keys_are_revoked(acme, acme_owner, acme_admin):
    acme_admin.client.post("/console/api-keys/", {"name": "ci", "role": "admin"})
    key = ApiKey.objects.for_org(acme.org).get(name="ci")
    changed = acme_owner.client.post(f"/console/members/{acme_admin.membership.public_id}/role/", {"role": "viewer"}, follow=True)
    assert b"is now viewer" in changed.content
    key.refresh_from_db()
    assert key.revoked_at is not None  # it carried more than its creator now holds
    removed = acme_owner.client.post(f"/console/members/{acme_admin.membership.public_id}/remove/", follow=True)
    assert b"was removed" in removed.content
    assert not Membership.objects.for_org(acme.org).filter(pk=acme_admin.membership.pk).exists()


def test_the_last_owner_cannot_be_removed(acme, acme_owner):
    response = acme_owner.client.post(f"/console/members/{acme_owner.membership.public_id}/remove/", follow=True)
    assert b"keeps at least one owner" in response.content


def test_a_key_is_shown_once_works_and_stops_working_when_revoked(acme, acme_admin):
    page = acme_admin.client.post("/console/api-keys/", {"name": "deploy bot", "role": "viewer"})
    assert page.status_code == 200 and b"shown only once" in page.content and "no-store" in page["Cache-Control"]
    raw = page.content.decode().split('id="new-key">')[1].split("<")[0]
    assert api_key_authenticate(raw).role == Role.VIEWER
    key = ApiKey.objects.for_org(acme.org).get(name="deploy bot")
    listing = acme_admin.client.get("/console/api-keys/").content.decode()
    assert raw not in listing and key.prefix in listing
    confirm = acme_admin.client.get(f"/console/api-keys/{key.pk}/revoke/")
    assert b"cannot be undone" in confirm.content
    acme_admin.client.post(f"/console/api-keys/{key.pk}/revoke/")
    assert api_key_authenticate(raw) is None


def test_an_admin_cannot_create_an_owner_key(acme, acme_admin):
    assert acme_admin.client.post("/console/api-keys/", {"name": "root", "role": "owner"}).status_code == 403
    assert not ApiKey.objects.for_org(acme.org).filter(name="root").exists()


def test_a_viewer_sees_members_and_keys_without_controls(acme_viewer):
    for path in ("/console/members/", "/console/api-keys/"):
        page = acme_viewer.client.get(path).content.decode()
        assert "Invite" not in page and "Create key" not in page and "Revoke" not in page and "Remove" not in page
        assert page.count('method="post"') == 2  # the organization switcher and logout


def test_a_viewer_cannot_open_another_viewers_key_revocation(acme, acme_viewer):
    viewer_key = ApiKey.objects.for_org(acme.org).first()
    assert acme_viewer.client.get(f"/console/api-keys/{viewer_key.pk}/revoke/").status_code == 403


def test_people_of_another_organization_are_not_listed(acme_admin, globex):
    person(globex, Role.ADMIN, email="spy@globex.example")
    assert b"spy@globex.example" not in acme_admin.client.get("/console/members/").content
