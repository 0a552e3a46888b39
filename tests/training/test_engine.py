"""The training engine on the tiny self-built base model: what an update changes and what it
leaves alone, that it moves the policy the way the rewards point, the objective's clip and
truncation, exact resume, the saved adapter, and that the engine runs without Django."""

import json
import math
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from training.engine import CONFIG_FILE, Example, TrainConfig, completion_logprobs, group_advantages, policy_loss, train
from training.engine import trainer

ROOT = Path(__file__).resolve().parents[2]
BASE_NAME = "demo-base"
PROMPTS = [f"Task: Return the sum of two numbers.\nFunction: add numbers\nFile: module{i}.py" for i in range(8)]
# Two values of one style: the same edit indented with a tab or with four spaces.
TABS = '<edit file="core.py">\ndef add(a, b):\n\treturn a + b\n</edit>'
SPACES = '<edit file="core.py">\ndef add(a, b):\n    return a + b\n</edit>'
# Small and quick, with a learning rate that moves the tiny model visibly in a few steps; on the
# CPU, where a resumed run is bit-identical to an uninterrupted one.
CONFIG = TrainConfig(learning_rate=5e-3, epochs=2, batch_size=4, checkpoint_every=2, device="cpu")


@pytest.fixture(scope="session")
def base_model(tiny_base_model) -> Path:
    return tiny_base_model


@pytest.fixture(scope="session")
def pairs(base_model) -> dict[str, list[tuple[list[int], list[int]]]]:
    """(prompt ids, completion ids) of every prompt answered in each style, encoded as served."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(base_model)

    def encode(prompt: str, completion: str) -> tuple[list[int], list[int]]:
        rendered = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=False)
        return (tokenizer(rendered, add_special_tokens=False)["input_ids"],
                tokenizer(completion, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id])

    return {style: [encode(prompt, completion) for prompt in PROMPTS] for style, completion in (("tabs", TABS), ("spaces", SPACES))}


@pytest.fixture(scope="session")
def examples(base_model, pairs) -> list[Example]:
    """Each prompt answered in both styles, tabs rewarded and spaces punished, with the base
    model's logprobs standing in for the ones served (a fresh adapter starts as the base)."""
    made = []
    for style, reward in (("tabs", 1.0), ("spaces", -1.0)):
        sampled = completion_logprobs(base_model_dir=base_model, adapter_dir=None, pairs=pairs[style])
        made += [Example(prompt_ids=p, completion_ids=c, sampled_logprobs=lp, reward=reward, group=i)
                 for i, ((p, c), lp) in enumerate(zip(pairs[style], sampled))]
    return made


@pytest.fixture(scope="module")
def trained(base_model, examples, tmp_path_factory):
    """One update from a fresh adapter, keeping the policy it trained and its weights at the start."""
    seen = {}

    def load_and_remember(**kwargs):
        seen["policy"] = policy = load_policy(**kwargs)
        seen["start"] = {name: p.detach().clone() for name, p in policy.named_parameters()}
        return policy

    load_policy = trainer.load_policy
    out_dir = tmp_path_factory.mktemp("adapters") / "acme@1"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(trainer, "load_policy", load_and_remember)
        report = train(base_model_dir=base_model, incumbent_adapter_dir=None, examples=examples, out_dir=out_dir,
                       base_model_name=BASE_NAME, config=CONFIG, progress=False)
    return report, seen


def mean_logprob(base_model: Path, adapter_dir: Path | None, pairs) -> float:
    scores = completion_logprobs(base_model_dir=base_model, adapter_dir=adapter_dir, pairs=pairs)
    return sum(sum(row) for row in scores) / len(scores)


def test_training_changes_the_lora_weights_and_not_the_base_weights(trained):
    _, seen = trained
    after = dict(seen["policy"].named_parameters())
    lora = [name for name in after if "lora_" in name]
    assert lora and all(not torch.equal(after[name].detach(), seen["start"][name]) for name in lora)
    assert all(torch.equal(after[name].detach(), seen["start"][name]) for name in after if name not in lora)


def test_an_update_raises_the_rewarded_style_against_the_punished_one(trained, base_model, pairs):
    report, _ = trained

    def log_odds(adapter_dir: Path | None) -> float:  # of answering with tabs rather than spaces
        return mean_logprob(base_model, adapter_dir, pairs["tabs"]) - mean_logprob(base_model, adapter_dir, pairs["spaces"])

    before, after = log_odds(None), log_odds(report.adapter_dir)
    assert after - before > 0.5, (before, after)


