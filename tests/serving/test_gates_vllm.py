"""The gates' calls against a real vLLM replica: scoring a recorded completion gives back the
logprobs it was sampled with, and a whole gate run samples the suite from both models."""

import pytest

from demo.suite import DemoGlobalSuite
from serving import registry, vllm_api
from serving.gates import gates_evaluate
from tenants.recording import interaction_content
from tests.conftest import make_tenant
from tests.serving.conftest import BASE_NAME, deployed_adapter
from tests.serving.test_gateway import ask, client, stored

pytestmark = pytest.mark.vllm


class TinySuite(DemoGlobalSuite):
    max_tokens = 24

    def __init__(self):
        super().__init__(size=30)


@pytest.fixture
def acme(gateway):
    return make_tenant("Acme", training_enabled=True)


def test_scoring_a_recorded_completion_gives_the_logprobs_it_was_sampled_with(gateway, acme, vllm):
    adapter = deployed_adapter(vllm, acme.org, seed=3)
    reply = ask(client(gateway, acme.key), temperature=1.0)
    tokens = interaction_content(interaction=stored(acme.org, reply.id))["tokens"]
    for model, recorded in ((adapter.name, tokens["logprobs"]), (BASE_NAME, None)):
        scored = vllm_api.completion_logprobs(vllm.url, model=model, prompt_ids=tokens["prompt_ids"],
                                              completion_ids=tokens["completion_ids"])
        assert len(scored) == len(tokens["completion_ids"]) and all(lp <= 0 for lp in scored)
        if recorded is not None:
            assert scored == pytest.approx(recorded, abs=1e-3)


def test_a_gate_run_samples_the_suite_from_the_candidate_and_the_incumbent(gateway, acme, vllm, settings):
    settings.GATES_GLOBAL_SUITE = "tests.serving.test_gates_vllm.TinySuite"
    incumbent = deployed_adapter(vllm, acme.org, seed=4)
    candidate = registry.adapter_register(org=acme.org, source_dir=vllm.trained_adapter(5))
    report = gates_evaluate(candidate=candidate, incumbent=incumbent)
    assert report.candidate == candidate.name and report.incumbent == incumbent.name
    global_checks = [c for c in report.checks if c.gate != "tenant_suite"]
    assert len(global_checks) == 7 and all(c.samples > 0 or c.name == "correct_body_rate" for c in global_checks)
    length = next(c for c in report.checks if c.name == "response_length")
    assert 0 < length.candidate <= TinySuite.max_tokens and 0 < length.incumbent <= TinySuite.max_tokens
    assert candidate.name in vllm_api.served_models(vllm.url)  # loaded to be scored, not routed
    assert registry.route_of(org=acme.org).serving == incumbent
