"""Cycles, alerts, gate thresholds and the canary policy through the tenant API (SPEC 8's shapes)."""

import pytest

from serving.models import AdapterVersion, Alert
from tenants.models import Role
from tests.factories import registered_adapter


def test_an_admin_starts_a_cycle_and_reads_its_state(acme, sent, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = acme.client.post("/api/v1/cycles", {}, format="json")
    assert response.status_code == 202 and set(response.json()) == {"id"}
    cycle_id = response.json()["id"]
    assert sent == [cycle_id]
    cycle = acme.client.get(f"/api/v1/cycles/{cycle_id}").json()
    assert {"id", "status", "adapter", "gate_report"} <= set(cycle)
    assert (cycle["id"], cycle["status"], cycle["adapter"], cycle["gate_report"]) == (cycle_id, "queued", None, None)
    assert [c["id"] for c in acme.client.get("/api/v1/cycles").json()["results"]] == [cycle_id]

    again = acme.client.post("/api/v1/cycles", {}, format="json")
    assert again.status_code == 409 and again.json()["error"]["details"] == {"active_cycle": cycle_id}


def test_cycles_need_training_on_and_an_admin(acme, globex, sent):
    assert globex.client.post("/api/v1/cycles", {}, format="json").status_code == 409  # training_enabled is off
    assert acme.client_with_role(Role.VIEWER).post("/api/v1/cycles", {}, format="json").status_code == 403
    assert acme.client.post("/api/v1/cycles", {"now": True}, format="json").status_code == 400
    assert acme.client.get("/api/v1/cycles/00000000-0000-0000-0000-000000000000").status_code == 404


def test_alerts_are_listed_for_the_organization(acme, settings, tmp_path):
    settings.SERVING_ADAPTERS_ROOT, settings.SERVING_BASE_MODEL_NAME = str(tmp_path / "a"), "isolation-base"
    adapter = registered_adapter(acme.org, tmp_path)
    AdapterVersion.objects.for_org(acme.org).filter(pk=adapter.pk).update(status="blocked")
    Alert.objects.create(org=acme.org, kind=Alert.Kind.REWARD_HACKING, adapter=adapter, message="blocked",
                         figures=[{"name": "ask_rate_on_clear", "candidate": 0.4, "incumbent": 0.1}])
    alerts = acme.client_with_role(Role.VIEWER).get("/api/v1/alerts").json()["results"]
    assert [(a["kind"], a["adapter"], a["figures"][0]["name"]) for a in alerts] == [("reward_hacking", adapter.name, "ask_rate_on_clear")]


def test_gate_thresholds_are_read_by_members_and_changed_by_admins(acme):
    defaults = acme.client.get("/api/v1/gate-thresholds").json()
    assert defaults["ask_rate_on_clear"] == 0.03 and defaults["min_tenant_items"] == 20
    changed = acme.client.put("/api/v1/gate-thresholds", {"ask_rate_on_clear": 0.05}, format="json")
    assert changed.status_code == 200 and changed.json() == {**defaults, "ask_rate_on_clear": 0.05}
    for bad in ({"ask_rate_on_clear": -1}, {"no_such_check": 0.1}, {"min_tenant_items": 0.5}, ["ask_rate_on_clear"]):
        assert acme.client.put("/api/v1/gate-thresholds", bad, format="json").status_code == 400, bad
    assert acme.client_with_role(Role.VIEWER).put("/api/v1/gate-thresholds", {"edit_rate": 0.5}, format="json").status_code == 403
    assert acme.client.get("/api/v1/gate-thresholds").json()["ask_rate_on_clear"] == 0.05
    assert acme.org.audit_events.filter(action="gate_thresholds.update").count() == 1


def test_the_canary_policy_is_read_by_members_and_changed_by_admins(acme, settings):
    settings.CANARY_POLICY = {**settings.CANARY_POLICY, "min_interactions": 80}
    defaults = acme.client_with_role(Role.VIEWER).get("/api/v1/canary-policy").json()
    assert defaults == {"share": 0.5, "min_interactions": 80, "edit_persisted_rate": 0.02, "dissatisfied_rate": 0.02, "latency": 0.25,
                        "invalid_tool_call_rate": 0.02, "max_hours": 168.0, "alpha": 0.05}
    changed = acme.client.put("/api/v1/canary-policy", {"share": 0.2, "min_interactions": 40}, format="json")
    assert changed.status_code == 200 and changed.json() == {**defaults, "share": 0.2, "min_interactions": 40}

    settings.CANARY_POLICY = {**settings.CANARY_POLICY, "latency": 0.5}  # a default it did not set still reaches it
    assert acme.client.get("/api/v1/canary-policy").json() == {**defaults, "share": 0.2, "min_interactions": 40, "latency": 0.5}


@pytest.mark.parametrize("bad, names", [
    ({"share": 1}, "share"), ({"share": 0.005}, "share"), ({"share": "half"}, "share"), ({"share": True}, "share"),
    ({"min_interactions": 0}, "min_interactions"), ({"min_interactions": 10.5}, "min_interactions"),
    ({"latency": -0.1}, "latency"), ({"traffic": 0.3}, "traffic"), (["share"], "object"), ({"alpha": 0}, "alpha"),
])
def test_a_bad_canary_policy_is_refused_whole_and_named(acme, bad, names):
    before = acme.client.get("/api/v1/canary-policy").json()
    body = {"min_interactions": 30, **bad} if isinstance(bad, dict) else bad  # a valid change beside it is not stored either
    response = acme.client.put("/api/v1/canary-policy", body, format="json")
    assert response.status_code == 400 and names in response.json()["error"]["message"], response.json()
    assert acme.client.get("/api/v1/canary-policy").json() == before
    assert not acme.org.audit_events.filter(action="canary_policy.update").exists()


def test_every_setting_out_of_range_is_named_in_the_details(acme):
    response = acme.client.put("/api/v1/canary-policy", {"share": 2, "latency": -1, "min_interactions": 5}, format="json")
    assert response.status_code == 400 and set(response.json()["error"]["details"]) == {"share", "latency"}


def test_null_puts_a_setting_back_on_the_default(acme):
    acme.client.put("/api/v1/canary-policy", {"share": 0.3, "latency": 1.0}, format="json")
    reset = acme.client.put("/api/v1/canary-policy", {"share": None}, format="json").json()
    assert (reset["share"], reset["latency"]) == (0.5, 1.0)
    assert acme.org.canary_settings.values == {"latency": 1.0}


def test_only_admins_change_the_canary_policy_and_each_change_is_audited(acme):
    assert acme.client_with_role(Role.VIEWER).put("/api/v1/canary-policy", {"share": 0.3}, format="json").status_code == 403
    acme.client.put("/api/v1/canary-policy", {"share": 0.3}, format="json")
    acme.client.put("/api/v1/canary-policy", {"min_interactions": 50}, format="json")
    acme.client.put("/api/v1/canary-policy", {"share": 0.3}, format="json")  # no change: nothing to audit
    events = list(acme.org.audit_events.filter(action="canary_policy.update").order_by("at", "pk").values_list("before", "after"))
    assert events == [({}, {"share": 0.3}), ({"share": 0.3}, {"share": 0.3, "min_interactions": 50})]
