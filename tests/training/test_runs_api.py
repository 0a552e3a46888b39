"""The training runs and schedule through the tenant API; promotion by hand without replicas."""

import pytest

from tenants.models import AuditEvent, Role
from tests.factories import rated, registered_adapter
from training import runs
from training.models import TrainingRun

pytestmark = pytest.mark.usefixtures("sent")  # no run requested here goes to the broker


def test_an_admin_queues_a_run_and_reads_its_state(acme, django_capture_on_commit_callbacks, sent):
    with django_capture_on_commit_callbacks(execute=True):
        response = acme.client.post("/api/v1/training-runs", {}, format="json")
    assert response.status_code == 202, response.content
    run = response.json()
    assert run["status"] == "queued" and run["trigger"] == "request" and run["candidate"] is None
    assert sent == [run["id"]]

    listed = acme.client.get("/api/v1/training-runs").json()["results"]
    assert [r["id"] for r in listed] == [run["id"]] and "interaction_ids" not in listed[0]
    detail = acme.client.get(f"/api/v1/training-runs/{run['id']}").json()
    assert detail["status"] == "queued" and detail["interaction_ids"] == []


def test_a_second_run_while_one_is_active_is_a_conflict_naming_it(acme):
    first = acme.client.post("/api/v1/training-runs", {}, format="json").json()
    second = acme.client.post("/api/v1/training-runs", {}, format="json")
    assert second.status_code == 409
    assert second.json()["error"]["details"] == {"active_run": first["id"]}


def test_no_run_when_training_is_off(globex):
    response = globex.client.post("/api/v1/training-runs", {}, format="json")
    assert response.status_code == 409 and "training_enabled" in response.json()["error"]["message"]
    assert not TrainingRun.objects.for_org(globex.org).exists()


def test_only_admins_queue_runs_and_unknown_fields_are_refused(acme):
    viewer = acme.client_with_role(Role.VIEWER)
    assert viewer.post("/api/v1/training-runs", {}, format="json").status_code == 403
    assert viewer.get("/api/v1/training-runs").status_code == 200
    refused = acme.client.post("/api/v1/training-runs", {"epochs": 9}, format="json")
    assert refused.status_code == 400 and "epochs" in str(refused.json())
    assert not TrainingRun.objects.for_org(acme.org).exists()


def test_the_schedule_is_read_by_viewers_and_changed_by_admins(acme):
    assert acme.client.get("/api/v1/training-schedule").json() == {"enabled": True, "cadence_minutes": 300, "min_feedback_events": 100, "updated_at": None}
    changed = acme.client.put("/api/v1/training-schedule", {"cadence_minutes": 5}, format="json")
    assert changed.status_code == 200 and changed.json()["cadence_minutes"] == 5 and changed.json()["min_feedback_events"] == 100
    for bad in ({"cadence_minutes": 0}, {"min_feedback_events": "many"}, {"every": 5}, {"enabled": "sometimes"}):
        assert acme.client.put("/api/v1/training-schedule", bad, format="json").status_code == 400, bad
    assert acme.client_with_role(Role.VIEWER).put("/api/v1/training-schedule", {"cadence_minutes": 9}, format="json").status_code == 403
    assert acme.client.get("/api/v1/training-schedule").json()["cadence_minutes"] == 5


def test_a_schedule_change_that_changes_nothing_is_not_saved_nor_audited(acme):
    acme.client.put("/api/v1/training-schedule", {"cadence_minutes": 5}, format="json")
    updated = acme.client.get("/api/v1/training-schedule").json()["updated_at"]
    assert acme.client.put("/api/v1/training-schedule", {"cadence_minutes": 5}, format="json").json()["updated_at"] == updated
    assert AuditEvent.objects.for_org(acme.org).filter(action="training_schedule.update").count() == 1


def test_a_finished_run_shows_its_lineage_and_candidate(acme, settings, tmp_path, tiny_base_model):
    settings.SERVING_ADAPTERS_ROOT, settings.SERVING_BASE_MODEL_NAME = str(tmp_path / "adapters"), "demo-base"
    settings.SERVING_BASE_MODEL_DIR, settings.TRAINING_WORK_DIR = str(tiny_base_model), str(tmp_path / "work")
    settings.TRAINING_DEVICE, settings.TRAINING_CONFIG = "cpu", {"epochs": 1}
    own = rated(acme.org, ("edit_persisted",), ("edit_reverted",))
    run_id = acme.client.post("/api/v1/training-runs", {}, format="json").json()["id"]
    runs.run_execute(run_id)

    detail = acme.client.get(f"/api/v1/training-runs/{run_id}").json()
    assert detail["status"] == "succeeded" and detail["candidate"] == "acme@v1" and detail["incumbent"] is None
    assert detail["interaction_ids"] == [str(i.pk) for i in own] and len(detail["dataset_sha256"]) == 64
    assert detail["report"]["steps"] >= 1 and detail["attempts"] == 1
    adapters = acme.client.get("/api/v1/adapters").json()
    assert [(a["name"], a["status"]) for a in adapters] == [("acme@v1", "candidate")]


def test_promoting_without_replicas_is_unavailable_and_changes_nothing(acme, settings, tmp_path):
    settings.SERVING_ADAPTERS_ROOT, settings.SERVING_BASE_MODEL_NAME, settings.SERVING_VLLM_URLS = str(tmp_path / "a"), "isolation-base", []
    adapter = registered_adapter(acme.org, tmp_path)
    response = acme.client.post(f"/api/v1/adapters/{adapter.name}/promote")
    assert response.status_code == 503 and response.json()["error"]["code"] == "replica_failed"
    assert acme.client.post(f"/api/v1/adapters/{adapter.name}/rollback").status_code == 409  # not serving
    assert acme.client.post("/api/v1/adapters/acme@v9/promote").status_code == 404
    assert acme.client_with_role(Role.VIEWER).post(f"/api/v1/adapters/{adapter.name}/promote").status_code == 403
