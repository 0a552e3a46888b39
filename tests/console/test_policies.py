"""Policies in the console: forms built from the RANGES tables, a bad value named next to its
field, zero retention confirmed before it purges, every change audited, the reward spec's
versions with what changed, and traffic limits' API twin."""

import io
import json

import pytest
from django.core.management import call_command
from django.urls import reverse

from console.views.policies import POLICIES
from serving.policies import Limits
from serving.traffic import traffic_limits_for
from tenants.models import AuditEvent
from tenants.ranges import settings_of
from tests.factories import record


def form_of(page) -> dict:
    """The values a browser would submit from the page's policy form."""
    form = page.context["form"]
    values = {}
    for name, field in form.fields.items():
        value = form.initial.get(name)
        if isinstance(value, bool):
            if value:
                values[name] = "on"
        else:
            values[name] = value
    return values


@pytest.mark.parametrize("slug", list(POLICIES))
def test_every_policy_has_a_field_per_setting_and_saves_unchanged(acme, acme_admin, slug):
    page = acme_admin.client.get(reverse("console:policy", kwargs={"policy": slug}))
    settings = settings_of(POLICIES[slug].policy_class)
    for name, setting in settings.items():
        keys = [f"{name}.{key}" for key in setting.choices] if setting.kind is dict else [name]
        assert all(f'name="{key}"' in page.content.decode() for key in keys), name
    response = acme_admin.client.post(reverse("console:policy", kwargs={"policy": slug}), form_of(page), follow=True)
    assert b"Nothing changed" in response.content


def test_a_bad_value_is_named_next_to_its_field_and_nothing_changes(acme, acme_admin):
    page = acme_admin.client.get("/console/policies/privacy/")
    response = acme_admin.client.post("/console/policies/privacy/", {**form_of(page), "retention_days": 0})
    html = response.content.decode()
    assert response.status_code == 200 and "from 1 to 3650" in html
    field = html.split('name="retention_days"')[1].split("</div>")[0]
    assert "retention_days must be a whole number from 1 to 3650, not 0." in field
    assert acme.client.get("/api/v1/privacy-policy").json()["retention_days"] == 30


def test_a_bad_weight_is_named_in_its_table(acme_admin):
    page = acme_admin.client.get("/console/policies/reward-spec/")
    response = acme_admin.client.post("/console/policies/reward-spec/", {**form_of(page), "weights.edit_persisted": 50})
    assert b"weights.edit_persisted must be a number from -10 to 10, not 50.0." in response.content


def test_a_change_through_the_console_is_what_the_api_reads_and_is_audited(acme, acme_admin):
    page = acme_admin.client.get("/console/policies/reward-spec/")
    acme_admin.client.post("/console/policies/reward-spec/", {**form_of(page), "kl_coef": 0.1, "weights.edit_persisted": 2})
    spec = acme.client.get("/api/v1/reward-spec").json()
    assert spec["kl_coef"] == 0.1 and spec["weights"]["edit_persisted"] == 2 and spec["version"] == 1
    event = AuditEvent.objects.for_org(acme.org).filter(action="reward_spec.update").get()
    assert event.actor == f"user:{acme_admin.email}" and event.before["kl_coef"] == 0.02


def test_reward_spec_versions_say_what_changed(acme, acme_admin):
    acme.client.put("/api/v1/reward-spec", {"kl_coef": 0.05}, format="json")
    acme.client.put("/api/v1/reward-spec", {"weights": {"dissatisfied_followup": -2}}, format="json")
    page = acme_admin.client.get("/console/policies/reward-spec/versions/").content.decode()
    assert page.index("<td>v2") < page.index("<td>v1")
    assert "<code>weights.dissatisfied_followup</code>: -1.0 → <strong>-2</strong>" in page
    assert "<code>kl_coef</code>: 0.02 → <strong>0.05</strong>" in page


def test_zero_retention_says_what_it_will_purge_and_waits_for_confirmation(acme, acme_admin):
    for _ in range(3):
        record(acme.client)
    page = acme_admin.client.get("/console/policies/privacy/")
    values = {**form_of(page), "training_enabled": ""}
    values.pop("store_content")
    asked = acme_admin.client.post("/console/policies/privacy/", values)
    assert b"The text of 3 interactions stored now will be purged" in asked.content
    assert acme.client.get("/api/v1/privacy-policy").json()["store_content"] is True
    confirmed = acme_admin.client.post("/console/policies/privacy/", {**values, "confirmed": "yes"}, follow=True)
    assert b"Privacy policy changed" in confirmed.content
    assert acme.client.get("/api/v1/privacy-policy").json()["store_content"] is False
    assert all(row["completion"] is None for row in acme.client.get("/api/v1/interactions").json()["results"])


