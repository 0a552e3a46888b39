"""People of the console: acme's owner, admin and viewer as logged-in test clients, and what
the pages show (an interaction with feedback, a task). Browser fixtures are in
tests/console/browser/conftest.py."""

from dataclasses import dataclass

import pytest
from django.test import Client

from tenants.models import Membership, Role
from tenants.organizations import user_for_email
from tests.factories import Tenant, served

PASSWORD = "a long and unusual passphrase 7"


@dataclass
class Person:
    email: str
    membership: Membership
    client: Client  # logged in, acting in the membership's organization


def person(tenant: Tenant, role: str, *, email: str | None = None, csrf_checks: bool = False) -> Person:
    """A member of the tenant's organization with a password, and a client logged in as them."""
    email = email or f"{role}@{tenant.org.slug}.example"
    user = user_for_email(email)
    if not user.has_usable_password():  # a second organization's membership keeps the first's session valid
        user.set_password(PASSWORD)
        user.save()
    membership = Membership.objects.for_org(tenant.org).filter(user=user).first() or Membership.objects.create(
        org=tenant.org, user=user, role=role)
    return Person(email=email, membership=membership, client=logged_in(user, tenant.org, csrf_checks=csrf_checks))


def logged_in(user, org, *, csrf_checks: bool = False) -> Client:
    client = Client(enforce_csrf_checks=csrf_checks)
    client.force_login(user)
    session = client.session
    session["org_id"] = str(org.pk)
    session.save()
    return client


@pytest.fixture
def acme_owner(acme) -> Person:
    return person(acme, Role.OWNER, email="owner@acme.example")


@pytest.fixture
def acme_admin(acme) -> Person:
    return person(acme, Role.ADMIN)


@pytest.fixture
def acme_viewer(acme) -> Person:
    return person(acme, Role.VIEWER)


@pytest.fixture
def acme_interaction(acme):
    return served(acme.org, feedback=("edit_accepted", "edit_persisted"))


@pytest.fixture
def globex_interaction(globex):
    return served(globex.org, feedback=("edit_rejected",))


