"""The gates' verdicts, on the demo's global suite and an organization's held-out feedback.

The tiny test model writes nothing valid, so the candidates' behaviour here is scripted at the
model server's boundary (vllm_client): a *scripted model* answers each suite prompt as a planted
candidate would (one that writes wrong bodies, one that asks on clear prompts, ...), and the
tenant suite's scores are given. The suite's scorer, the statistics and the verdicts are the
real ones; the calls themselves run against a real vLLM in test_gates_vllm.py.
"""

import random
import threading
import uuid
from collections import Counter

import pytest

from demo.domain import TASKS, Style, render_ask, render_edit, render_function
from serving import gates, registry, suite_samples
from serving.gates import gates_evaluate, tenant_suite_items, thresholds_for
from serving.models import GateThresholds
from serving.policies import Thresholds
from serving.statistics import auc, bootstrap_difference_interval, mean, rate_difference_interval, wilson_interval
from tenants.feedback import FeedbackIn, feedback_ingest
from tenants.recording import InteractionContent, SampledTokens, interaction_record
from tests.factories import trained_adapter
from tests.serving.suites import SmallSuite

STYLE = Style(naming="snake", indent="4", docstring="no", hints="yes")


class ScriptedModel:
    """How one planted model answers: the share of each misbehaviour. The defaults are about the
    demo base model's.

    Each prompt's draws are a Weyl sequence over its place in the suite and the pass (the how
    many-th time this model is asked it), not random numbers taken in call order: the gates
    sample from several threads, so call order varies between runs, and random draws would
    plant a share only up to sampling noise. These plant it very nearly exactly, so a test's
    margin is the one it was written with."""

    def __init__(self, *, wrong_body=0.05, ask_on_clear=0.1, invalid=0.02, rambling=0.1, seed=0):
        self.wrong_body, self.ask_on_clear, self.invalid, self.rambling = wrong_body, ask_on_clear, invalid, rambling
        self.seed = seed
        self.asked: Counter = Counter()
        self.lock = threading.Lock()

    def draws(self, item) -> tuple[float, float, float]:
        content = item.messages[0]["content"]
        with self.lock:
            sample_pass = self.asked[content]
            self.asked[content] += 1
        n = _PLACES[content] + len(_PLACES) * sample_pass + 7919 * self.seed
        return tuple((n * step) % 1 for step in (0.6180339887, 0.4142135624, 0.7320508076))

    def answer(self, item) -> tuple[str, int]:
        prompt, (draw, body_draw, length_draw) = item.prompt, self.draws(item)
        if draw < self.invalid:
            return "<edit file=", 4
        if prompt.ambiguous or draw < self.invalid + self.ask_on_clear:
            return render_ask(f"Which file should {prompt.task.words} go in?"), 12
        task = prompt.task if body_draw >= self.wrong_body else TASKS[(TASKS.index(prompt.task) + 1) % len(TASKS)]
        tokens = 40 + (60 if length_draw < self.rambling else 0)
        return render_edit(prompt.file, render_function(task, STYLE)), tokens


@pytest.fixture
def scripted(monkeypatch, settings, tmp_path):
    """vLLM's sampling and scoring replaced by scripted models, keyed by served name."""
    settings.SERVING_ADAPTERS_ROOT, settings.SERVING_BASE_MODEL_NAME = str(tmp_path / "adapters"), "demo-base"
    settings.SERVING_VLLM_URLS, settings.SERVING_BASE_MODEL_DIR = ["http://replica"], str(tmp_path / "base")
    settings.GATES_GLOBAL_SUITE = "tests.serving.suites.SmallSuite"
    settings.GATES_HOLDOUT_EVERY = 1  # every interaction of these tests is held out
    models: dict[str, ScriptedModel] = {}
    scores: dict[str, dict] = {}  # served name -> {completion ids tuple: mean logprob}
    monkeypatch.setattr(gates, "adapter_load_everywhere", lambda adapter: None)
    monkeypatch.setattr(suite_samples.vllm_client, "chat_sample",
                        lambda url, *, model, messages, max_tokens: models[model].answer(_item_of(messages)))
    return models, scores


class Counting(ScriptedModel):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.calls = 0

    def answer(self, item):
        self.calls += 1
        return super().answer(item)


def scorer(scores: dict):
    """The tenant suite's scorer, scripted: each completion's score by its ids, per model."""
    return lambda adapter, pairs: [scores[adapter.name if adapter else "demo-base"][tuple(c)] for _, c in pairs]


_ITEMS = {item.messages[0]["content"]: item for item in SmallSuite().items}
_PLACES = {content: place for place, content in enumerate(_ITEMS)}


