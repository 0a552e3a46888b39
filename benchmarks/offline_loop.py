"""The specialization loop without the platform, to tune the trainer: sample, judge, train, repeat.

    .venv/bin/python benchmarks/offline_loop.py [--personas typed_snake,tab_terse] [--cycles 3]
        [--interactions 400] [--config '{"learning_rate": 1e-3}'] [--weights '{"edit_reverted": -0.5}']
        [--canary-share 0.6] [--replay 2] [--seeds 0-9] [--jobs 2] [--no-step-search] [--json]

Per persona and cycle: N demo prompts (a fresh seeded draw per cycle) are sampled from the
current policy with transformers at temperature 1, as the server samples them; the persona's
users react (demo.personas.feedback_for, every event counted at once: no delays, no loss);
the reward spec (the default, with --weights merged in) turns each interaction's events into
its reward; the engine trains the current adapter on them (--config overrides TrainConfig);
the step search keeps the longest step along the update whose invalid tool calls on the demo's
global suite stay within the gates' tolerance, as a platform run does (training/steps.py;
--no-step-search keeps every step whole); the result is the next cycle's policy. What the
platform adds around this (recording, the held-out share, gates, canary) is left out, so a
trainer change shows its effect in minutes.
With --canary-share, a cycle's data mixes the current policy's samples with the previous one's,
trained on as off-policy examples, as after a canary round (its figures: the current policy's).
With --replay K, the examples of the K cycles before train again, as replayed examples (only
their successes teach: training.engine.data.group_advantages).

Reports per cycle the edit-persisted rate with its 95 % Wilson interval (and on clear prompts
alone: an ambiguous prompt, one in five, is answered right by an ask, so per request the rate
stays under about 76 %), the rates of edits meeting the required preferences, invalid tool
calls and asks on clear prompts, among correct edits the share meeting each of the persona's
preferences (which dimension lags), the positive examples the cycle trained on, and the
trainer's KL and clip fraction. Cycle 0 is the base model, the baseline of the same run. With
several seeds (--seeds 0-9, run --jobs at a time), it ends with each persona's distribution
over the seeds of the gain in points after each cycle (min, median, max) and how many seeds
gained +30 or more by the last cycle.
"""

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import _django  # noqa: E402

_django.setup()

import torch  # noqa: E402

from demo.base_model import embedded_base_model  # noqa: E402
from demo.domain import Ask, Edit, Invalid, check_edit, generate, parse_prompt, parse_response, render_prompt  # noqa: E402
from demo.personas import Persona, feedback_for  # noqa: E402
from demo.traffic.stats import wilson_interval  # noqa: E402
from demo.suite import DemoGlobalSuite  # noqa: E402
from demo.traffic.transports import MAX_TOKENS  # noqa: E402
from serving.policies import Thresholds  # noqa: E402
from training.engine import Example, TrainConfig, train  # noqa: E402
from training.engine.step import sample_completions  # noqa: E402
from training.rewards import RewardSpecValues, interaction_reward  # noqa: E402
from training.datasets import share_lonely_groups  # noqa: E402
from training.steps import step_choose  # noqa: E402