def test_the_adapter_is_a_peft_directory_naming_the_served_base(trained, base_model):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    report, seen = trained
    assert json.loads((report.adapter_dir / "adapter_config.json").read_text())["base_model_name_or_path"] == BASE_NAME
    assert TrainConfig.from_dict(json.loads((report.adapter_dir / CONFIG_FILE).read_text())) == CONFIG
    loaded = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base_model), report.adapter_dir)
    trained_weights = dict(seen["policy"].named_parameters())
    assert all(torch.equal(p, trained_weights[name]) for name, p in loaded.named_parameters() if "lora_" in name)


def test_the_report_counts_the_whole_run(trained, examples):
    report, _ = trained
    assert report.finished and report.steps == CONFIG.epochs * math.ceil(len(examples) / CONFIG.batch_size)
    assert report.completion_tokens == CONFIG.epochs * sum(len(e.completion_ids) for e in examples)
    assert report.tokens_per_second > 0 and report.mean_kl > 0 and 0 <= report.clip_fraction <= 1
    assert set(report.seconds) == {"setup", "train", "save"} and report.device == "cpu"
    assert report.per_step["step"] == list(range(1, report.steps + 1))
    assert all(len(values) == report.steps for values in report.per_step.values())
    assert sum(report.per_step["loss"]) / report.steps == pytest.approx(report.mean_loss, abs=1e-5)


def test_a_run_resumed_from_its_checkpoint_ends_with_the_weights_of_an_uninterrupted_run(base_model, examples, tmp_path):
    common = dict(base_model_dir=base_model, incumbent_adapter_dir=None, examples=examples, base_model_name=BASE_NAME, config=CONFIG, progress=False)
    whole = train(out_dir=tmp_path / "whole", **common)
    # Stopped at step 5 of 8, after the checkpoint of step 4 and across the epoch boundary.
    stopped = train(out_dir=tmp_path / "resumed", checkpoint_dir=tmp_path / "checkpoints", stop_after_steps=5, **common)
    assert not stopped.finished and not (tmp_path / "resumed").exists()
    resumed = train(out_dir=tmp_path / "resumed", checkpoint_dir=tmp_path / "checkpoints", **common)
    assert resumed.resumed_from_step == 4 and resumed.steps == whole.steps
    expected, actual = load_file(whole.adapter_dir / "adapter_model.safetensors"), load_file(resumed.adapter_dir / "adapter_model.safetensors")
    assert expected.keys() == actual.keys() and all(torch.equal(expected[k], actual[k]) for k in expected)
    assert resumed.mean_loss == pytest.approx(whole.mean_loss)
    assert resumed.per_step == whole.per_step  # the plot of a resumed run is the whole run's
    assert not (tmp_path / "checkpoints" / "checkpoint.pt").exists()


def test_a_checkpoint_of_other_examples_is_not_resumed(base_model, examples, tmp_path):
    common = dict(base_model_dir=base_model, incumbent_adapter_dir=None, base_model_name=BASE_NAME, config=CONFIG,
                  checkpoint_dir=tmp_path / "checkpoints", progress=False)
    train(examples=examples, out_dir=tmp_path / "first", stop_after_steps=2, **common)
    other = [replace(e, reward=-e.reward) for e in examples]
    assert train(examples=other, out_dir=tmp_path / "second", **common).resumed_from_step == 0


def test_an_incumbent_adapter_is_trained_from_its_own_weights(base_model, examples, tmp_path):
    from tests.serving.adapters import random_lora

    incumbent = random_lora(base_model, tmp_path / "incumbent", seed=1)
    # Off-policy: sampled by an older adapter (here, the base), so the incumbent's logprobs are recomputed.
    stale = [replace(e, behaviour_is_incumbent=False) for e in examples]
    report = train(base_model_dir=base_model, incumbent_adapter_dir=incumbent, examples=stale, out_dir=tmp_path / "next",
                   base_model_name=BASE_NAME, config=replace(CONFIG, learning_rate=1e-4, epochs=1), progress=False)
    before, after = load_file(incumbent / "adapter_model.safetensors"), load_file(report.adapter_dir / "adapter_model.safetensors")
    assert before.keys() == after.keys()
    assert all(torch.allclose(before[k], after[k], atol=1e-3) and not torch.equal(before[k], after[k]) for k in before)