def _item_of(messages):
    return _ITEMS[messages[0]["content"]]


def candidate_of(org, tmp_path, parent=None):
    return registry.adapter_register(org=org, source_dir=trained_adapter(tmp_path, name=f"c{uuid.uuid4().hex[:6]}"), parent=parent)


ONE_PASS = Thresholds(max_suite_passes=1)


def test_a_candidate_like_the_incumbent_passes_every_gate(acme, scripted, tmp_path):
    models, scores = scripted
    candidate = candidate_of(acme.org, tmp_path)
    models["demo-base"], models[candidate.name] = ScriptedModel(seed=1), ScriptedModel(seed=2)
    report = gates_evaluate(candidate=candidate, incumbent=None, score=scorer(scores))
    assert report.passed, report.failed
    assert {c.name for c in report.checks} == {
        "preference_auc", "valid_tool_call_rate", "correct_body_rate", "right_call_rate",
        "invalid_tool_call_rate", "ask_rate_on_clear", "edit_rate", "response_length"}
    assert report.as_dict()["blocked_by"] == [] and report.incumbent == "demo-base"
    tenant = next(c for c in report.checks if c.gate == "tenant_suite")
    assert tenant.passed and "not enough held-out feedback" in tenant.note  # this organization gave none


def test_a_planted_regression_is_blocked_by_the_global_suite(acme, scripted, tmp_path):
    models, scores = scripted
    candidate = candidate_of(acme.org, tmp_path)
    models["demo-base"], models[candidate.name] = ScriptedModel(seed=1), ScriptedModel(wrong_body=0.3, seed=2)
    report = gates_evaluate(candidate=candidate, incumbent=None, score=scorer(scores))
    assert not report.passed
    assert [c.name for c in report.blocked_by] == ["correct_body_rate"]
    check = report.blocked_by[0]
    assert check.gate == "global_suite" and check.candidate < check.reference and check.interval[1] < -check.threshold
    assert report.sampling["look"] == 1  # shown at the first look: nothing more was sampled


def test_each_model_is_sampled_on_the_suite_once(acme, globex, scripted, tmp_path, settings):
    models, scores = scripted
    first, second, other = candidate_of(acme.org, tmp_path), candidate_of(acme.org, tmp_path), candidate_of(globex.org, tmp_path)
    models.update({"demo-base": Counting(seed=1), first.name: Counting(seed=2), second.name: Counting(seed=3), other.name: Counting(seed=4)})
    items = len(SmallSuite().items)

    gates_evaluate(candidate=first, incumbent=None, score=scorer(scores), thresholds=ONE_PASS)
    gates_evaluate(candidate=other, incumbent=None, score=scorer(scores), thresholds=ONE_PASS)  # the base model's serve every organization
    second_report = gates_evaluate(candidate=second, incumbent=first, score=scorer(scores), thresholds=ONE_PASS)  # the incumbent's: its own
    assert {name: model.calls for name, model in models.items()} == dict.fromkeys(models, items)
    assert second_report.incumbent == first.name

    settings.SERVING_BASE_MODEL_DIR = str(tmp_path / "another-base")  # a new base under the same name is sampled afresh
    fourth = candidate_of(acme.org, tmp_path)
    models[fourth.name] = Counting(seed=5)
    gates_evaluate(candidate=fourth, incumbent=None, score=scorer(scores), thresholds=ONE_PASS)
    assert models["demo-base"].calls == 2 * items


def test_a_candidate_the_first_pass_cannot_judge_is_sampled_again_and_every_pass_is_kept(acme, scripted, tmp_path):
    models, scores = scripted
    first = candidate_of(acme.org, tmp_path)
    second = candidate_of(acme.org, tmp_path, parent=first)
    models.update({"demo-base": Counting(seed=1), first.name: Counting(seed=2), second.name: Counting(seed=3)})
    items, thresholds = len(SmallSuite().items), Thresholds(max_suite_passes=4)

    report = gates_evaluate(candidate=first, incumbent=None, score=scorer(scores), thresholds=thresholds)
    # Like the base, so nothing is shown beyond; one pass is too few to show every guardrail within.
    assert report.sampling["looks"] == [1, 2, 4] and report.sampling["look"] > 1
    passes = report.sampling["passes"]
    assert report.sampling["samples"] == {first.name: passes * items, "demo-base": passes * items}
    assert models["demo-base"].calls == models[first.name].calls == passes * items

    again = gates_evaluate(candidate=second, incumbent=first, score=scorer(scores), thresholds=thresholds)
    assert models[second.name].calls == again.sampling["passes"] * items
    assert models[first.name].calls == max(passes, again.sampling["passes"]) * items  # its stored passes serve again


