"""The specialization loop without the platform, to tune the trainer: sample, judge, train, repeat.

    .venv/bin/python benchmarks/offline_loop.py [--personas typed_snake,tab_terse] [--cycles 3]
        [--interactions 400] [--config '{"learning_rate": 1e-3}'] [--weights '{"edit_reverted": -0.5}']
        [--canary-share 0.6] [--seed 0] [--json]

Per persona and cycle: N demo prompts (a fresh seeded draw per cycle) are sampled from the
current policy with transformers at temperature 1, as the server samples them; the persona's
users react (demo.personas.feedback_for, every event counted at once: no delays, no loss);
the reward spec (the default, with --weights merged in) turns each interaction's events into
its reward; the engine trains the current adapter on them (--config overrides TrainConfig);
the result is the next cycle's policy. What the platform adds around this (recording, the
held-out share, gates, canary) is left out, so a trainer change shows its effect in minutes.
With --canary-share, a cycle's data mixes the current policy's samples with the previous one's,
trained on as off-policy examples, as after a canary round (its figures: the current policy's).

Reports per cycle the edit-persisted rate with its 95 % Wilson interval, the rates of edits
meeting the required preferences, invalid tool calls and asks on clear prompts, and the
trainer's KL and clip fraction. Cycle 0 is the base model, the baseline of the same run.
"""

import argparse
import json
import random
import sys
import tempfile
from collections import Counter
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import _django  # noqa: E402

_django.setup()

import torch  # noqa: E402
from peft import PeftModel  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402

from demo.base_model import embedded_base_model  # noqa: E402
from demo.domain import Ask, Invalid, generate, parse_prompt, parse_response, render_prompt  # noqa: E402
from demo.personas import Persona, feedback_for  # noqa: E402
from demo.traffic.stats import wilson_interval  # noqa: E402
from demo.traffic.transports import MAX_TOKENS  # noqa: E402
from training.engine import Example, TrainConfig, train  # noqa: E402
from training.engine.data import pad_tokens  # noqa: E402
from training.engine.policy import load_base, pad_id_of, sequence_logprobs  # noqa: E402
from training.rewards import RewardSpecValues, interaction_reward  # noqa: E402

BASE_MODEL_NAME = "demo-base"
GENERATE_BATCH = 64


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--personas", default="typed_snake,camel_two_space,tab_terse")
    parser.add_argument("--cycles", type=int, default=3)
    parser.add_argument("--interactions", type=int, default=400, help="sampled per cycle (default 400)")
    parser.add_argument("--config", type=json.loads, default={}, help="TrainConfig overrides, as JSON")
    parser.add_argument("--weights", type=json.loads, default={}, help="reward spec weights merged into the default's, as JSON")
    parser.add_argument("--canary-share", type=float, default=1.0,
                        help="after the first cycle, the share of each cycle's prompts the current policy answers; the rest the "
                             "policy before it answers, trained on as off-policy examples, as a canary round leaves them (default 1)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data-dir", type=Path, default=ROOT / ".data", help="where the base model is cached (default .data)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    model_dir = embedded_base_model(args.data_dir)
    config = TrainConfig.from_dict({**TrainConfig().as_dict(), "device": "cpu", **args.config})
    defaults = RewardSpecValues(version=0)
    spec = replace(defaults, weights={**defaults.weights, **args.weights}, kl_coef=config.kl_coef)
    results = {name: run_persona(Persona.load(name), model_dir=model_dir, config=config, spec=spec, args=args)
               for name in args.personas.split(",")}
    print(json.dumps(results) if args.json else report(results, config=config, weights=args.weights))


def run_persona(persona: Persona, *, model_dir: Path, config: TrainConfig, spec: RewardSpecValues, args) -> list[dict]:
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    rows, adapter, previous = [], None, None
    with tempfile.TemporaryDirectory(prefix="offline-loop-") as scratch:
        for cycle in range(args.cycles + 1):
            rng = random.Random(f"{args.seed}:{persona.name}:{cycle}")
            prompts = [render_prompt(generate.sample_prompt(rng)) for _ in range(args.interactions)]
            current = round(args.canary_share * len(prompts)) if 0 < cycle < args.cycles else len(prompts)
            samples = sample(model_dir, adapter, tokenizer, prompts[:current], seed=args.seed * 1000 + cycle)
            stale = sample(model_dir, previous, tokenizer, prompts[current:], seed=args.seed * 1000 + cycle) if prompts[current:] else []
            judged = [(prompt, text, feedback_for(persona, prompt, text, rng)) for prompt, text, _ in samples + stale]
            row = {"cycle": cycle, **rates(judged[:current])}  # the current policy's figures only
            if cycle < args.cycles:
                examples = [
                    Example(prompt_ids=ids[0], completion_ids=ids[1], sampled_logprobs=ids[2], group=prompt,
                            reward=interaction_reward(spec=spec, events=[(e.type, e.value) for e in events], latency_ms=None),
                            behaviour_is_incumbent=k < current)
                    for k, ((prompt, _, events), (_, _, ids)) in enumerate(zip(judged, samples + stale))
                ]
                out = Path(scratch) / f"cycle-{cycle + 1}"
                result = train(base_model_dir=model_dir, incumbent_adapter_dir=adapter, examples=_share_lonely(examples), out_dir=out,
                               base_model_name=BASE_MODEL_NAME, config=config, progress=False)
                adapter, previous = out, adapter
                row.update(kl=round(result.mean_kl, 4), clip=round(result.clip_fraction, 4), train_s=result.seconds["train"],
                           incumbent_kl=round(result.max_incumbent_kl, 4))
            rows.append(row)
            if not args.json:
                print(persona.name, row, file=sys.stderr, flush=True)
    return rows


@torch.no_grad()
def sample(model_dir: Path, adapter: Path | None, tokenizer, prompts: list[str], *, seed: int) -> list[tuple[str, str, tuple]]:
    """(prompt, response text, (prompt ids, completion ids, sampled logprobs)) per prompt."""
    torch.manual_seed(seed)
    model = load_base(model_dir)
    if adapter is not None:
        model = PeftModel.from_pretrained(model, adapter)
    model.eval()
    pad, end = pad_id_of(model), tokenizer.eos_token_id
    encoded = [list(tokenizer.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True)["input_ids"])
               for p in prompts]
    out = []
    for start in range(0, len(prompts), GENERATE_BATCH):
        chunk = encoded[start : start + GENERATE_BATCH]
        width = max(map(len, chunk))
        input_ids = torch.tensor([[pad] * (width - len(ids)) + ids for ids in chunk])  # left-padded for generation
        attention = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids in chunk])
        generated = model.generate(input_ids=input_ids, attention_mask=attention, do_sample=True, temperature=1.0, top_k=0,
                                   top_p=1.0, max_new_tokens=MAX_TOKENS, pad_token_id=pad, eos_token_id=end)
        completions = []
        for row in generated[:, width:].tolist():
            completions.append(row[: row.index(end) + 1] if end in row else row)
        tokens = pad_tokens(list(zip(chunk, completions)), pad_id=pad)
        logprobs = tokens.gather(sequence_logprobs(model, tokens))
        for prompt_ids, completion, lp, prompt in zip(chunk, completions, logprobs, prompts[start:]):
            text = tokenizer.decode([t for t in completion if t != end])
            out.append((prompt, text, (prompt_ids, completion, lp)))
    return out


