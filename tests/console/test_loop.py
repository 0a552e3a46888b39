"""The loop's pages: cycles (start one, the gate report, live until the cycle ends), adapters
(promote and roll back through the page change what the gateway serves), alerts (acknowledged,
audited, counted in the navigation until then)."""

import pytest

from serving import registry
from serving.canary_rule import Arm, canary_decide
from serving.policies import CanaryPolicy
from serving.sequential import Moments
from serving.models import AdapterVersion, Alert
from tenants.models import AuditEvent, Role
from tests.console.conftest import person
from tests.factories import make_tenant, registered_adapter, served
from tests.serving.gateway_calls import ask, gateway_client
from training.models import Cycle, TrainingRun

CHECK = {"gate": "hacking", "name": "invalid_tool_call_rate", "candidate": 0.2, "reference": 0.01, "interval": [0.12, 0.26],
         "threshold": 0.02, "passed": False, "samples": 400, "note": "", "against": "base", "sequential": None}


def cycle_of(org, **fields) -> Cycle:
    return Cycle.objects.create(org=org, trigger=TrainingRun.Trigger.REQUEST, requested_by="user:owner@acme.example", **fields)


def test_an_admin_starts_a_cycle_and_lands_on_its_page(acme, acme_admin):
    response = acme_admin.client.post("/console/cycles/", follow=True)
    cycle = Cycle.objects.for_org(acme.org).get()
    assert response.redirect_chain[-1][0] == f"/console/cycles/{cycle.pk}/"
    assert b"A cycle was queued" in response.content and b"updating live" in response.content


def test_a_cycle_is_refused_while_training_is_off(globex):
    owner = person(globex, Role.OWNER, email="owner@globex.example")  # training is off by default
    response = owner.client.post("/console/cycles/", follow=True)
    assert b"Training is off" in response.content and not Cycle.objects.for_org(globex.org).exists()


def test_a_running_cycle_polls_and_a_finished_one_does_not(acme, acme_viewer):
    running = cycle_of(acme.org, status=Cycle.Status.GATING)
    page = acme_viewer.client.get(f"/console/cycles/{running.pk}/").content.decode()
    assert 'hx-trigger="every 2s"' in page and "Gates" in page
    Cycle.objects.for_org(acme.org).filter(pk=running.pk).update(status=Cycle.Status.BLOCKED)
    page = acme_viewer.client.get(f"/console/cycles/{running.pk}/").content.decode()
    assert "hx-trigger" not in page and "Blocked" in page


def test_the_gate_report_is_a_table_with_each_checks_figures(acme, acme_viewer):
    cycle = cycle_of(acme.org, status=Cycle.Status.BLOCKED, gate_report={
        "passed": False, "checks": [CHECK], "blocked_by": ["hacking/invalid_tool_call_rate"], "seconds": 3.0,
        "candidate": "acme@v1", "incumbent": "base", "sampling": {}})
    page = acme_viewer.client.get(f"/console/cycles/{cycle.pk}/").content.decode()
    assert "Blocked by: hacking/invalid_tool_call_rate." in page
    row = page.split("invalid_tool_call_rate</td>")[1].split("</tr>")[0]
    for figure in ("0.200", "0.010", "base", "[0.120, 0.260]", "0.020", "400", "fail"):
        assert figure in row, figure


def test_a_guardrail_the_gates_could_not_show_safe_is_told_apart_from_one_shown_beyond(acme, acme_viewer):
    undecided = {**CHECK, "name": "ask_rate_on_clear", "interval": [-0.01, 0.04], "sequential": {"state": "undecided"}}
    cycle = cycle_of(acme.org, status=Cycle.Status.BLOCKED, gate_report={
        "passed": False, "checks": [{**CHECK, "sequential": {"state": "beyond"}}, undecided], "seconds": 3.0,
        "blocked_by": ["hacking/invalid_tool_call_rate", "hacking/ask_rate_on_clear"], "candidate": "acme@v1", "incumbent": "base"})
    page = acme_viewer.client.get(f"/console/cycles/{cycle.pk}/").content.decode()
    assert ">fail</span>" in page.split("invalid_tool_call_rate</td>")[1].split("</tr>")[0]
    assert ">not shown safe</span>" in page.split("ask_rate_on_clear</td>")[1].split("</tr>")[0]


