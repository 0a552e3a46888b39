"""An organization's share of the platform's resources: requests a minute to the tenant API
(across every web process when there is Redis) and the bytes its recordings may occupy."""

import time

import pytest
from django.core.cache import caches
from django.db.models import Sum
from django.db.models.functions import Length

from tenants.api.windows import window_key
from tenants.models import BackgroundTask, FeedbackEvent, Interaction, Role, StorageUsage
from tenants.privacy import policy_update
from tenants.retention import content_purge_all
from tenants.storage import FEEDBACK_ROW_BYTES, INTERACTION_ROW_BYTES, TASK_ROW_BYTES
from tests.factories import record

URL = "/api/v1/interactions"


# The tenant API's rate ------------------------------------------------------------------------------

def test_past_its_rate_an_organization_gets_429_and_the_others_do_not(acme, globex, settings):
    settings.TENANT_API_REQUESTS_PER_MINUTE = 3
    for _ in range(3):
        assert acme.client.get(URL).status_code == 200
    refused = acme.client.get(URL)
    assert refused.status_code == 429 and refused.json()["error"]["code"] == "throttled"
    assert "3 requests per minute" in refused.json()["error"]["message"]
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    assert acme.client.post(URL, {"messages": [{"role": "user", "content": "x"}], "completion": "y"}, format="json").status_code == 429
    assert Interaction.objects.for_org(acme.org).count() == 0
    assert globex.client.get(URL).status_code == 200