BASE_MODEL_NAME = "demo-base"
TARGET_GAIN = 0.30  # of edit-persisted rate, by the last cycle


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
    parser.add_argument("--replay", type=int, default=2,
                        help="cycles back whose examples train again, as a platform run replays earlier runs' windows: "
                             "off-policy, and only those that beat their baseline (default 2, as the platform; 0: each "
                             "cycle's data trains once)")
    parser.add_argument("--seeds", type=seed_list, default=[0], help="one seed, a list (0,3,5) or a range (0-9); default 0")
    parser.add_argument("--seed", type=int, dest="seeds_one", help="the same as --seeds N")
    parser.add_argument("--jobs", type=int, default=1, help="persona-seed runs at a time, each on cores / jobs threads (default 1)")
    parser.add_argument("--no-step-search", dest="step_search", action="store_false",
                        help="keep every trained step whole, as runs did before the line search (training/steps.py)")
    parser.add_argument("--data-dir", type=Path, default=ROOT / ".data", help="where the base model is cached (default .data)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.seeds_one is not None:
        args.seeds = [args.seeds_one]

    model_dir = embedded_base_model(args.data_dir)
    config = TrainConfig.from_dict({**TrainConfig().as_dict(), "device": "cpu", **args.config})
    defaults = RewardSpecValues(version=0)
    spec = replace(defaults, weights={**defaults.weights, **args.weights}, kl_coef=config.kl_coef)
    runs = [(name, seed) for seed in args.seeds for name in args.personas.split(",")]  # seed-major: any prefix covers every persona
    threads = max(1, len(os.sched_getaffinity(0)) // args.jobs)  # the cores this process may use (taskset)
    with ProcessPoolExecutor(args.jobs) as pool:
        futures = {run: pool.submit(run_persona, run[0], seed=run[1], model_dir=model_dir, config=config, spec=spec, args=args,
                                    threads=threads) for run in runs}
        results = {f"{name}@{seed}": futures[(name, seed)].result() for name, seed in runs}
    if args.json:
        print(json.dumps({"runs": results, "summary": summary(results)}))
    else:
        print(report(results, config=config, weights=args.weights))


def seed_list(text: str) -> list[int]:
    """Seeds from "3", "0,3,5" or "0-9"."""
    if "-" in text:
        first, last = map(int, text.split("-"))
        return list(range(first, last + 1))
    return [int(seed) for seed in text.split(",")]


def run_persona(name: str, *, seed: int, model_dir: Path, config: TrainConfig, spec: RewardSpecValues, args,
                threads: int) -> list[dict]:
    torch.set_num_threads(threads)
    persona = Persona.load(name)
    rows, adapter, previous, history = [], None, None, []
    with tempfile.TemporaryDirectory(prefix="offline-loop-") as scratch:
        for cycle in range(args.cycles + 1):
            rng = random.Random(f"{seed}:{persona.name}:{cycle}")
            prompts = [render_prompt(generate.sample_prompt(rng)) for _ in range(args.interactions)]
            current = round(args.canary_share * len(prompts)) if 0 < cycle < args.cycles else len(prompts)
            samples = sample(model_dir, adapter, prompts[:current], seed=seed * 1000 + cycle)
            stale = sample(model_dir, previous, prompts[current:], seed=seed * 1000 + cycle) if prompts[current:] else []
            judged = [(prompt, text, feedback_for(persona, prompt, text, rng)) for prompt, text, _ in samples + stale]
            row = {"cycle": cycle, **rates(judged[:current], persona)}  # the current policy's figures only
            if cycle < args.cycles:
                examples = [
                    Example(prompt_ids=ids[0], completion_ids=ids[1], sampled_logprobs=ids[2], group=prompt,
                            reward=interaction_reward(spec=spec, events=[(e.type, e.value) for e in events], latency_ms=None),
                            behaviour_is_incumbent=k < current)
                    for k, ((prompt, _, events), (_, _, ids)) in enumerate(zip(judged, samples + stale))
                ]
                sampled_by = [cycle if k < current else cycle - 1 for k in range(len(examples))]  # the policy of which cycle
                replayed = [(replace(e, behaviour_is_incumbent=False, replayed=True), by)
                            for old in history[max(0, len(history) - args.replay):] for e, by in old]
                history.append(list(zip(examples, sampled_by)))
                trained_on = share_lonely_groups(examples + [e for e, _ in replayed], sampled_by + [by for _, by in replayed])
                out = Path(scratch) / f"cycle-{cycle + 1}"
                result = train(base_model_dir=model_dir, incumbent_adapter_dir=adapter, examples=trained_on, out_dir=out,
                               base_model_name=BASE_MODEL_NAME, config=config, progress=False)
                if args.step_search:  # as a platform run does before its gates (training/steps.py)
                    choice = step_choose(suite=DemoGlobalSuite(), base_model_dir=model_dir, incumbent_adapter_dir=adapter,
                                         trained_adapter_dir=out, work_dir=Path(scratch) / f"steps-{cycle + 1}",
                                         tolerance=Thresholds().invalid_tool_call_rate, seed=seed * 1000 + cycle, device="cpu")
                    out = choice.adapter_dir
                    row["step"] = choice.fraction
                adapter, previous = out, adapter
                row.update(kl=round(result.mean_kl, 4), clip=round(result.clip_fraction, 4), train_s=result.seconds["train"],
                           incumbent_kl=round(result.max_incumbent_kl, 4),
                           positives=sum(any(e.type == "edit_persisted" for e in events) for _, _, events in judged))
            rows.append(row)
            print(f"{persona.name}@{seed}", row, file=sys.stderr, flush=True)
    return rows


def sample(model_dir: Path, adapter: Path | None, prompts: list[str], *, seed: int) -> list[tuple[str, str, tuple]]:
    """(prompt, response text, (prompt ids, completion ids, sampled logprobs)) per prompt."""
    samples = sample_completions(base_model_dir=model_dir, adapter_dir=adapter, conversations=[[{"role": "user", "content": p}] for p in prompts],
                                 max_tokens=MAX_TOKENS, seed=seed, device="cpu")
    return [(prompt, s.text, (s.prompt_ids, s.completion_ids, s.logprobs)) for prompt, s in zip(prompts, samples, strict=True)]


def rates(judged, persona: Persona) -> dict:
    counts, reasons, meets = Counter(), Counter(), Counter()
    preferences = {**persona.required, **persona.soft}
    for prompt, text, events in judged:
        types = {e.type for e in events}
        response, clear = parse_response(text), not parse_prompt(prompt).ambiguous
        if isinstance(response, Edit) and (verdict := check_edit(response, parse_prompt(prompt))).correct:
            counts["correct"] += 1
            for dimension, value in preferences.items():
                meets[dimension] += getattr(verdict.style, dimension) == value
        counts["persisted"] += "edit_persisted" in types
        counts["persisted_on_clear"] += "edit_persisted" in types and clear  # an ambiguous prompt's edit never persists
        counts["accepted"] += "edit_accepted" in types  # correct and every required preference met
        counts["invalid"] += isinstance(response, Invalid)
        if isinstance(response, Invalid):
            reasons[str(response.reason)] += 1
        counts["ask_on_clear"] += isinstance(response, Ask) and clear
        counts["clear"] += clear
    n = len(judged)
    low, high = wilson_interval(counts["persisted"], n)
    return {"persisted": round(counts["persisted"] / n, 4), "persisted_ci": [round(low, 4), round(high, 4)],
            "persisted_on_clear": round(counts["persisted_on_clear"] / max(counts["clear"], 1), 4),
            "accepted": round(counts["accepted"] / n, 4), "invalid": round(counts["invalid"] / n, 4),
            "ask_on_clear": round(counts["ask_on_clear"] / max(counts["clear"], 1), 4),
            "meets": {dimension: round(meets[dimension] / max(counts["correct"], 1), 3) for dimension in preferences},
            "invalid_reasons": dict(reasons)}


def summary(results: dict[str, list[dict]]) -> dict:
    """Per persona, over its seeds: the gain in edit-persisted rate after each cycle (min,
    median, max), how many seeds reached TARGET_GAIN by the last cycle, and the highest
    invalid-call rate of any cycle's policy."""
    by_persona: dict[str, list[list[dict]]] = {}
    for key, rows in results.items():
        by_persona.setdefault(key.split("@")[0], []).append(rows)
    out = {}
    for name, runs in by_persona.items():
        gains = [[r["persisted"] - rows[0]["persisted"] for r in rows[1:]] for rows in runs]
        out[name] = {
            "seeds": len(runs),
            "gain_by_cycle": [{"min": round(min(g), 3), "median": round(statistics.median(g), 3), "max": round(max(g), 3)}
                              for g in zip(*gains)],
            "reached_target": sum(g[-1] >= TARGET_GAIN for g in gains),
            "final_persisted": {"min": min(rows[-1]["persisted"] for rows in runs),
                                "median": statistics.median(rows[-1]["persisted"] for rows in runs)},
            "max_invalid": max(r["invalid"] for rows in runs for r in rows),
        }
    return out


def report(results: dict, *, config: TrainConfig, weights: dict) -> str:
    lines = [f"config: lr {config.learning_rate}, epochs {config.epochs}, batch {config.batch_size}, clip {config.clip_ratio}, "
             f"kl {config.kl_coef}, rank {config.lora_rank}; weights {weights or 'default'}"]
    for name, rows in results.items():
        lines.append(f"{name}:")
        for r in rows:
            lo, hi = r["persisted_ci"]
            train = (f"   KL {r['kl']:.4f}, from incumbent {r['incumbent_kl']:.4f} at most, clip {r['clip']:.3f}, "
                     f"{r['positives']} persisted in its data, {r['train_s']:.0f} s") if "kl" in r else ""
            meets = " ".join(f"{dimension} {share:.0%}" for dimension, share in r["meets"].items())
            lines.append(f"  cycle {r['cycle']}: persisted {r['persisted']:6.1%} [{lo:.1%}, {hi:.1%}] ({r['persisted_on_clear']:.1%} on clear "
                         f"prompts)  accepted {r['accepted']:6.1%}  "
                         f"invalid {r['invalid']:5.1%}  asks on clear {r['ask_on_clear']:5.1%}  meets: {meets}{train}")
    lines.append("gain in points after each cycle over the seeds (min / median / max); seeds reaching "
                 f"+{TARGET_GAIN * 100:.0f} by the last cycle; the highest invalid-call rate of any cycle")
    for name, s in summary(results).items():
        cycles = "  ".join(f"c{k}: {g['min'] * 100:+.0f} / {g['median'] * 100:+.0f} / {g['max'] * 100:+.0f}"
                           for k, g in enumerate(s["gain_by_cycle"], 1))
        lines.append(f"  {name:<22} {cycles}   {s['reached_target']}/{s['seeds']} seeds   invalid at most {s['max_invalid']:.1%}")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