def canary_page(org, client, candidate: Arm, incumbent: Arm, status=Cycle.Status.CANARY) -> str:
    report = canary_decide(candidate, incumbent, policy=CanaryPolicy(), out_of_time=False)
    cycle = cycle_of(org, status=status, canary_report=report.as_dict())
    return client.get(f"/console/cycles/{cycle.pk}/").content.decode()


def canary_check_row(page: str, name: str) -> str:
    return page.split("canary-checks")[1].split(f"<td>{name}</td>")[1].split("</tr>")[0]


def test_a_waiting_canary_shows_each_claims_evidence_against_its_boundary(acme, acme_viewer):
    latency = Moments(200, 500.0, 100.0)
    page = canary_page(acme.org, acme_viewer.client, Arm(200, 120, 10, latency, 240, 2), Arm(200, 100, 10, latency, 240, 2))
    assert "Canary: wait" in page
    persisted, dissatisfied = canary_check_row(page, "edit_persisted_rate"), canary_check_row(page, "dissatisfied_rate")
    assert "<td>undecided</td>" in persisted and "better: " in persisted and "worse: " in persisted and " / 2.30" in persisted
    assert "<td>undecided</td>" in dissatisfied and "within the margin: " in dissatisfied
    assert 'class="claim reached"' not in persisted + dissatisfied


def test_a_canary_says_which_claims_it_has_shown(acme, acme_viewer):
    latency = Moments(2000, 500.0, 100.0)
    page = canary_page(acme.org, acme_viewer.client, Arm(2000, 1400, 20, latency, 2400, 20), Arm(2000, 600, 300, latency, 2400, 20),
                       Cycle.Status.PROMOTED)
    assert "Canary: promote" in page
    assert "<td>not shown worse</td>" in canary_check_row(page, "invalid_tool_call_rate")  # a detector: nothing to show for a promotion
    arms = page.split("Canary: promote")[1].split("canary-checks")[0]
    assert '<td class="num">2400</td><td class="num">2000</td>' in arms and '<td class="num">20</td>' in arms
    persisted = canary_check_row(page, "edit_persisted_rate")
    assert "<td>shown better</td>" in persisted and 'class="claim reached">better: ' in persisted
    assert "<td>shown within the margin</td>" in canary_check_row(page, "dissatisfied_rate")

    page = canary_page(acme.org, acme_viewer.client, Arm(2000, 600, 300, latency, 2400, 20), Arm(2000, 1400, 20, latency, 2400, 20),
                       Cycle.Status.ROLLED_BACK)
    assert "Canary: roll_back" in page and "<td>shown worse</td>" in canary_check_row(page, "edit_persisted_rate")

    rising = canary_page(acme.org, acme_viewer.client, Arm(200, 120, 10, latency, 240, 12), Arm(200, 100, 10, latency, 240, 2))
    assert "<td>beyond the margin, not shown yet</td>" in canary_check_row(rising, "invalid_tool_call_rate")


def test_the_schedule_says_when_the_next_cycle_is_due(acme, acme_viewer):
    page = acme_viewer.client.get("/console/cycles/").content.decode()
    assert "Next scheduled cycle" in page and "100 more feedback events" in page


def test_adapters_show_lineage_and_only_the_controls_their_status_allows(acme, acme_admin, acme_viewer, adapters_root):
    parent = registered_adapter(acme.org, adapters_root.parent)
    child = registered_adapter(acme.org, adapters_root.parent)
    AdapterVersion.objects.for_org(acme.org).filter(pk=child.pk).update(parent=parent, status=AdapterVersion.Status.BLOCKED,
                                                                        gate_report={"passed": False, "blocked_by": ["x/y"]})
    page = acme_admin.client.get("/console/adapters/").content.decode()
    row = page.split(f"<strong>{child.name}</strong>")[1].split("</tr>")[0]
    assert parent.name in row and "blocked by x/y" in row and "Promote" not in row
    assert f"/console/adapters/{parent.name}/promote/" in page
    assert acme_admin.client.post(f"/console/adapters/{child.name}/promote/", follow=True).status_code == 200
    assert AdapterVersion.objects.for_org(acme.org).get(pk=child.pk).status == AdapterVersion.Status.BLOCKED
    assert "/promote/" not in acme_viewer.client.get("/console/adapters/").content.decode()


