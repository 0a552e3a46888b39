"""The gates against a real vLLM replica: a whole gate run samples the suite from both models,
and the tenant suite's scorer (the training engine) gives back the logprobs vLLM sampled with."""

import pytest

from demo.suite import DemoGlobalSuite
from serving import registry, vllm_api
from serving.gates import gates_evaluate
from tenants.recording import interaction_content
from tests.conftest import make_tenant
from tests.serving.conftest import deployed_adapter
from tests.serving.test_gateway import ask, client, stored
from training.cycles import score_completions
from training.engine import completion_logprobs

pytestmark = pytest.mark.vllm


class TinySuite(DemoGlobalSuite):
    max_tokens = 24

    def __init__(self):
        super().__init__(size=30)


@pytest.fixture
def acme(gateway, settings, vllm):
    settings.SERVING_BASE_MODEL_DIR = str(vllm.base_dir)
    return make_tenant("Acme", training_enabled=True)


def test_the_engine_scores_a_served_completion_with_the_logprobs_vllm_sampled_it_with(gateway, acme, vllm):
    adapter = deployed_adapter(vllm, acme.org, seed=3)
    reply = ask(client(gateway, acme.key), temperature=1.0)
    tokens = interaction_content(interaction=stored(acme.org, reply.id))["tokens"]
    scored = completion_logprobs(base_model_dir=vllm.base_dir, adapter_dir=registry.adapter_files(adapter),
                                 pairs=[(tokens["prompt_ids"], tokens["completion_ids"])], device="cpu")[0]
    assert scored == pytest.approx(tokens["logprobs"], abs=2e-3)
    assert score_completions(adapter, [(tokens["prompt_ids"], tokens["completion_ids"])]) == pytest.approx(
        [sum(tokens["logprobs"]) / len(tokens["logprobs"])], abs=2e-3)


def test_a_gate_run_samples_the_suite_from_the_candidate_and_the_incumbent(gateway, acme, vllm, settings):
    settings.GATES_GLOBAL_SUITE = "tests.serving.test_gates_vllm.TinySuite"
    incumbent = deployed_adapter(vllm, acme.org, seed=4)
    candidate = registry.adapter_register(org=acme.org, source_dir=vllm.trained_adapter(5))
    report = gates_evaluate(candidate=candidate, incumbent=incumbent, score=score_completions)
    assert report.candidate == candidate.name and report.incumbent == incumbent.name
    global_checks = [c for c in report.checks if c.gate != "tenant_suite"]
    assert len(global_checks) == 9 and all(c.samples > 0 or c.name == "correct_body_rate" for c in global_checks)
    assert [c.name for c in global_checks if c.against == "base"] == ["invalid_tool_call_rate", "ask_rate_on_clear"]
    length = next(c for c in report.checks if c.name == "response_length")
    assert 0 < length.candidate <= TinySuite.max_tokens and 0 < length.reference <= TinySuite.max_tokens
    assert candidate.name in vllm_api.served_models(vllm.url)  # loaded to be sampled, not routed
    assert registry.route_of(org=acme.org).serving == incumbent
