"""Reward specs (GET/PUT /api/v1/reward-spec, versioned, audited) and reward distillation."""

import pytest

from tenants.models import AuditEvent
from training.rewards import RewardSpecValues, interaction_reward, outcome_shares, reward_spec_get


def test_an_organization_starts_with_the_default_spec(acme):
    spec = acme.client.get("/api/v1/reward-spec").json()
    assert spec["version"] == 0 and spec["created_at"] is None
    assert spec["weights"]["edit_persisted"] > 0 > spec["weights"]["tool_call_invalid"]
    assert spec["weights"]["dissatisfied_followup"] < 0 and spec["kl_coef"] > 0


def test_a_change_is_a_new_version_that_merges_weights_and_is_audited(acme, admin):
    response = admin.put("/api/v1/reward-spec", {"weights": {"edit_accepted": 0.75}, "kl_coef": 0.05}, format="json")
    assert response.status_code == 200, response.content
    spec = response.json()
    assert spec["version"] == 1 and spec["kl_coef"] == 0.05
    assert spec["weights"]["edit_accepted"] == 0.75 and spec["weights"]["edit_persisted"] == 1.0  # the others stay
    second = admin.put("/api/v1/reward-spec", {"outcome_credit": "discounted"}, format="json").json()
    assert second["version"] == 2 and second["weights"]["edit_accepted"] == 0.75
    assert AuditEvent.objects.for_org(acme.org).filter(action="reward_spec.update").count() == 2


def test_a_change_that_changes_nothing_is_no_new_version(acme, admin):
    """Each version is kept and listed: empty PUTs in a loop would bury the ones that mattered."""
    admin.put("/api/v1/reward-spec", {"kl_coef": 0.05}, format="json")
    for body in ({}, {"kl_coef": 0.05}, {"weights": {}}):
        assert admin.put("/api/v1/reward-spec", body, format="json").json()["version"] == 1
    assert AuditEvent.objects.for_org(acme.org).filter(action="reward_spec.update").count() == 1


def test_a_viewer_cannot_change_the_spec(viewer):
    assert viewer.put("/api/v1/reward-spec", {"kl_coef": 0.1}, format="json").status_code == 403


@pytest.mark.parametrize("body", [
    {"weights": {"thumbs_up": 1.0}},
    {"weights": {"edit_persisted": 1e6}},
    {"weights": {"edit_persisted": "lots"}},
    {"kl_coef": -0.1},
    {"kl_coef": 2},
    {"latency_penalty_per_s": -1},
    {"outcome_credit": "all_to_the_last"},
    {"outcome_discount": 0},
    {"reward_hacking": True},
])
def test_an_invalid_change_is_refused_and_the_spec_stays(acme, admin, body):
    response = admin.put("/api/v1/reward-spec", body, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["error"]["message"]
    assert reward_spec_get(org=acme.org).version == 0


def test_one_organizations_spec_is_not_anothers(acme, globex, admin):
    admin.put("/api/v1/reward-spec", {"kl_coef": 0.3}, format="json")
    assert globex.client.get("/api/v1/reward-spec").json()["kl_coef"] == RewardSpecValues(version=0).kl_coef


def test_the_reward_sums_event_weights_minus_latency():
    spec = RewardSpecValues(version=0)
    reward = interaction_reward(spec=spec, events=[("edit_accepted", None), ("edit_persisted", None)], latency_ms=2000)
    assert reward == pytest.approx(0.25 + 1.0 - 0.05 * 2)
    assert interaction_reward(spec=spec, events=[("tool_call_invalid", None)], latency_ms=None) == -2.0
    worst_edit = interaction_reward(spec=spec, events=[("edit_rejected", None), ("dissatisfied_followup", None)], latency_ms=None)
    assert interaction_reward(spec=spec, events=[("tool_call_invalid", None)], latency_ms=None) < worst_edit


def test_a_task_outcome_is_spread_over_the_steps_of_the_task():
    spec = RewardSpecValues(version=0)
    assert outcome_shares(steps=4, spec=spec) == [0.25] * 4
    discounted = outcome_shares(steps=3, spec=RewardSpecValues(version=0, outcome_credit="discounted", outcome_discount=0.5))
    assert discounted == pytest.approx([1 / 7, 2 / 7, 4 / 7]) and sum(discounted) == pytest.approx(1.0)
    step = interaction_reward(spec=spec, events=[], latency_ms=None, outcome_share=0.25, outcome_value=1.0)
    assert step == pytest.approx(0.25)