def test_the_adapters_page_shows_how_each_model_does_on_live_traffic(acme, globex, acme_viewer):
    for feedback in [("edit_accepted", "edit_persisted")] * 3 + [("tool_call_invalid",)]:
        served(acme.org, adapter="acme@v1", feedback=feedback, latency_ms=120.0)
    served(acme.org, feedback=("dissatisfied_followup",))
    served(globex.org, adapter="globex@v1", feedback=("edit_persisted",))
    page = acme_viewer.client.get("/console/adapters/").content.decode()
    live = page.split("On live traffic")[1]
    base_row, v1_row = live.split("the base model</strong>")[1].split("</tr>")[0], live.split("acme@v1</strong>")[1].split("</tr>")[0]
    assert "100.0 %" in base_row  # its one known outcome was a dissatisfied follow-up
    assert [cell.split("<")[0] for cell in v1_row.split('class="num">')[1:]] == ["4", "4", "75.0 %", "0.0 %", "25.0 %", "120 ms"]
    assert "globex" not in live


@pytest.mark.vllm
def test_promote_and_roll_back_through_the_page_change_what_the_gateway_serves(gateway, acme, acme_admin, vllm):
    adapter = registry.adapter_register(org=acme.org, source_dir=vllm.trained_adapter(1))
    api = gateway_client(gateway, acme.key)
    confirm = acme_admin.client.get(f"/console/adapters/{adapter.name}/promote/").content.decode()
    assert f"Serve {adapter.name} to everyone?" in confirm and "Until now: the base model." in confirm
    done = acme_admin.client.post(f"/console/adapters/{adapter.name}/promote/", follow=True)
    assert f"{adapter.name} serves everyone now." in done.content.decode()
    assert ask(api, max_tokens=2).model == adapter.name
    back = acme_admin.client.get(f"/console/adapters/{adapter.name}/rollback/").content.decode()
    assert "the base model, which it replaced, serves everyone again" in back
    acme_admin.client.post(f"/console/adapters/{adapter.name}/rollback/")
    assert ask(api, max_tokens=2).model != adapter.name


def test_an_alert_shows_the_detector_figures_and_an_admin_acknowledges_it(acme, acme_admin, acme_viewer, adapters_root):
    adapter = registered_adapter(acme.org, adapters_root.parent)
    alert = Alert.objects.create(org=acme.org, kind=Alert.Kind.REWARD_HACKING, adapter=adapter,
                                 message=f"{adapter.name} was blocked", figures=[CHECK])
    page = acme_viewer.client.get("/console/alerts/").content.decode()
    assert "invalid_tool_call_rate" in page and "[0.120, 0.260]" in page and "Acknowledge" not in page
    assert 'title="open alerts">1<' in acme_viewer.client.get("/console/").content.decode()
    acme_admin.client.post(f"/console/alerts/{alert.pk}/acknowledge/")
    alert.refresh_from_db()
    assert alert.acknowledged_by == f"user:{acme_admin.email}"
    assert AuditEvent.objects.for_org(acme.org).filter(action="alert.acknowledge").count() == 1
    assert 'title="open alerts"' not in acme_viewer.client.get("/console/").content.decode()
    again = acme.client.post(f"/api/v1/alerts/{alert.pk}/acknowledge")
    assert again.status_code == 200 and again.json()["acknowledged_by"] == f"user:{acme_admin.email}"
    assert AuditEvent.objects.for_org(acme.org).filter(action="alert.acknowledge").count() == 1


def test_a_cycle_plots_its_training_run_step_by_step(acme, acme_viewer):
    per_step = {"step": [1, 2, 3], "loss": [0.5, 0.4, 0.2], "kl": [0.0, 0.01, 0.02], "clip_fraction": [0.0, 0.1, 0.05]}
    run = TrainingRun.objects.create(org=acme.org, trigger=TrainingRun.Trigger.REQUEST, requested_by="owner", status=TrainingRun.Status.SUCCEEDED,
                                     report={"steps": 3, "mean_loss": 0.3667, "mean_kl": 0.01, "clip_fraction": 0.05, "per_step": per_step})
    cycle = cycle_of(acme.org, status=Cycle.Status.GATING, training_run=run)
    page = acme_viewer.client.get(f"/console/cycles/{cycle.pk}/").content.decode()
    assert f'data-src="/console/cycles/{cycle.pk}/training.json"' in page and "hx-preserve" in page
    data = acme_viewer.client.get(f"/console/cycles/{cycle.pk}/training.json").json()
    assert data["steps"] == [1, 2, 3] and data["series"] == {key: per_step[key] for key in ("loss", "kl", "clip_fraction")}
    assert data["figures"]["kl"] == {"title": "KL to the base model", "unit": "nats per token"}


