"""Getting in: invitation links (manage.py invite, the members API), login with failed tries
throttled, logout, sessions that expire, and switching organizations."""

import io
import json
from datetime import timedelta

import pytest
from django.contrib.sessions.models import Session
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone

from tenants.models import AuditEvent, Invitation, Membership, Role
from tests.console.conftest import PASSWORD, person
from tests.factories import make_tenant

NEW_PASSWORD = "another quite long passphrase 42"


def invite(org, email, role=None, base_url="http://console.example") -> str:
    out = io.StringIO()
    call_command("invite", org=org.slug, email=email, **({"role": role} if role else {}), base_url=base_url, stdout=out)
    return json.loads(out.getvalue())["url"]


def path_of(url: str) -> str:
    return url.removeprefix("http://console.example").removeprefix("http://testserver")


def accept(url: str, password: str = NEW_PASSWORD, client: Client | None = None):
    client = client or Client()
    return client, client.post(path_of(url), {"password": password, "confirm": password})


def test_invite_prints_a_url_that_sets_a_password_and_lands_in_the_console(acme):
    url = invite(acme.org, "Newcomer@Acme.example", role="admin")
    assert url.startswith("http://console.example/console/invitations/")
    page = Client().get(path_of(url))
    assert page.status_code == 200 and b"newcomer@acme.example" in page.content and b"admin" in page.content
    client, response = accept(url)
    assert response.status_code == 302 and response["Location"] == "/console/"
    home = client.get("/console/")
    assert home.status_code == 200 and b"Acme" in home.content
    assert Membership.objects.for_org(acme.org).get(user__username="newcomer@acme.example").role == Role.ADMIN
    assert Client().post("/console/login/", {"username": "newcomer@acme.example", "password": NEW_PASSWORD}).status_code == 302


def test_a_link_works_once(acme):
    url = invite(acme.org, "once@acme.example")
    accept(url)
    assert Client().get(path_of(url)).status_code == 404
    _, again = accept(url, "yet another long passphrase 9")
    assert again.status_code == 404


def test_a_link_expires(acme, settings):
    url = invite(acme.org, "late@acme.example")
    Invitation.objects.for_org(acme.org).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert Client().get(path_of(url)).status_code == 404


def test_a_new_link_replaces_the_old_one_and_resets_a_forgotten_password(acme, acme_admin):
    first = invite(acme.org, acme_admin.email)
    second = invite(acme.org, acme_admin.email)
    assert Client().get(path_of(first)).status_code == 404
    accept(second)
    assert Client().post("/console/login/", {"username": acme_admin.email, "password": NEW_PASSWORD}).status_code == 302


def test_a_weak_password_is_named_and_the_link_still_works(acme):
    url = invite(acme.org, "weak@acme.example")
    _, response = accept(url, "password")
    assert response.status_code == 200 and b"too common" in response.content
    _, response = accept(url)
    assert response.status_code == 302


def test_invite_refuses_an_unknown_organization_and_a_changed_role(acme, acme_admin):
    with pytest.raises(CommandError, match="No organization"):
        invite(acme.org.__class__(slug="nope"), "x@y.example")
    with pytest.raises(CommandError, match="already a member, as admin"):
        invite(acme.org, acme_admin.email, role="owner")


def test_the_members_api_returns_a_single_use_invitation_url(acme):
    response = acme.client.post("/api/v1/members", {"email": "api-made@acme.example", "role": "viewer"}, format="json")
    assert response.status_code == 201
    url = response.json()["invitation_url"]
    assert url.startswith("http://testserver/console/invitations/")
    _, accepted = accept(url)
    assert accepted.status_code == 302
    member_id = response.json()["id"]
    again = acme.client.post(f"/api/v1/members/{member_id}/invitation")
    assert again.status_code == 201 and again.json()["invitation_url"] != url