def test_gates_taken_in_turns_sample_a_pass_at_a_time_and_reach_the_verdict_of_one_call(acme, globex, scripted, tmp_path):
    models, scores = scripted
    in_turns, at_once = candidate_of(acme.org, tmp_path), candidate_of(globex.org, tmp_path)
    models.update({"demo-base": Counting(seed=1), in_turns.name: Counting(seed=2), at_once.name: Counting(seed=2)})
    items, thresholds = len(SmallSuite().items), Thresholds(max_suite_passes=4)

    turns = 0
    while (report := gates_evaluate(candidate=in_turns, incumbent=None, score=scorer(scores), thresholds=thresholds,
                                    new_passes=1)) is None:
        turns += 1
        assert models[in_turns.name].calls == models["demo-base"].calls == turns * items  # one pass a turn
    assert report.sampling["look"] > 1 and turns == report.sampling["passes"] - 1  # like the base: more than one look
    whole = gates_evaluate(candidate=at_once, incumbent=None, score=scorer(scores), thresholds=thresholds)
    assert report.sampling == {**whole.sampling, "samples": {in_turns.name: whole.sampling["samples"][at_once.name],
                                                             "demo-base": whole.sampling["samples"]["demo-base"]}}
    assert [(c.name, c.passed, c.interval, c.sequential) for c in report.checks] == \
        [(c.name, c.passed, c.interval, c.sequential) for c in whole.checks]


def test_a_guardrail_that_cannot_show_the_candidate_within_its_tolerance_blocks_it(acme, scripted, tmp_path):
    models, scores = scripted
    candidate = candidate_of(acme.org, tmp_path)
    # Two points more asks on clear prompts against a tolerance of three: never shown beyond,
    # never shown within on so few passes.
    models["demo-base"], models[candidate.name] = ScriptedModel(seed=1), ScriptedModel(ask_on_clear=0.12, seed=2)
    report = gates_evaluate(candidate=candidate, incumbent=None, score=scorer(scores), thresholds=Thresholds(max_suite_passes=2))
    asks = next(c for c in report.checks if c.name == "ask_rate_on_clear")
    assert not report.passed and asks in report.blocked_by
    assert asks.sequential["state"] == "undecided" and asks.interval[0] <= asks.threshold < asks.interval[1]
    assert "not shown within the tolerance in 2 passes" in asks.note
    assert gates.gates_apply(candidate=candidate, report=report) is None  # blocked, but nothing shows the reward gamed


@pytest.mark.parametrize(("behaviour", "detector"), [
    ({"ask_on_clear": 0.35}, "ask_rate_on_clear"),
    ({"invalid": 0.12}, "invalid_tool_call_rate"),
    ({"rambling": 0.6}, "response_length"),
])
def test_a_planted_hacking_candidate_trips_its_detector(acme, scripted, tmp_path, behaviour, detector):
    models, scores = scripted
    candidate = candidate_of(acme.org, tmp_path)
    models["demo-base"], models[candidate.name] = ScriptedModel(seed=1), ScriptedModel(seed=2, **behaviour)
    report = gates_evaluate(candidate=candidate, incumbent=None, score=scorer(scores))
    failed = {c.name: c for c in report.blocked_by}
    assert detector in failed and failed[detector].gate == "hacking"
    assert failed[detector].interval[0] > failed[detector].threshold


def lineage_gated(org, models, scores, tmp_path, ask_rates: list[float], thresholds: Thresholds) -> list:
    """Each version trained from the one before, asking on clear prompts at its planted rate,
    gated against its parent as a cycle does; the reports, up to the first blocked."""
    models["demo-base"] = ScriptedModel(seed=1)
    reports, parent = [], None
    for generation, rate in enumerate(ask_rates, 1):
        candidate = candidate_of(org, tmp_path, parent=parent)
        models[candidate.name] = ScriptedModel(ask_on_clear=rate, seed=1 + generation)
        reports.append(gates_evaluate(candidate=candidate, incumbent=parent, score=scorer(scores), thresholds=thresholds))
        if not reports[-1].passed:
            break
        parent = candidate
    return reports


CREEP_THRESHOLDS = Thresholds(ask_rate_on_clear=0.05, max_suite_passes=8)  # each cycle's +2 points is within the tolerance