def test_an_existing_adapter_directory_is_never_overwritten(base_model, examples, tmp_path):
    (tmp_path / "acme@1").mkdir()
    with pytest.raises(FileExistsError):
        train(base_model_dir=base_model, incumbent_adapter_dir=None, examples=examples, out_dir=tmp_path / "acme@1",
              base_model_name=BASE_NAME, config=CONFIG, progress=False)


def objective(**overrides):
    """policy_loss on one sequence of two completion tokens, ratio 1 and advantage +1 unless overridden."""
    values = dict(
        new_logprobs=torch.tensor([[-1.0, -1.0]], requires_grad=True), proximal_logprobs=torch.tensor([[-1.0, -1.0]]),
        behaviour_logprobs=torch.tensor([[-1.0, -1.0]]), base_logprobs=torch.tensor([[-1.0, -1.0]]),
        advantages=torch.tensor([1.0]), mask=torch.tensor([[True, True]]), clip_ratio=0.2, kl_coef=0.0, max_importance_weight=2.0,
    )
    values.update(overrides)
    terms = policy_loss(**values)
    terms.loss.backward()
    return terms, values["new_logprobs"].grad


def test_importance_weights_of_off_policy_tokens_are_truncated():
    # The incumbent finds the first token 5 times likelier than the policy that sampled it (weight
    # truncated to 2) and the second half as likely (weight 0.5, kept).
    behaviour = torch.tensor([[-1.0 - math.log(5), -1.0 + math.log(2)]])
    _, grad = objective(behaviour_logprobs=behaviour)
    # d(loss)/d(new_t) = -w_t * r_t * A / tokens, with r_t = 1 and A = 1.
    assert torch.allclose(grad, torch.tensor([[-2.0, -0.5]]) / 2)


def test_the_clip_removes_the_gradient_only_in_the_clipped_direction():
    far = torch.tensor([[-1.0 + math.log(1.5), -1.0 + math.log(0.5)]], requires_grad=True)  # ratios 1.5 and 0.5
    terms, grad = objective(new_logprobs=far)
    # A > 0: the ratio above 1 + eps earns nothing more; the one below 1 - eps is still pushed up.
    assert grad[0, 0] == 0 and grad[0, 1] < 0 and terms.clip_fraction == 0.5
    terms, grad = objective(new_logprobs=far.detach().clone().requires_grad_(), advantages=torch.tensor([-1.0]))
    # A < 0: mirrored.
    assert grad[0, 0] > 0 and grad[0, 1] == 0 and terms.clip_fraction == 0.5


def test_the_kl_term_pulls_the_policy_towards_the_base_and_masked_tokens_count_for_nothing():
    new = torch.tensor([[-0.5, -3.0, -9.0]], requires_grad=True)
    terms, grad = objective(new_logprobs=new, proximal_logprobs=new.detach(), behaviour_logprobs=new.detach(),
                            base_logprobs=torch.tensor([[-1.0, -1.0, -1.0]]), advantages=torch.tensor([0.0]),
                            mask=torch.tensor([[True, True, False]]), kl_coef=1.0)
    assert terms.kl > 0 and grad[0, 0] > 0 and grad[0, 1] < 0 and grad[0, 2] == 0  # descent lowers the first, raises the second


def test_the_kl_term_pulls_back_a_suppressed_token_much_harder_than_a_boosted_one():
    # k3's pull grows exponentially on a token the policy made much less likely than the base (the
    # syntax the base always writes, say) and only linearly on one it made likelier: a symmetric
    # estimator such as k2 let invalid tool calls rise in benchmarks/offline_loop.py.
    new = torch.tensor([[-6.0, -1.0]], requires_grad=True)  # the first 5 nats below the base, the second 5 above
    _, grad = objective(new_logprobs=new, proximal_logprobs=new.detach(), behaviour_logprobs=new.detach(),
                        base_logprobs=torch.tensor([[-1.0, -6.0]]), advantages=torch.tensor([0.0]), kl_coef=1.0)
    # d/d(new) of exp(base - new) - (base - new) - 1 is 1 - exp(base - new), over 2 tokens.
    assert torch.allclose(grad, torch.tensor([[1 - math.exp(5), 1 - math.exp(-5)]]) / 2)
    assert -grad[0, 0] > 100 * grad[0, 1]