def test_each_setting_says_what_it_does_and_its_range(acme_viewer):
    page = acme_viewer.client.get("/console/policies/privacy/").content.decode()
    assert "Recorded text older than this is purged. Allowed: from 1 to 3650." in page
    weights = acme_viewer.client.get("/console/policies/reward-spec/").content.decode()
    assert "Each from -10 to 10." in weights


def test_a_viewer_reads_a_policy_in_disabled_fields_without_a_save_button(acme_viewer):
    page = acme_viewer.client.get("/console/policies/canary/").content.decode()
    assert "Save changes" not in page and "disabled" in page


def test_traffic_limits_have_an_api_twin(acme, acme_admin, settings):
    assert acme.client.get("/api/v1/traffic-limits").json() == {**settings.GATEWAY_LIMITS}
    changed = acme.client.put("/api/v1/traffic-limits", {"max_concurrent": 3}, format="json")
    assert changed.status_code == 200 and changed.json()["max_concurrent"] == 3
    page = acme_admin.client.get("/console/policies/traffic-limits/")
    assert page.context["form"].initial["max_concurrent"] == 3
    bad = acme.client.put("/api/v1/traffic-limits", {"requests_per_minute": -1}, format="json")
    assert bad.status_code == 400 and "requests_per_minute" in bad.json()["error"]["details"]
    back = acme.client.put("/api/v1/traffic-limits", {"max_concurrent": None}, format="json")
    assert back.json()["max_concurrent"] == Limits().max_concurrent
    assert AuditEvent.objects.for_org(acme.org).filter(action="traffic_limits.update").count() == 2


def test_traffic_limits_are_for_admins(viewer):
    assert viewer.get("/api/v1/traffic-limits").status_code == 200
    assert viewer.put("/api/v1/traffic-limits", {"max_concurrent": 1}, format="json").status_code == 403


def test_the_consoles_traffic_limits_are_what_the_gateway_reads(acme, acme_admin):
    page = acme_admin.client.get("/console/policies/traffic-limits/")
    acme_admin.client.post("/console/policies/traffic-limits/", {**form_of(page), "requests_per_minute": 0})
    assert traffic_limits_for(org=acme.org).requests_per_minute == 0  # suspended (serving/gateway/views.py reads it)


def test_an_organizations_admins_may_lower_its_gateway_limits_but_only_the_operator_raise_them(acme, settings):
    """A limit is every other organization's protection too: above the deployment's default only
    what the platform's operator granted."""
    most = settings.GATEWAY_LIMITS["max_concurrent"]
    refused = acme.client.put("/api/v1/traffic-limits", {"max_concurrent": most + 1, "requests_per_minute": 1}, format="json")
    assert refused.status_code == 400 and set(refused.json()["error"]["details"]) == {"max_concurrent"}
    assert traffic_limits_for(org=acme.org).requests_per_minute == settings.GATEWAY_LIMITS["requests_per_minute"]  # nothing stored
    out = io.StringIO()
    call_command("traffic_limits", org=acme.org.slug, max_concurrent=most * 4, stdout=out)
    assert json.loads(out.getvalue())["max_concurrent"] == most * 4
    assert acme.client.put("/api/v1/traffic-limits", {"max_concurrent": 2}, format="json").status_code == 200
    assert acme.client.put("/api/v1/traffic-limits", {"max_concurrent": most * 4}, format="json").status_code == 200  # granted
    assert acme.client.put("/api/v1/traffic-limits", {"max_concurrent": most * 4 + 1}, format="json").status_code == 400
    call_command("traffic_limits", org=acme.org.slug, max_concurrent="default", stdout=io.StringIO())
    assert acme.client.put("/api/v1/traffic-limits", {"max_concurrent": most * 4}, format="json").status_code == 400
    actions = list(AuditEvent.objects.for_org(acme.org).filter(action__startswith="traffic_limits.").values_list("action", flat=True))
    assert actions.count("traffic_limits.grant") == 2 and actions.count("traffic_limits.update") == 2


def test_a_limit_past_any_number_is_named_not_a_server_error(acme):
    response = acme.client.put("/api/v1/traffic-limits", {"max_concurrent": 10**400}, format="json")
    assert response.status_code == 400 and "max_concurrent" in response.json()["error"]["details"]
