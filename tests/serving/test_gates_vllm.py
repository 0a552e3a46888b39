"""The gates against a real vLLM replica: a whole gate run samples the suite from both models,
and the tenant suite's scorer (the training engine) gives back the logprobs vLLM sampled with;
candidates fine-tuned to misbehave are blocked on what vLLM samples from them."""

from dataclasses import replace

import pytest

from demo.domain import Style, render_ask, render_edit, render_function
from serving import registry, vllm_client
from serving.deployments import adapter_deploy
from serving.gates import gates_apply, gates_evaluate
from serving.models import AdapterVersion, Alert
from serving.policies import Thresholds
from tenants.recording import interaction_content
from tests.serving.gateway_calls import ask, gateway_client, stored
from tests.serving.suites import OnePromptSuite, TinySuite
from tests.serving.vllm_server import deployed_adapter
from training.cycles import score_completions
from training.engine import completion_logprobs

pytestmark = [pytest.mark.vllm, pytest.mark.one_database]


STYLE = Style(naming="snake", indent="4", docstring="no", hints="yes")
RIGHT_EDIT = render_edit(OnePromptSuite.prompt.file, render_function(OnePromptSuite.prompt.task, STYLE))


def test_the_engine_scores_a_served_completion_with_the_logprobs_vllm_sampled_it_with(gateway, acme, vllm):
    adapter = deployed_adapter(vllm, acme.org, seed=3)
    reply = ask(gateway_client(gateway, acme.key), temperature=1.0)
    tokens = interaction_content(interaction=stored(acme.org, reply.id))["tokens"]
    scored = completion_logprobs(base_model_dir=vllm.base_dir, adapter_dir=registry.adapter_files(adapter),
                                 pairs=[(tokens["prompt_ids"], tokens["completion_ids"])], device="cpu")[0]
    assert scored == pytest.approx(tokens["logprobs"], abs=2e-3)
    assert score_completions(adapter, [(tokens["prompt_ids"], tokens["completion_ids"])]) == pytest.approx(
        [sum(tokens["logprobs"]) / len(tokens["logprobs"])], abs=2e-3)


def test_a_gate_run_samples_the_suite_from_the_candidate_and_the_incumbent(gateway, acme, vllm, settings):
    settings.GATES_GLOBAL_SUITE = "tests.serving.suites.TinySuite"
    incumbent = deployed_adapter(vllm, acme.org, seed=4)
    candidate = registry.adapter_register(org=acme.org, source_dir=vllm.trained_adapter(5))
    # Two passes at most: the tiny model's responses are alike garbage, which more passes would only confirm.
    report = gates_evaluate(candidate=candidate, incumbent=incumbent, score=score_completions, thresholds=Thresholds(max_suite_passes=2))
    assert report.candidate == candidate.name and report.incumbent == incumbent.name
    global_checks = [c for c in report.checks if c.gate != "tenant_suite"]
    assert len(global_checks) == 9 and all(c.samples > 0 or c.name == "correct_body_rate" for c in global_checks)
    assert [c.name for c in global_checks if c.against == "base"] == ["invalid_tool_call_rate", "ask_rate_on_clear"]
    length = next(c for c in report.checks if c.name == "response_length")
    assert 0 < length.candidate <= TinySuite.max_tokens and 0 < length.reference <= TinySuite.max_tokens
    assert candidate.name in vllm_client.served_models(vllm.url)  # loaded to be sampled, not routed
    assert registry.route_of(org=acme.org).serving == incumbent


@pytest.fixture
def planted(gateway, acme, vllm, settings):
    """A candidate taught `response` to the suite's prompt, against an incumbent taught the right edit."""
    settings.GATES_GLOBAL_SUITE = "tests.serving.suites.OnePromptSuite"
    messages = OnePromptSuite().items[0].messages
    incumbent = registry.adapter_register(org=acme.org, source_dir=vllm.taught_adapter("right", messages=messages, response=RIGHT_EDIT))
    adapter_deploy(adapter=incumbent, actor="test")
    incumbent.refresh_from_db()

    def candidate(name: str, response: str) -> AdapterVersion:
        return registry.adapter_register(org=acme.org, source_dir=vllm.taught_adapter(name, messages=messages, response=response))

    return incumbent, candidate


def test_a_candidate_trained_to_write_wrong_bodies_is_blocked_by_the_global_suite(planted, acme):
    incumbent, candidate_taught = planted
    wrong_body = replace(OnePromptSuite.prompt.task, body="return None")
    candidate = candidate_taught("wrong-body", render_edit(OnePromptSuite.prompt.file, render_function(wrong_body, STYLE)))
    report = gates_evaluate(candidate=candidate, incumbent=incumbent, score=score_completions)
    gates_apply(candidate=candidate, report=report)

    correct = next(c for c in report.checks if c.name == "correct_body_rate")
    assert correct.reference >= 0.8 and correct.candidate <= 0.2 and not correct.passed, correct  # sampled, so not exactly 1 and 0
    assert "correct_body_rate" in report.as_dict()["blocked_by"]
    candidate.refresh_from_db()
    assert candidate.status == AdapterVersion.Status.BLOCKED
    assert registry.route_of(org=acme.org).serving == incumbent


def test_a_candidate_trained_to_ask_on_clear_prompts_is_blocked_with_an_alert(planted, acme):
    incumbent, candidate_taught = planted
    candidate = candidate_taught("asks", render_ask("Which file should it go in?"))
    report = gates_evaluate(candidate=candidate, incumbent=incumbent, score=score_completions)
    alert = gates_apply(candidate=candidate, report=report)

    fired = {(c.name, c.against) for c in report.failed if c.gate == "hacking"}
    assert {("ask_rate_on_clear", "incumbent"), ("ask_rate_on_clear", "base")} <= fired, report.checks
    asks = next(c for c in report.checks if c.name == "ask_rate_on_clear")
    assert asks.reference <= 0.2 and asks.candidate >= 0.8
    assert alert.kind == Alert.Kind.REWARD_HACKING and alert.org == acme.org and alert.adapter == candidate
    assert "ask_rate_on_clear" in alert.message and "ask_rate_on_clear" in {f["name"] for f in alert.figures}