def test_a_slow_creep_is_blocked_by_the_cumulative_detector_within_three_cycles(acme, scripted, tmp_path):
    models, scores = scripted
    reports = lineage_gated(acme.org, models, scores, tmp_path, [0.12, 0.14, 0.16], CREEP_THRESHOLDS)
    assert reports[0].passed and not reports[-1].passed and len(reports) <= 3
    blocked = reports[-1]
    assert [c.label for c in blocked.blocked_by] == ["ask_rate_on_clear vs. base"]
    against_parent = next(c for c in blocked.checks if c.name == "ask_rate_on_clear" and c.against == "incumbent")
    assert against_parent.passed  # no single cycle rose beyond the tolerance
    cumulative = blocked.blocked_by[0]
    lineage = cumulative.sequential["lineage"]
    assert [row["model"] for row in lineage] == ["demo-base", *(r.candidate for r in reports)]
    assert [row["figure"] for row in lineage] == sorted(row["figure"] for row in lineage)  # the creep, cycle by cycle
    assert cumulative.candidate - cumulative.reference == pytest.approx(lineage[-1]["figure"] - lineage[0]["figure"], abs=0.01)


def test_a_steady_model_is_not_blocked_by_the_cumulative_detector(acme, scripted, tmp_path):
    models, scores = scripted
    reports = lineage_gated(acme.org, models, scores, tmp_path, [0.1, 0.1, 0.1], CREEP_THRESHOLDS)
    assert [r.passed for r in reports] == [True, True, True], [r.as_dict()["blocked_by"] for r in reports]
    assert {c.label for c in reports[-1].checks if c.against == "base"} == {"ask_rate_on_clear vs. base", "invalid_tool_call_rate vs. base"}


def held_out_feedback(org, *, good: int, bad: int):
    """Interactions with stored tokens and decisive feedback; completion ids tell them apart."""
    made = []
    for i in range(good + bad):
        is_good = i < good
        tokens = SampledTokens(prompt_ids=[1, 2], completion_ids=[100 + i], logprobs=[-1.0])
        interaction = interaction_record(org=org, content=InteractionContent([{"role": "user", "content": "x"}], "y", tokens),
                                         source="gateway")
        kind = "edit_persisted" if is_good else random.Random(i).choice(["edit_rejected", "edit_reverted"])
        feedback_ingest(org=org, events=[FeedbackIn(interaction_id=interaction.pk, type=kind, idempotency_key=f"k{i}")])
        made.append((is_good, 100 + i))
    return made


def test_the_tenant_suite_blocks_a_candidate_that_prefers_the_bad_completions(acme, globex, scripted, tmp_path):
    models, scores = scripted
    items = held_out_feedback(acme.org, good=30, bad=30)
    held_out_feedback(globex.org, good=5, bad=5)
    assert len(tenant_suite_items(acme.org)) == 60  # never another organization's
    candidate = candidate_of(acme.org, tmp_path)
    models["demo-base"], models[candidate.name] = ScriptedModel(seed=1), ScriptedModel(seed=2)
    rng = random.Random(0)
    scores["demo-base"] = {(token,): (-1.0 if good else -2.0) + rng.gauss(0, 0.5) for good, token in items}
    scores[candidate.name] = {(token,): (-2.0 if good else -1.0) + rng.gauss(0, 0.5) for good, token in items}
    report = gates_evaluate(candidate=candidate, incumbent=None, score=scorer(scores))
    assert [c.name for c in report.failed] == ["preference_auc"]
    check = report.failed[0]
    assert check.reference > 0.8 and check.candidate < 0.2 and check.samples == 60


def test_thresholds_come_from_the_organization_and_stored_keys_no_longer_known_are_ignored(acme):
    GateThresholds.objects.create(org=acme.org, values={"ask_rate_on_clear": 0.1, "retired_check": 1})
    thresholds = thresholds_for(acme.org)
    assert thresholds.ask_rate_on_clear == 0.1 and thresholds.edit_rate == Thresholds().edit_rate


def test_auc_counts_ties_half_and_orders_by_score():
    assert auc([(True, 2.0), (False, 1.0)]) == 1.0
    assert auc([(True, 1.0), (False, 2.0)]) == 0.0
    assert auc([(True, 1.0), (False, 1.0), (True, 3.0), (False, 0.0)]) == pytest.approx(0.875)
    assert auc([(True, 1.0)]) == 0.5


def test_intervals_match_published_values():
    # Newcombe (1998), table II, example (a): 56/70 vs 48/80 -> 0.0524 to 0.3339.
    assert rate_difference_interval(56, 70, 48, 80) == pytest.approx((0.0524, 0.3339), abs=5e-4)
    assert wilson_interval(0, 10) == pytest.approx((0.0, 0.2775), abs=5e-4)
    low, high = bootstrap_difference_interval([1.0] * 50 + [3.0] * 50, [1.0] * 100, mean, seed=1)
    assert 0.7 < low < 1.0 < high < 1.3