def test_an_admin_of_one_organization_cannot_reset_a_password_another_relies_on(acme, globex):
    shared = person(acme, Role.ADMIN, email="shared@corp.example")
    url = invite(globex.org, "shared@corp.example")  # through the operator: allowed
    assert b"Set password" in Client().get(path_of(url)).content
    globex_admin = person(globex, Role.ADMIN, email="admin@globex.example")
    member = Membership.objects.for_org(globex.org).get(user__username="shared@corp.example")
    page = globex_admin.client.post(f"/console/members/{member.public_id}/invitation/")
    link = page.content.decode().split('id="invitation-url">')[1].split("<")[0]
    landing = Client().get(path_of(link))
    assert b"belongs to other organizations too" in landing.content and b"Set password" not in landing.content
    _, refused = accept(link)
    assert refused.status_code == 302 and refused["Location"] == "/console/login/"
    assert Client().post("/console/login/", {"username": shared.email, "password": PASSWORD}).status_code == 302


def test_an_account_made_by_one_organization_reaches_another_only_once_its_person_joins_with_the_link(acme, globex, acme_admin):
    """Globex's admin makes an account for acme's CFO first and sets its password through
    globex's link; when acme adds the CFO, that password alone must not open acme."""
    added = globex.client_with_role(Role.ADMIN).post("/api/v1/members", {"email": "cfo@acme.example", "role": "viewer"}, format="json")
    squatter, entered = accept(added.json()["invitation_url"])
    assert entered.status_code == 302  # globex alone decided that account: allowed
    page = acme_admin.client.post("/console/members/", {"email": "cfo@acme.example", "role": "admin"})
    link = page.content.decode().split('id="invitation-url">')[1].split("<")[0]
    member = Membership.objects.for_org(acme.org).get(user__username="cfo@acme.example")
    assert member.joined_at is None
    assert squatter.post("/console/switch/", {"org": str(acme.org.pk)}).status_code == 404
    assert squatter.get("/api/v1/organization").json()["org"] == globex.org.slug
    landing = Client().get(path_of(link)).content.decode()  # not logged in: told to log in, then come back
    assert "log in" in landing and f"next={path_of(link)}" in landing.replace("%2F", "/")
    joining = squatter.get(path_of(link)).content.decode()  # only with acme's link, logged in as the account
    assert "Join Acme" in joining
    joined = squatter.post(path_of(link), {"join": "1"})
    assert joined.status_code == 302 and joined["Location"] == "/console/"
    member.refresh_from_db()
    assert member.joined_at is not None
    assert AuditEvent.objects.for_org(acme.org).filter(action="member.join", target="cfo@acme.example").exists()


def test_a_link_to_join_is_for_its_own_account_only(acme, globex, acme_admin):
    other = person(globex, Role.ADMIN, email="someone@globex.example")
    person(globex, Role.VIEWER, email="cfo@acme.example")
    page = acme_admin.client.post("/console/members/", {"email": "cfo@acme.example", "role": "viewer"})
    link = page.content.decode().split('id="invitation-url">')[1].split("<")[0]
    refused = other.client.post(path_of(link), {"join": "1"}, follow=True)
    assert "This link is for cfo@acme.example" in refused.content.decode()
    assert Membership.objects.for_org(acme.org).get(user__username="cfo@acme.example").joined_at is None


def test_an_admin_of_one_organization_cannot_take_over_an_owner_who_never_set_a_password(acme, globex):
    """create_org's owner has no password until someone sets one: a link of another
    organization that added them must not be the one that does."""
    owner = Membership.objects.for_org(acme.org).get(role=Role.OWNER).user
    assert not owner.has_usable_password()
    added = globex.client_with_role(Role.ADMIN).post("/api/v1/members", {"email": owner.email, "role": "viewer"}, format="json")
    link = added.json()["invitation_url"]
    assert b"Set password" not in Client().get(path_of(link)).content
    browser, refused = accept(link)
    assert refused.status_code == 302 and refused["Location"] == "/console/login/"
    owner.refresh_from_db()
    assert not owner.has_usable_password()
    assert browser.get("/api/v1/organization").status_code in (401, 403)
    _, accepted = accept(invite(acme.org, owner.email))  # the operator's link still does
    assert accepted.status_code == 302 and accepted["Location"] == "/console/"