def test_with_redis_the_count_holds_across_web_processes(acme, settings, redis_url):
    settings.CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
        "limits": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": redis_url, "KEY_PREFIX": "test"},
    }
    settings.TENANT_API_REQUESTS_PER_MINUTE = 4
    assert acme.client.get(URL).status_code == 200
    other_process = caches.create_connection("limits")  # its own client, the same Redis
    key = window_key(acme.org.pk, int(time.time() // 60))
    if other_process.get(key) is None:  # the minute turned: this request opens the next window
        assert acme.client.get(URL).status_code == 200
    other_process.incr(key, 3)  # what another web process let through
    assert acme.client.get(URL).status_code == 429


def test_with_redis_unreachable_requests_go_through_uncounted(acme, settings):
    from serving.vllm_process import free_port

    settings.CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
        "limits": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": f"redis://127.0.0.1:{free_port()}/0"},
    }
    assert acme.client.get(URL).status_code == 200


# Storage --------------------------------------------------------------------------------------------

def _stored_bytes(org) -> int:
    rows = Interaction.objects.for_org(org)
    return (rows.count() * INTERACTION_ROW_BYTES + (rows.aggregate(n=Sum(Length("content")))["n"] or 0)
            + FeedbackEvent.objects.for_org(org).count() * FEEDBACK_ROW_BYTES + BackgroundTask.objects.for_org(org).count() * TASK_ROW_BYTES)


def _feedback(client, interaction_id: str, key: str):
    event = {"interaction_id": interaction_id, "type": "edit_persisted", "idempotency_key": key}
    return client.post("/api/v1/feedback", {"events": [event]}, format="json")


def _content_bytes(org) -> int:
    return Interaction.objects.for_org(org).aggregate(n=Sum(Length("content")))["n"] or 0


def _used(org) -> int:
    return StorageUsage.objects.for_org(org).get().used_bytes


def test_usage_follows_recordings_purges_and_erasures(acme, admin):
    ids = [record(acme.client, text=f"prompt {i} " + "x" * 200 * i) for i in range(4)]
    assert _used(acme.org) == _stored_bytes(acme.org) > 4 * INTERACTION_ROW_BYTES
    assert admin.delete(f"{URL}/{ids[3]}").status_code == 204
    assert _used(acme.org) == _stored_bytes(acme.org)
    content_purge_all(org=acme.org)
    assert _used(acme.org) == _stored_bytes(acme.org) == 3 * INTERACTION_ROW_BYTES


def test_past_its_quota_an_organization_records_nothing_more_until_it_makes_room(acme, globex, admin, settings):
    one = record(acme.client)
    settings.STORAGE_QUOTA_BYTES = _used(acme.org) + 1
    second = record(acme.client)
    refused = acme.client.post(URL, {"messages": [{"role": "user", "content": "x"}], "completion": "y"}, format="json")
    assert refused.status_code == 403
    error = refused.json()["error"]
    assert error["code"] == "storage_quota_exceeded" and "storage quota" in error["message"]
    assert error["details"]["used_bytes"] >= error["details"]["quota_bytes"]
    assert set(map(str, Interaction.objects.for_org(acme.org).values_list("pk", flat=True))) == {one, second}  # nothing lost
    assert record(globex.client)  # another organization's quota is its own

    assert admin.delete(f"{URL}/{second}").status_code == 204  # erasure makes room
    assert record(acme.client)


def test_feedback_and_tasks_count_too_and_an_erasure_frees_its_feedback(acme, admin):
    ids = [record(acme.client) for _ in range(2)]
    assert _feedback(acme.client, ids[0], "a").status_code == 200
    assert _feedback(acme.client, ids[0], "b").status_code == 200
    task = acme.client.post("/api/v1/tasks", {}, format="json").json()["id"]
    assert acme.client.post(f"/api/v1/tasks/{task}/outcome", {"value": 1.0, "idempotency_key": "t"}, format="json").status_code == 201
    assert _used(acme.org) == _stored_bytes(acme.org) == 2 * INTERACTION_ROW_BYTES + _content_bytes(acme.org) + 3 * FEEDBACK_ROW_BYTES + TASK_ROW_BYTES
    assert admin.delete(f"{URL}/{ids[0]}").status_code == 204
    assert _used(acme.org) == _stored_bytes(acme.org)


def test_past_its_quota_an_organization_stores_no_new_feedback_or_task(acme, globex, settings):
    interaction = record(acme.client)
    assert _feedback(acme.client, interaction, "stored").status_code == 200
    settings.STORAGE_QUOTA_BYTES = _used(acme.org)
    refused = _feedback(acme.client, interaction, "new")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "storage_quota_exceeded"
    assert acme.client.post("/api/v1/tasks", {}, format="json").status_code == 403
    assert _feedback(acme.client, interaction, "stored").status_code == 200  # a replay is answered: nothing new is stored
    assert FeedbackEvent.objects.for_org(acme.org).count() == 1 and not BackgroundTask.objects.for_org(acme.org).exists()
    assert _feedback(globex.client, record(globex.client), "new").status_code == 200


def test_an_organizations_own_quota_overrides_the_deployments(acme, settings):
    settings.STORAGE_QUOTA_BYTES = 10**9
    record(acme.client)
    StorageUsage.objects.for_org(acme.org).update(quota_bytes=INTERACTION_ROW_BYTES)
    response = acme.client.post(URL, {"messages": [{"role": "user", "content": "x"}], "completion": "y"}, format="json")
    assert response.status_code == 403


def test_zero_retention_frees_the_content_and_keeps_counting_rows(acme):
    record(acme.client, text="y" * 5000)
    policy_update(org=acme.org, changes={"store_content": False, "training_enabled": False}, actor="test")
    record(acme.client, text="z" * 5000)
    assert _used(acme.org) == _stored_bytes(acme.org) == 2 * INTERACTION_ROW_BYTES


@pytest.mark.parametrize("method", ["get", "post"])
def test_the_throttle_counts_every_method(acme, settings, method):
    settings.TENANT_API_REQUESTS_PER_MINUTE = 1
    acme.client.get(URL)
    assert getattr(acme.client, method)(URL, {}, format="json").status_code == 429


def test_past_its_bytes_a_minute_an_organization_gets_429_and_nothing_is_stored(acme, globex, settings):
    """A body's cost grows with its size (redaction reads every byte): requests alone do not bound it."""
    settings.TENANT_API_BYTES_PER_MINUTE = 50_000
    body = {"messages": [{"role": "user", "content": "x" * 20_000}], "completion": "y"}
    assert acme.client.post(URL, body, format="json").status_code == 201
    assert acme.client.post(URL, body, format="json").status_code == 201
    refused = acme.client.post(URL, body, format="json")
    assert refused.status_code == 429 and "upload limit" in refused.json()["error"]["message"]
    assert "Retry-After" in refused.headers
    assert Interaction.objects.for_org(acme.org).count() == 2
    assert acme.client.get(URL).status_code == 200  # reading costs no bytes
    assert globex.client.post(URL, body, format="json").status_code == 201


def test_past_its_exports_an_hour_an_organization_gets_429_and_the_others_do_not(acme, globex, admin, settings):
    settings.TENANT_API_EXPORTS_PER_HOUR = 2
    viewer = acme.client_with_role(Role.VIEWER)
    assert [viewer.options("/api/v1/export").status_code, viewer.post("/api/v1/export").status_code] == [405, 405]  # no export: not counted
    assert [admin.get("/api/v1/export").status_code for _ in range(3)] == [200, 200, 429]
    refused = admin.get("/api/v1/export")
    assert refused.json()["error"]["code"] == "throttled" and int(refused["Retry-After"]) <= 3600
    assert acme.client.get(URL).status_code == 200  # the rest of the API is not held back
    assert globex.client_with_role(Role.ADMIN).get("/api/v1/export").status_code == 200
