"""How each model does on live traffic (`GET /api/v1/live-figures`, serving.live): the
gateway's completions by the version that served them, rates of those whose outcome is known
(invalid tool calls: of every completion served)."""

from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from tenants.models import Interaction
from tests.factories import record, served

PERSISTED = ("edit_accepted", "edit_persisted")
REVERTED = ("edit_accepted", "edit_reverted")
INVALID = ("tool_call_invalid",)
PENDING = ("edit_accepted",)  # persisted or reverted: not yet known


def figures(client, **query) -> dict:
    response = client.get("/api/v1/live-figures", query)
    assert response.status_code == 200, response.content
    return {model["model"]: model for model in response.json()["models"]}


def test_each_model_that_served_is_counted_on_the_completions_whose_outcome_is_known(acme, viewer):
    for feedback in [PERSISTED] * 3 + [REVERTED, INVALID]:
        served(acme.org, feedback=feedback, latency_ms=100.0)
    for feedback in [PERSISTED] * 6 + [("dissatisfied_followup",), INVALID, PENDING, PENDING]:
        served(acme.org, adapter="acme@v2", feedback=feedback, latency_ms=200.0)
    served(acme.org, adapter="acme@v10", feedback=PERSISTED)

    models = figures(viewer)
    assert list(models) == [settings.SERVING_BASE_MODEL_NAME, "acme@v2", "acme@v10"]  # by version, not as strings
    base, v2 = models[settings.SERVING_BASE_MODEL_NAME], models["acme@v2"]
    assert base["adapter"] is None and (base["served"], base["settled"], base["edit_persisted"], base["tool_call_invalid"]) == (5, 5, 3, 1)
    assert base["edit_persisted_rate"] == pytest.approx(0.6) and base["tool_call_invalid_rate"] == pytest.approx(0.2)
    assert (v2["served"], v2["settled"]) == (10, 8)  # two edits still waiting for their outcome
    assert v2["edit_persisted_rate"] == pytest.approx(6 / 8) and v2["dissatisfied_rate"] == pytest.approx(1 / 8)
    assert v2["latency_mean_ms"] == pytest.approx(200.0)
    # Invalid calls are reported at once: of every completion served, not only the settled ones.
    assert v2["tool_call_invalid_rate"] == pytest.approx(1 / 10)


def test_a_model_with_nothing_settled_yet_has_no_rates(acme, viewer):
    served(acme.org, adapter="acme@v1", feedback=PENDING)
    v1 = figures(viewer)["acme@v1"]
    assert (v1["served"], v1["settled"]) == (1, 0)
    assert v1["edit_persisted_rate"] is None and v1["latency_mean_ms"] is None
    assert v1["tool_call_invalid_rate"] == 0.0  # known at once: none was reported


def test_only_the_gateways_completions_in_the_window_count(acme, viewer):
    """A recording through the API names its adapter itself, and any key may make one."""
    record(viewer, adapter="acme@v1")
    old = served(acme.org, adapter="acme@v1", feedback=PERSISTED)
    Interaction.objects.for_org(acme.org).filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=10))
    served(acme.org, adapter="acme@v1", feedback=INVALID)

    assert figures(viewer)["acme@v1"]["served"] == 1  # the last 7 days by default
    v1 = figures(viewer, days=30)["acme@v1"]
    assert (v1["served"], v1["edit_persisted"], v1["tool_call_invalid"]) == (2, 1, 1)


def test_another_organizations_traffic_is_not_counted(acme, globex, viewer):
    served(globex.org, adapter="globex@v1", feedback=PERSISTED)
    served(acme.org, feedback=PERSISTED)
    assert list(figures(viewer)) == [settings.SERVING_BASE_MODEL_NAME]
    assert list(figures(globex.client)) == ["globex@v1"]


@pytest.mark.parametrize("query", [{"days": 0}, {"days": 91}, {"days": "a week"}, {"days": "true"}, {"since": "2026-01-01"}])
def test_a_window_it_cannot_count_is_a_clear_400(viewer, query):
    response = viewer.get("/api/v1/live-figures", query)
    assert response.status_code == 400 and response.json()["error"]["message"].startswith(tuple(query))
