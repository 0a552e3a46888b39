from tenants.models import FeedbackEvent


def open_task(client) -> str:
    response = client.post("/api/v1/tasks", {}, format="json")
    assert response.status_code == 201
    return response.json()["id"]


def test_a_task_outcome_arrives_once_and_replays_are_answered_with_it(acme):
    task_id = open_task(acme.client)
    first = acme.client.post(f"/api/v1/tasks/{task_id}/outcome", {"value": 1.0, "idempotency_key": "merged"}, format="json")
    replay = acme.client.post(f"/api/v1/tasks/{task_id}/outcome", {"value": 1.0, "idempotency_key": "merged"}, format="json")
    assert (first.status_code, replay.status_code) == (201, 200)
    assert first.json()["id"] == replay.json()["id"]
    task = acme.client.get(f"/api/v1/tasks/{task_id}").json()
    assert task["outcome"] == 1.0 and task["outcome_at"] is not None
    assert FeedbackEvent.objects.for_org(acme.org).count() == 1


def test_a_second_different_outcome_is_a_conflict(acme):
    task_id = open_task(acme.client)
    acme.client.post(f"/api/v1/tasks/{task_id}/outcome", {"value": 1.0, "idempotency_key": "a"}, format="json")
    for body in ({"value": 0.0, "idempotency_key": "b"}, {"value": 0.0, "idempotency_key": "a"}):
        response = acme.client.post(f"/api/v1/tasks/{task_id}/outcome", body, format="json")
        assert response.status_code == 409
    assert acme.client.get(f"/api/v1/tasks/{task_id}").json()["outcome"] == 1.0


def test_an_outcome_outside_zero_to_one_is_rejected(acme):
    task_id = open_task(acme.client)
    response = acme.client.post(f"/api/v1/tasks/{task_id}/outcome", {"value": 2, "idempotency_key": "a"}, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith("value")


def test_tasks_are_listed_newest_first(acme):
    ids = [open_task(acme.client) for _ in range(3)]
    assert [t["id"] for t in acme.client.get("/api/v1/tasks").json()["results"]] == list(reversed(ids))


def test_creating_a_task_rejects_unknown_fields(acme):
    assert acme.client.post("/api/v1/tasks", {"name": "x"}, format="json").status_code == 400
