"""Bad input to the tenant API gets a clear 400 and changes nothing: the shapes that once got a
500 or a 404, or were taken for something else (JSON true for the number 1)."""

import base64
import json

import pytest

from tenants.models import FeedbackEvent
from tests.factories import record


def test_a_cursor_the_api_never_gave_out_is_a_400_naming_the_cursor(acme):
    response = acme.client.get("/api/v1/interactions?cursor=not-a-cursor")
    assert response.status_code == 400 and response.json()["error"]["message"].startswith("cursor:")


LISTS = ["/api/v1/interactions", "/api/v1/feedback", "/api/v1/audit-log", "/api/v1/tasks", "/api/v1/alerts", "/api/v1/cycles",
         "/api/v1/training-runs"]


@pytest.mark.parametrize("url", LISTS)
@pytest.mark.parametrize("position", ["not-a-date", "\x00", "2026-13-45T99:00:00"])
def test_a_cursor_whose_position_its_list_cannot_read_is_a_400_on_every_list(acme, url, position):
    """DRF puts a cursor's position into the query as it came: a forged one failed the query."""
    record(acme.client)
    cursor = base64.b64encode(f"p={position}".encode()).decode()
    response = acme.client.get(url, {"cursor": cursor})
    assert response.status_code == 400 and response.json()["error"]["message"].startswith("cursor:")


@pytest.mark.parametrize("limit", ["abc", "-1", "0", "1.5", "²", "١٢"])
def test_a_page_size_that_is_not_a_positive_whole_number_is_a_400(acme, limit):
    response = acme.client.get(f"/api/v1/interactions?limit={limit}")
    assert response.status_code == 400 and response.json()["error"]["message"].startswith("limit:")
    assert acme.client.get("/api/v1/interactions?limit=5000").status_code == 200  # past the maximum: the maximum


def test_json_nested_past_any_parsers_recursion_is_a_400(acme):
    deep = "[" * 100_000 + "]" * 100_000
    response = acme.client.post("/api/v1/feedback", data=deep, content_type="application/json")
    assert response.status_code == 400 and "nested too deeply" in response.json()["error"]["message"]


@pytest.mark.parametrize(("url", "body"), [
    ("/api/v1/interactions", {"messages": [{"role": "user", "content": "x"}], "completion": "y", "latency_ms": True}),
    ("/api/v1/interactions", {"messages": [{"role": "user", "content": "x"}], "completion": "y", "latency_ms": "12"}),
    ("task outcome", {"value": True, "idempotency_key": "k"}),
])
def test_json_true_or_a_string_is_not_a_number(acme, url, body):
    if url == "task outcome":
        url = f"/api/v1/tasks/{acme.client.post('/api/v1/tasks', {}, format='json').json()['id']}/outcome"
    response = acme.client.post(url, data=json.dumps(body), content_type="application/json")
    assert response.status_code == 400, response.content


def test_idempotency_keys_that_read_the_same_are_one_key(acme):
    interaction_id = record(acme.client)
    for key in ("caf\u00e9", "cafe\u0301"):  # precomposed, then with a combining accent
        event = {"interaction_id": interaction_id, "type": "edit_accepted", "idempotency_key": key}
        acme.client.post("/api/v1/feedback", {"events": [event]}, format="json")
    assert FeedbackEvent.objects.for_org(acme.org).count() == 1
    task = acme.client.post("/api/v1/tasks", {}, format="json").json()["id"]
    for key in ("na\u00efve", "nai\u0308ve"):  # keys are unique across the organization's events: another word
        response = acme.client.post(f"/api/v1/tasks/{task}/outcome", {"value": 0.5, "idempotency_key": key}, format="json")
        assert response.status_code in (200, 201), response.content
    assert FeedbackEvent.objects.for_org(acme.org).filter(type="task_outcome").count() == 1


@pytest.mark.parametrize(("method", "url", "body"), [
    ("post", "/api/v1/interactions", '{"messages": [{"role": "user", "content": "x"}], "completion": "y", "\\ud800": 1}'),
    ("post", "/api/v1/feedback", '{"events": [{"\\udfff": 1}]}'),
    ("put", "/api/v1/privacy-policy", '{"\\ud800": 1}'),
    ("put", "/api/v1/reward-spec", '{"weights": {"\\ud800": 1}}'),
    ("post", "/api/v1/api-keys", '{"name": "k", "\\ud800": 1}'),
    ("post", "/api/v1/members", '{"email": "x@example.com", "role": "\\ud800"}'),
])
def test_half_a_surrogate_pair_is_a_400_wherever_it_is(acme, method, url, body):
    """An error naming the unknown field or the bad choice quoted it, and could not be encoded."""
    response = getattr(acme.client, method)(url, data=body, content_type="application/json")
    assert response.status_code == 400 and "surrogate" in response.json()["error"]["message"]


def test_a_whole_surrogate_pair_is_text_like_any_other(acme):
    body = '{"messages": [{"role": "user", "content": "\\ud83d\\ude00"}], "completion": "y"}'
    assert acme.client.post("/api/v1/interactions", data=body, content_type="application/json").status_code == 201


def test_a_latency_past_a_day_is_a_400_and_stores_nothing(acme):
    """Three near a float's limit made the console's average infinite: a 500 on PostgreSQL."""
    body = {"messages": [{"role": "user", "content": "x"}], "completion": "y", "latency_ms": 1.7e308}
    response = acme.client.post("/api/v1/interactions", body, format="json")
    assert response.status_code == 400 and "latency_ms" in response.json()["error"]["details"]
    assert acme.client.get("/api/v1/interactions").json()["results"] == []