def test_the_distance_from_the_incumbent_is_zero_at_the_start_and_grows_with_the_ratio():
    assert objective()[0].incumbent_kl == 0.0
    moved = objective(new_logprobs=torch.tensor([[-1.0 + math.log(2), -1.0]], requires_grad=True))[0]
    assert math.isclose(moved.incumbent_kl.item(), ((2 - 1) - math.log(2)) / 2, rel_tol=1e-6)  # k3 at ratios 2 and 1, over 2 tokens

def test_advantages_are_centered_per_group_and_scaled_by_one_batch_deviation():
    def example(reward: float, group: str) -> Example:
        return Example(prompt_ids=[1], completion_ids=[2], sampled_logprobs=[-1.0], reward=reward, group=group)

    advantages = group_advantages([example(1.0, "a"), example(3.0, "a"), example(10.0, "b"), example(14.0, "b"), example(5.0, "alone")])
    centered = torch.tensor([-1.0, 1.0, -2.0, 2.0, 0.0])
    assert torch.allclose(advantages, centered / centered.std(correction=0))
    assert torch.equal(group_advantages([example(1.0, "a"), example(1.0, "a")]), torch.zeros(2))


def test_a_replayed_example_teaches_only_what_beat_its_baseline():
    def example(reward: float, replayed: bool) -> Example:
        return Example(prompt_ids=[1], completion_ids=[2], sampled_logprobs=[-1.0], reward=reward, group="a", replayed=replayed)

    fresh = group_advantages([example(-1.0, False), example(1.0, False), example(-1.0, False), example(1.0, False)])
    replayed = group_advantages([example(-1.0, True), example(1.0, True), example(-1.0, False), example(1.0, False)])
    assert torch.equal(replayed, fresh.clamp(min=0) * torch.tensor([1, 1, 0, 0]) + fresh * torch.tensor([0, 0, 1, 1]))


def test_a_fresh_example_below_its_baseline_is_scaled_by_the_negative_scale_and_a_replayed_one_still_teaches_nothing():
    def example(reward: float, replayed: bool = False) -> Example:
        return Example(prompt_ids=[1], completion_ids=[2], sampled_logprobs=[-1.0], reward=reward, group="a", replayed=replayed)

    batch = [example(-1.0), example(1.0), example(-1.0, replayed=True), example(1.0)]
    whole, halved = group_advantages(batch), group_advantages(batch, negative_scale=0.5)
    assert torch.equal(halved, torch.where(whole < 0, whole * 0.5, whole)) and halved[0] < 0
    assert halved[2] == 0 and torch.equal(halved[1::2], whole[1::2])
    with pytest.raises(ValueError, match="negative_advantage_scale"):
        TrainConfig(negative_advantage_scale=-0.5)


def test_replayed_examples_that_teach_nothing_set_the_baseline_and_leave_the_run(base_model, examples, tmp_path):
    rewarded, punished = examples[: len(PROMPTS)], examples[len(PROMPTS):]
    replays = [replace(e, replayed=True, behaviour_is_incumbent=False) for e in rewarded[:2] + punished[:3]]
    report = train(base_model_dir=base_model, incumbent_adapter_dir=None, examples=examples + replays, out_dir=tmp_path / "out",
                   base_model_name=BASE_NAME, config=CONFIG, progress=False)
    assert report.examples == len(examples) + 2  # the punished replays only counted in their groups' baselines
    with pytest.raises(ValueError, match="Only replayed examples"):
        train(base_model_dir=base_model, incumbent_adapter_dir=None, examples=replays, out_dir=tmp_path / "none",
              base_model_name=BASE_NAME, config=CONFIG, progress=False)


def test_the_engine_imports_nothing_of_django_or_the_platform():
    script = (
        "import sys, training.engine\n"
        "print(sorted({name for name in sys.modules if name.split('.')[0] in\n"
        "    {'django', 'rest_framework', 'celery', 'tenants', 'serving', 'demo', 'controlplane'}\n"
        "    or name.startswith('training.') and not name.startswith('training.engine')}))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
