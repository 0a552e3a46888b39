"""Every console page, enumerated from its URL patterns like the API's isolation test, so that a
new page is covered without a test of its own: an anonymous visitor is sent to the login page,
a viewer gets what its roles allow and a forged change is refused, another organization's ids
are 404 whatever the role, and a POST without the CSRF token is refused."""

import tempfile
from pathlib import Path

import pytest
from django.urls import URLPattern, reverse

from console import urls as console_urls
from console.access import Page, role_needed
from tenants.models import ApiKey, AuditEvent, Membership, Role
from serving.models import Alert
from tenants.recording import task_create
from tests.console.conftest import logged_in, person
from tests.factories import registered_adapter
from training.models import Cycle, TrainingRun

PAGES = [p for p in console_urls.urlpatterns if isinstance(p, URLPattern) and issubclass(p.callback.view_class, Page)]
WAY_IN = [p for p in console_urls.urlpatterns if p not in PAGES]
OBJECT_IDS = {"member_id", "key_id", "interaction_id", "task_id", "cycle_id", "name", "alert_id"}


def methods_of(pattern: URLPattern) -> list[str]:
    return [method for method in ("get", "post") if hasattr(pattern.callback.view_class, method)]


def ids_of(tenant, interaction) -> dict:
    """An object of the tenant's for each kind of id a console URL takes."""
    adapter = registered_adapter(tenant.org, Path(tempfile.mkdtemp(prefix="console-pages-")))
    return {
        "cycle_id": Cycle.objects.create(org=tenant.org, trigger=TrainingRun.Trigger.REQUEST, requested_by="owner").pk,
        "name": adapter.name,
        "alert_id": Alert.objects.create(org=tenant.org, kind=Alert.Kind.REWARD_HACKING, adapter=adapter,
                                         message="blocked", figures=[]).pk,
        "member_id": Membership.objects.for_org(tenant.org).first().public_id,
        "key_id": ApiKey.objects.for_org(tenant.org).first().pk,
        "interaction_id": interaction.pk,
        "task_id": task_create(org=tenant.org).pk,
        "policy": "privacy",
        "token": "not-a-token",
    }


def url_of(pattern: URLPattern, ids: dict) -> str:
    return reverse(f"console:{pattern.name}", kwargs={name: ids[name] for name in pattern.pattern.converters})


def ids(pattern: URLPattern) -> str:
    return pattern.name


@pytest.fixture
def acme_ids(acme, acme_interaction, adapters_root) -> dict:
    return ids_of(acme, acme_interaction)


@pytest.fixture
def globex_ids(globex, globex_interaction, adapters_root) -> dict:
    return ids_of(globex, globex_interaction)


def test_the_enumeration_finds_every_page():
    assert len(PAGES) >= 24 and {p.name for p in WAY_IN} == {"login", "logout", "invitation", "switch"}


@pytest.mark.parametrize("pattern", PAGES, ids=ids)
def test_an_anonymous_visitor_is_sent_to_the_login_page(client, pattern, acme_ids):
    url = url_of(pattern, acme_ids)
    for method in methods_of(pattern):
        response = getattr(client, method)(url)
        assert response.status_code == 302 and response["Location"].startswith(reverse("console:login")), (method, url)


@pytest.mark.parametrize("pattern", PAGES, ids=ids)
def test_a_viewer_sees_what_its_role_allows_and_cannot_change_anything(pattern, acme, acme_viewer, acme_ids):
    url = url_of(pattern, acme_ids)
    if "get" in methods_of(pattern):
        allowed = role_needed(pattern.callback.view_class, "GET") == Role.VIEWER
        assert acme_viewer.client.get(url).status_code in ((200, 302) if allowed else (403,)), url
    if "post" in methods_of(pattern):
        events = AuditEvent.objects.for_org(acme.org).count()
        response = acme_viewer.client.post(url, {"role": "owner", "name": "x", "email": "x@x.example", "confirm": acme.org.slug,
                                                 "retention_days": 1, "store_content": "", "confirmed": "yes"})
        assert response.status_code == 403, url
        assert AuditEvent.objects.for_org(acme.org).count() == events


@pytest.mark.parametrize("pattern", [p for p in PAGES if OBJECT_IDS & set(p.pattern.converters)], ids=ids)
@pytest.mark.parametrize("role", [Role.VIEWER, Role.ADMIN, Role.OWNER])
def test_another_organizations_ids_are_404_for_every_role_and_method(pattern, role, acme, globex_ids):
    member = person(acme, role, email=f"{role}-isolation@acme.example")
    url = url_of(pattern, globex_ids)
    for method in methods_of(pattern):
        assert getattr(member.client, method)(url).status_code == 404, (method, url)


@pytest.mark.parametrize("pattern", [p for p in PAGES if "get" in methods_of(p)], ids=ids)
def test_an_owner_opens_every_page(pattern, acme_owner, acme_ids, settings, tiny_base_model):
    settings.SERVING_BASE_MODEL_DIR = str(tiny_base_model)  # a download's manifest names the base model's fingerprint
    response = acme_owner.client.get(url_of(pattern, acme_ids))
    assert response.status_code in (200, 302)
    if response.status_code == 200 and response["Content-Type"] == "application/json":
        assert response.json()
    elif response.status_code == 200 and response["Content-Type"] == "application/gzip":
        assert b"".join(response.streaming_content)[:2] == b"\x1f\x8b"
    elif response.status_code == 200:
        assert b"<h1>" in response.content


@pytest.mark.parametrize("pattern", [p for p in console_urls.urlpatterns if "post" in methods_of(p)], ids=ids)
def test_a_post_without_the_csrf_token_is_refused(pattern, acme, acme_owner, acme_ids):
    client = logged_in(acme_owner.membership.user, acme.org, csrf_checks=True)
    events = AuditEvent.objects.for_org(acme.org).count()
    assert client.post(url_of(pattern, acme_ids), {"confirm": acme.org.slug}).status_code == 403
    assert AuditEvent.objects.for_org(acme.org).count() == events


def test_a_missing_policy_is_404(acme_owner):
    assert acme_owner.client.get("/console/policies/no-such-policy/").status_code == 404


def test_console_errors_are_pages_and_api_errors_stay_json(acme_owner, acme):
    page = acme_owner.client.get("/console/interactions/00000000-0000-0000-0000-000000000000/")
    assert page.status_code == 404 and page["Content-Type"].startswith("text/html")
    api = acme.client.get("/api/v1/interactions/00000000-0000-0000-0000-000000000000")
    assert api.status_code == 404 and api.json()["error"]["code"] == "not_found"
