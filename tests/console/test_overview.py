"""The overview: what serves, the canary, the last cycles, open alerts, and the plots' data,
aggregated per hour and served version in the database, checked against a hand-computed case."""

from datetime import datetime, timedelta, timezone

from django.utils import timezone as django_timezone

from serving.models import AdapterVersion, Route
from tenants.models import Interaction
from tests.factories import registered_adapter, served
from training.models import Cycle, TrainingRun


def at(interaction, moment: datetime) -> None:
    Interaction.objects.for_org(interaction.org).filter(pk=interaction.pk).update(created_at=moment)


def test_the_plots_data_is_each_hours_share_of_interactions_per_served_version(acme, globex, acme_viewer, adapters_root):
    first = django_timezone.now().replace(minute=10, second=0, microsecond=0) - timedelta(hours=3)
    second = first + timedelta(hours=1)
    base = [served(acme.org, feedback=kinds, latency_ms=latency) for kinds, latency in (
        (("edit_persisted", "edit_persisted"), 100.0),  # two events, one interaction
        (("edit_persisted", "dissatisfied_followup"), 200.0),
        ((), 300.0),
        (("edit_rejected",), None),
    )]
    on_v1 = [served(acme.org, adapter="acme@v1", feedback=kinds, latency_ms=latency) for kinds, latency in (
        (("tool_call_invalid",), 50.0),
        (("edit_accepted",), 70.0),
    )]
    for interaction in base:
        at(interaction, first)
    for interaction in on_v1:
        at(interaction, second)
    at(served(globex.org, feedback=("tool_call_invalid",), latency_ms=9999.0), first)  # another organization's
    adapter = registered_adapter(acme.org, adapters_root.parent)
    AdapterVersion.objects.for_org(acme.org).filter(pk=adapter.pk).update(deployed_at=second)

    data = acme_viewer.client.get("/console/charts/quality.json").json()
    assert data["period"] == "minute"  # less than 6 hours of traffic
    assert data["times"] == [int(first.timestamp()), int(second.timestamp())]
    assert data["versions"] == ["base model", "acme@v1"]
    assert data["series"]["base model"] == {"interactions": [4, None], "edit_persisted": [50.0, None],
                                            "dissatisfied_followup": [25.0, None], "tool_call_invalid": [0.0, None],
                                            "latency_ms": [200.0, None]}
    assert data["series"]["acme@v1"] == {"interactions": [None, 2], "edit_persisted": [None, 0.0],
                                         "dissatisfied_followup": [None, 0.0], "tool_call_invalid": [None, 50.0],
                                         "latency_ms": [None, 60.0]}
    assert data["takeovers"] == [{"version": adapter.name, "at": int(second.timestamp())}]
    table = acme_viewer.client.get("/console/").content.decode()
    assert "acme@v1" in table and "60 ms" in table and "200 ms" in table

    at(served(acme.org, feedback=(), latency_ms=400.0), first - timedelta(hours=6))  # older traffic: plotted by the hour
    data = acme_viewer.client.get("/console/charts/quality.json").json()
    hour = first.replace(minute=0)
    assert data["period"] == "hour" and data["period_seconds"] == 3600
    assert data["times"] == [int((hour - timedelta(hours=6)).timestamp()), int(hour.timestamp()), int((hour + timedelta(hours=1)).timestamp())]
    assert data["series"]["base model"]["edit_persisted"] == [0.0, 50.0, None]
    assert data["series"]["base model"]["latency_ms"] == [400.0, 200.0, None]


def test_the_overview_says_what_serves_the_canary_and_the_last_cycles(acme, acme_viewer, adapters_root):
    serving, candidate = (registered_adapter(acme.org, adapters_root.parent) for _ in range(2))
    AdapterVersion.objects.for_org(acme.org).filter(pk=serving.pk).update(status="serving", deployed_at=django_timezone.now())
    Route.objects.create(org=acme.org, serving=serving, canary=candidate, canary_share=0.5)
    Cycle.objects.create(org=acme.org, trigger=TrainingRun.Trigger.REQUEST, requested_by="owner", status=Cycle.Status.CANARY,
                         candidate=candidate, incumbent=serving, canary_report={
                             "candidate": {"interactions": 12, "persisted": 7}, "incumbent": {"interactions": 14, "persisted": 5}})
    page = acme_viewer.client.get("/console/").content.decode()
    assert serving.name in page and "since" in page
    assert candidate.name in page and "so far 7/12 persisted vs. incumbent 5/14" in page


def test_hours_before_the_window_are_left_out(acme, acme_viewer):
    old = served(acme.org)
    at(old, datetime.now(timezone.utc) - timedelta(days=15))
    assert acme_viewer.client.get("/console/charts/quality.json").json()["times"] == []


def test_the_reward_plot_has_a_point_per_training_run_that_kept_its_mean_reward(acme, globex, acme_viewer, adapters_root):
    now = django_timezone.now()
    candidate = registered_adapter(acme.org, adapters_root.parent)
    for org, finished, dataset, adapter in (
        (acme.org, now - timedelta(hours=5), {"examples": 40, "mean_reward": -0.25}, None),
        (acme.org, now - timedelta(hours=2), {"examples": 60, "mean_reward": 0.5}, candidate),
        (acme.org, now - timedelta(hours=1), {"examples": 10}, None),  # trained before runs kept their mean reward
        (acme.org, now - timedelta(days=20), {"examples": 10, "mean_reward": 0.1}, None),  # before the window
        (globex.org, now - timedelta(hours=3), {"examples": 10, "mean_reward": 0.9}, None),  # another organization's
    ):
        TrainingRun.objects.create(org=org, trigger=TrainingRun.Trigger.REQUEST, requested_by="owner", status=TrainingRun.Status.SUCCEEDED,
                                   finished_at=finished, dataset=dataset, candidate=adapter)
    runs = acme_viewer.client.get("/console/charts/quality.json").json()["runs"]
    assert runs == {"times": [int((now - timedelta(hours=5)).timestamp()), int((now - timedelta(hours=2)).timestamp())],
                    "mean_reward": [-0.25, 0.5], "candidates": [None, candidate.name], "examples": [40, 60]}
    table = acme_viewer.client.get("/console/").content.decode()
    assert "-0.250" in table and "0.500" in table and "0.900" not in table