def test_a_cycle_not_trained_yet_has_no_training_plot(acme, acme_viewer):
    cycle = cycle_of(acme.org, status=Cycle.Status.RUNNING)
    assert "training-charts" not in acme_viewer.client.get(f"/console/cycles/{cycle.pk}/").content.decode()
    assert acme_viewer.client.get(f"/console/cycles/{cycle.pk}/training.json").json()["steps"] == []


def test_an_adapter_and_its_alert_link_to_the_cycle_that_trained_it(acme, acme_viewer, adapters_root):
    adapter = registered_adapter(acme.org, adapters_root.parent)
    run = TrainingRun.objects.create(org=acme.org, trigger=TrainingRun.Trigger.REQUEST, requested_by="owner", candidate=adapter,
                                     status=TrainingRun.Status.SUCCEEDED, dataset={"examples": 271, "off_policy": 0, "skipped": {}})
    cycle = cycle_of(acme.org, status=Cycle.Status.BLOCKED, training_run=run, candidate=adapter)
    Alert.objects.create(org=acme.org, kind=Alert.Kind.REWARD_HACKING, adapter=adapter, message="blocked", figures=[CHECK])
    row = acme_viewer.client.get("/console/adapters/").content.decode().split(f"<strong>{adapter.name}</strong>")[1].split("</tr>")[0]
    assert "271 examples" in row and f'href="/console/cycles/{cycle.pk}/"' in row
    assert f'href="/console/cycles/{cycle.pk}/"' in acme_viewer.client.get("/console/alerts/").content.decode()


def test_a_tainted_version_says_why_and_loses_promote_and_download_once_its_weights_are_gone(acme, acme_admin, acme_viewer,
                                                                                             adapters_root):
    from django.utils import timezone

    kept, gone = registered_adapter(acme.org, adapters_root.parent), registered_adapter(acme.org, adapters_root.parent)
    AdapterVersion.objects.for_org(acme.org).filter(pk=kept.pk).update(tainted_at=timezone.now(), taint={"erased": 2, "purged": 1},
                                                                       status=AdapterVersion.Status.RETIRED)
    AdapterVersion.objects.for_org(acme.org).filter(pk=gone.pk).update(tainted_at=timezone.now(), taint={"via": kept.name},
                                                                       status=AdapterVersion.Status.RETIRED,
                                                                       weights_deleted_at=timezone.now())
    page = acme_admin.client.get("/console/adapters/").content.decode()
    row = page.split(f"<strong>{kept.name}</strong>")[1].split("</tr>")[0]
    assert "tainted" in row and "2 erased, 1 purged" in row and "/promote/" in row and "/download/" in row
    row = page.split(f"<strong>{gone.name}</strong>")[1].split("</tr>")[0]
    assert f"through {kept.name}" in row and "weights deleted" in row and "/promote/" not in row and "/download/" not in row
    assert "/download/" not in acme_viewer.client.get("/console/adapters/").content.decode()


def test_an_admin_downloads_a_version_from_the_console_and_others_cannot(acme, acme_admin, acme_viewer, adapters_root, settings,
                                                                         tiny_base_model):
    settings.SERVING_BASE_MODEL_DIR = str(tiny_base_model)  # the manifest names its fingerprint
    adapter = registered_adapter(acme.org, adapters_root.parent)
    response = acme_admin.client.get(f"/console/adapters/{adapter.name}/download/")
    assert response.status_code == 200 and response["Content-Type"] == "application/gzip"
    assert b"".join(response.streaming_content)[:2] == b"\x1f\x8b"  # gzip
    assert acme_viewer.client.get(f"/console/adapters/{adapter.name}/download/").status_code == 403
    globex_admin = person(make_tenant("Globex"), Role.ADMIN, email="admin@globex.example")
    assert globex_admin.client.get(f"/console/adapters/{adapter.name}/download/").status_code == 404