def rates(judged) -> dict:
    counts, reasons = Counter(), Counter()
    for prompt, text, events in judged:
        types = {e.type for e in events}
        response, clear = parse_response(text), not parse_prompt(prompt).ambiguous
        counts["persisted"] += "edit_persisted" in types
        counts["accepted"] += "edit_accepted" in types  # correct and every required preference met
        counts["invalid"] += isinstance(response, Invalid)
        if isinstance(response, Invalid):
            reasons[str(response.reason)] += 1
        counts["ask_on_clear"] += isinstance(response, Ask) and clear
        counts["clear"] += clear
    n = len(judged)
    low, high = wilson_interval(counts["persisted"], n)
    return {"persisted": round(counts["persisted"] / n, 4), "persisted_ci": [round(low, 4), round(high, 4)],
            "accepted": round(counts["accepted"] / n, 4), "invalid": round(counts["invalid"] / n, 4),
            "ask_on_clear": round(counts["ask_on_clear"] / max(counts["clear"], 1), 4),
            "invalid_reasons": dict(reasons)}


def _share_lonely(examples: list[Example]) -> list[Example]:
    """As the dataset builder does: an example alone with its prompt shares one common baseline."""
    sizes = Counter(e.group for e in examples)
    return [e if sizes[e.group] > 1 else replace(e, group="shared") for e in examples]


def report(results: dict, *, config: TrainConfig, weights: dict) -> str:
    lines = [f"config: lr {config.learning_rate}, epochs {config.epochs}, batch {config.batch_size}, clip {config.clip_ratio}, "
             f"kl {config.kl_coef}, rank {config.lora_rank}; weights {weights or 'default'}"]
    for name, rows in results.items():
        lines.append(f"{name}:")
        for r in rows:
            lo, hi = r["persisted_ci"]
            train = (f"   KL {r['kl']:.4f}, from incumbent {r['incumbent_kl']:.4f} at most, clip {r['clip']:.3f}, "
                     f"{r['train_s']:.0f} s") if "kl" in r else ""
            lines.append(f"  cycle {r['cycle']}: persisted {r['persisted']:6.1%} [{lo:.1%}, {hi:.1%}]  accepted {r['accepted']:6.1%}  "
                         f"invalid {r['invalid']:5.1%}  asks on clear {r['ask_on_clear']:5.1%}{train}")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