def test_failed_logins_are_throttled_per_account_and_per_address(acme, acme_admin, settings):
    client = Client(REMOTE_ADDR="203.0.113.7")
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert client.post("/console/login/", {"username": acme_admin.email, "password": "wrong"}).status_code == 200
    assert client.post("/console/login/", {"username": acme_admin.email, "password": "wrong"}).status_code == 429
    locked = client.post("/console/login/", {"username": acme_admin.email, "password": PASSWORD})
    assert locked.status_code == 429 and b"Too many failed logins" in locked.content
    # The account stays locked from another address; another account from this address too.
    assert Client(REMOTE_ADDR="198.51.100.1").post("/console/login/", {"username": acme_admin.email, "password": PASSWORD}).status_code == 429
    other = person(acme, Role.VIEWER, email="other@acme.example")
    assert client.post("/console/login/", {"username": other.email, "password": PASSWORD}).status_code == 429


def test_the_case_of_an_email_does_not_make_another_account_to_try(acme_admin, settings):
    for n in range(settings.AXES_FAILURE_LIMIT):
        variant = acme_admin.email.upper() if n % 2 else f" {acme_admin.email.title()} "
        Client(REMOTE_ADDR=f"203.0.113.{n}").post("/console/login/", {"username": variant, "password": "wrong"})
    assert Client(REMOTE_ADDR="198.51.100.9").post("/console/login/", {"username": acme_admin.email, "password": PASSWORD}).status_code == 429


def test_a_wrong_password_says_so_without_saying_which_part(acme_admin):
    response = Client().post("/console/login/", {"username": acme_admin.email, "password": "wrong"})
    assert response.status_code == 200 and b"correct email and password" in response.content.replace(b"\n", b" ")


def test_logout_ends_the_session(acme_admin):
    assert acme_admin.client.post("/console/logout/").status_code == 302
    assert acme_admin.client.get("/console/").status_code == 302


def test_sessions_expire(acme_admin, settings):
    assert settings.SESSION_COOKIE_AGE == 12 * 3600 and settings.SESSION_COOKIE_HTTPONLY
    Session.objects.filter(session_key=acme_admin.client.session.session_key).update(
        expire_date=timezone.now() - timedelta(seconds=1))
    response = acme_admin.client.get("/console/")
    assert response.status_code == 302 and response["Location"].startswith("/console/login/")


def test_a_person_in_two_organizations_switches_and_acts_with_each_role(acme, globex):
    acme_side = person(acme, Role.VIEWER, email="both@corp.example")
    person(globex, Role.ADMIN, email="both@corp.example")
    client = acme_side.client
    assert client.get("/console/api-keys/").content.count(b"Create key") == 0
    assert client.post("/console/switch/", {"org": str(globex.org.pk)}).status_code == 302
    page = client.get("/console/api-keys/")
    assert b"Globex" in page.content and b"Create key" in page.content
    outsider = make_tenant("Initech")
    assert client.post("/console/switch/", {"org": str(outsider.org.pk)}).status_code == 404
    assert client.post("/console/switch/", {"org": "not a uuid"}).status_code == 404


def test_a_removed_member_is_logged_out(acme, acme_viewer):
    acme_viewer.membership.delete()
    response = acme_viewer.client.get("/console/")
    assert response.status_code == 302 and response["Location"] == "/console/login/"


def test_joining_is_audited(acme):
    accept(invite(acme.org, "audited@acme.example"))
    actions = set(AuditEvent.objects.for_org(acme.org).values_list("action", flat=True))
    assert {"member.add", "member.invite", "member.password_set"} <= actions
