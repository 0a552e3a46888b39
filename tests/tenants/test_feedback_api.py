import json
from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from tenants.models import FeedbackEvent, Interaction, feedback_bit
from tests.factories import api_client, record

URL = "/api/v1/feedback"


def event(interaction_id: str, key: str, type_: str = "edit_accepted", **extra) -> dict:
    return {"interaction_id": interaction_id, "type": type_, "idempotency_key": key, **extra}


def stored(org) -> int:
    return FeedbackEvent.objects.for_org(org).count()


@pytest.fixture
def interaction(acme) -> str:
    return record(acme.client)


def test_it_stores_a_batch_of_every_event_type(acme, interaction):
    types = [t for t in FeedbackEvent.Type.values]
    events = [event(interaction, f"k{i}", t, value=1.0 if t == "task_outcome" else None) for i, t in enumerate(types)]
    response = acme.client.post(URL, {"events": events}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["created"] == len(types)
    assert [r["status"] for r in response.json()["results"]] == ["created"] * len(types)
    assert stored(acme.org) == len(types)


def test_a_replayed_batch_stores_each_event_once(acme, interaction):
    batch = {"events": [event(interaction, "a"), event(interaction, "b", "edit_persisted")]}
    acme.client.post(URL, batch, format="json")
    replay = acme.client.post(URL, batch, format="json")
    assert replay.status_code == 200
    assert replay.json() | {"results": None} == {"created": 0, "duplicates": 2, "results": None}
    assert stored(acme.org) == 2


def test_a_key_repeated_within_one_batch_is_stored_once(acme, interaction):
    response = acme.client.post(URL, {"events": [event(interaction, "same"), event(interaction, "same")]}, format="json")
    assert [r["status"] for r in response.json()["results"]] == ["created", "duplicate"]
    assert stored(acme.org) == 1


def test_delayed_delivery_keeps_when_the_event_happened(acme, interaction):
    hours_ago = (timezone.now() - timedelta(hours=7)).isoformat()
    acme.client.post(URL, {"events": [event(interaction, "late", "edit_persisted", occurred_at=hours_ago)]}, format="json")
    saved = FeedbackEvent.objects.for_org(acme.org).get()
    assert saved.received_at - saved.occurred_at > timedelta(hours=6)


def test_a_batch_with_one_bad_event_stores_nothing_and_names_it(acme, interaction):
    events = [event(interaction, "good"), event(interaction, "bad", "thumbs_up"), event(interaction, "good2")]
    response = acme.client.post(URL, {"events": events}, format="json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert [item["index"] for item in error["details"]] == [1]
    assert "thumbs_up" in error["details"][0]["message"]
    assert stored(acme.org) == 0


DROP = object()


@pytest.mark.parametrize(
    "change, complaint",
    [
        ({"interaction_id": DROP}, "'interaction_id' is required"),
        ({"interaction_id": "not-a-uuid"}, "not a valid id"),
        ({"idempotency_key": DROP}, "idempotency_key"),
        ({"idempotency_key": "  "}, "idempotency_key"),
        ({"idempotency_key": 7}, "idempotency_key"),
        ({"idempotency_key": "x" * 201}, "longer than 200"),
        ({"type": "task_outcome"}, "between 0 and 1"),
        ({"type": "task_outcome", "value": 1.5}, "between 0 and 1"),
        ({"value": "high"}, "finite number"),
        ({"value": True}, "finite number"),
        ({"occurred_at": "yesterday"}, "ISO 8601"),
        ({"occurred_at": "2026-01-01T00:00:00"}, "time zone"),
        ({"occurred_at": "2999-01-01T00:00:00Z"}, "and now"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_it_rejects_a_malformed_event_with_a_message_that_names_the_problem(acme, interaction, change, complaint):
    item = {k: v for k, v in (event(interaction, "k") | change).items() if v is not DROP}
    response = acme.client.post(URL, {"events": [item, "not an object"]}, format="json")
    assert response.status_code == 400
    details = response.json()["error"]["details"]
    assert complaint in details[0]["message"]
    assert details[1] == {"index": 1, "message": "An event must be a JSON object."}
    assert stored(acme.org) == 0


@pytest.mark.parametrize("body", [{}, {"events": "many"}, {"events": []}, {"events": [], "extra": 1}, [1, 2]])
def test_it_rejects_a_body_that_is_not_an_event_batch(acme, body):
    response = acme.client.post(URL, body, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["message"]


@override_settings(FEEDBACK_MAX_BATCH=3)
def test_an_oversize_batch_is_rejected_with_the_limit(acme, interaction):
    response = acme.client.post(URL, {"events": [event(interaction, str(i)) for i in range(4)]}, format="json")
    assert response.status_code == 400
    assert "at most 3" in response.json()["error"]["message"]


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=2048)
def test_an_oversize_body_is_answered_413(acme, interaction):
    response = acme.client.post(URL, {"events": [event(interaction, "x" * 150 + str(i)) for i in range(20)]}, format="json")
    assert response.status_code == 413
    assert "2048 bytes" in response.json()["error"]["message"]


@pytest.mark.parametrize(
    "raw, complaint",
    [
        (b'{"events": [', "Malformed JSON"),
        (b'{"events": [{"value": NaN}]}', "Malformed JSON"),
        (b'{"events": "\xff\xfe"}', "not valid UTF-8"),
    ],
)
def test_it_rejects_bodies_that_are_not_json(acme, raw, complaint):
    response = acme.client.post(URL, raw, content_type="application/json")
    assert response.status_code == 400
    assert complaint in response.json()["error"]["message"]


def test_a_lone_surrogate_in_a_key_is_rejected(acme, interaction):
    raw = json.dumps({"events": [event(interaction, "k")]}).replace('"k"', '"\\ud800"')
    response = acme.client.post(URL, raw, content_type="application/json")
    assert response.status_code == 400
    assert stored(acme.org) == 0


def test_reusing_a_key_for_a_different_event_is_a_conflict_that_stores_nothing(acme, interaction):
    acme.client.post(URL, {"events": [event(interaction, "k", "edit_accepted")]}, format="json")
    response = acme.client.post(URL, {"events": [event(interaction, "new"), event(interaction, "k", "edit_rejected")]}, format="json")
    assert response.status_code == 409
    assert response.json()["error"]["details"][0]["index"] == 1
    assert stored(acme.org) == 1


def test_feedback_about_another_orgs_interaction_is_404_and_stores_nothing(acme, globex):
    theirs = record(globex.client)
    mine = record(acme.client)
    response = acme.client.post(URL, {"events": [event(mine, "a"), event(theirs, "b")]}, format="json")
    assert response.status_code == 404
    assert response.json()["error"]["details"] == [{"index": 1, "message": f"No interaction {theirs} in this organization."}]
    assert stored(acme.org) == stored(globex.org) == 0


def test_each_interaction_knows_the_kinds_of_feedback_it_got_and_a_refused_batch_marks_none(acme, globex):
    persisted, other = record(acme.client), record(acme.client)
    acme.client.post(URL, {"events": [event(persisted, "a", "edit_persisted"), event(persisted, "b", "edit_persisted"),
                                      event(persisted, "c", "dissatisfied_followup")]}, format="json")
    refused = acme.client.post(URL, {"events": [event(other, "d", "edit_persisted"), event(record(globex.client), "e")]}, format="json")
    assert refused.status_code == 404
    seen = dict(Interaction.objects.for_org(acme.org).values_list("pk", "feedback_seen"))
    assert {str(pk): bits for pk, bits in seen.items()} == {
        persisted: feedback_bit("edit_persisted") | feedback_bit("dissatisfied_followup"), other: 0}


def test_idempotency_keys_are_per_organization(acme, globex):
    acme.client.post(URL, {"events": [event(record(acme.client), "shared-key")]}, format="json")
    response = globex.client.post(URL, {"events": [event(record(globex.client), "shared-key")]}, format="json")
    assert response.json()["created"] == 1


def test_the_feedback_list_is_paginated_and_shows_only_the_orgs_events(acme, globex, interaction):
    # One batch: its events share their received_at, and the pages must still hold each once.
    acme.client.post(URL, {"events": [event(interaction, f"{i:02}") for i in range(20)]}, format="json")
    globex.client.post(URL, {"events": [event(record(globex.client), "theirs")]}, format="json")
    keys, page = [], acme.client.get(URL, {"limit": 3}).json()
    while True:
        keys += [e["idempotency_key"] for e in page["results"]]
        if not page["next"]:
            break
        page = acme.client.get(page["next"]).json()
    assert sorted(keys) == [f"{i:02}" for i in range(20)]


def test_feedback_needs_an_api_key(db):
    from rest_framework.test import APIClient

    response = APIClient().post(URL, {"events": []}, format="json")
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.django_db(transaction=True)
def test_the_same_batch_delivered_twice_at_once_is_stored_once(acme):
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connection

    interaction = record(acme.client)
    batch = {"events": [event(interaction, f"k{i}") for i in range(50)]}

    def deliver(_):
        try:
            return api_client(acme.key).post(URL, batch, format="json").json()
        finally:
            connection.close()  # each thread has its own connection

    with ThreadPoolExecutor(max_workers=4) as pool:
        responses = list(pool.map(deliver, range(4)))
    assert sorted(r["created"] for r in responses) == [0, 0, 0, 50]
    assert stored(acme.org) == 50


def test_the_feedback_list_filters_by_interaction_and_type(acme):
    first, second = record(acme.client), record(acme.client)
    acme.client.post(URL, {"events": [event(first, "a"), event(first, "b", "edit_persisted"), event(second, "c")]}, format="json")
    about_first = acme.client.get(URL, {"interaction_id": first}).json()["results"]
    assert sorted(e["idempotency_key"] for e in about_first) == ["a", "b"]
    persisted = acme.client.get(URL, {"interaction_id": first, "type": "edit_persisted"}).json()["results"]
    assert [e["idempotency_key"] for e in persisted] == ["b"]
    assert acme.client.get(URL, {"interaction_id": "nope"}).status_code == 400
    assert acme.client.get(URL, {"colour": "red"}).status_code == 400


@pytest.mark.parametrize("raw_value, raw_time", [
    ("1" + "0" * 400, '"2026-01-01T00:00:00Z"'),
    ("1", '"0001-01-01T00:00:00+14:00"'),
    ("1", '"1999-12-31T23:59:59Z"'),
    ("1e999", '"2026-01-01T00:00:00Z"'),
])
def test_extreme_numbers_and_times_are_a_400_not_a_crash(acme, interaction, raw_value, raw_time):
    raw = ('{"events": [{"interaction_id": "%s", "type": "edit_accepted", "idempotency_key": "k",'
           ' "value": %s, "occurred_at": %s}]}') % (interaction, raw_value, raw_time)
    response = acme.client.post(URL, raw, content_type="application/json")
    assert response.status_code == 400
    assert stored(acme.org) == 0
