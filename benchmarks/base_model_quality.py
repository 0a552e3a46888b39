"""The demo base model's figures, sampled through vLLM (the engine that serves it).

    .venv/bin/python benchmarks/base_model_quality.py [--prompts 1000] [--json]

Builds the base model if it is not cached (python -m demo.base_model), then samples one
response at temperature 1 for each of N fresh prompts (a seed the corpus never used; 20 %
ambiguous, as in the corpus) and reports: parameter count and build time; valid tool-call
rate; correct-body rate among edits; the share of each value of each style dimension (uniform
is the target); ask rate on clear and on ambiguous prompts; and, for three example personas,
the edit-persisted and dissatisfied-follow-up rates the base model gets from their users: the
baseline specialization must beat.

No per-request seed: a fixed seed in each request's sampling parameters makes every request
draw the same random numbers and skews the style shares. The engine's seed fixes the run.
"""

import argparse
import json
import os
import random
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "platform")]

from demo.base_model.bootstrap import build_info, ensure_base_model  # noqa: E402
from demo.base_model.config import BaseModelConfig  # noqa: E402
from demo.domain import DIMENSIONS, Ask, Edit, check_edit, generate, parse_response, render_prompt  # noqa: E402
from demo.personas import Persona, feedback_for  # noqa: E402

PERSONAS = ("typed_snake", "camel_two_space", "tab_terse")
PROMPT_SEED = 1_000_003  # not the corpus's seed: these prompts are fresh draws


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=1000)
    parser.add_argument("--data-dir", type=Path, default=Path(os.environ.get("PLATFORM_DATA_DIR", ROOT / ".data")))
    parser.add_argument("--steps", type=int, help="the base model's training steps (default: the config's)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    config = BaseModelConfig() if args.steps is None else replace(BaseModelConfig(), steps=args.steps)
    model_dir = ensure_base_model(config, args.data_dir)
    rng = random.Random(PROMPT_SEED)
    prompts = [generate.sample_prompt(rng) for _ in range(args.prompts)]
    prompt_texts = [render_prompt(p) for p in prompts]
    responses = sample_with_vllm(model_dir, prompt_texts)
    figures = {"model": build_info(model_dir)["report"], **measure(prompts, prompt_texts, responses)}
    print(json.dumps(figures) if args.json else report(figures))


def sample_with_vllm(model_dir: Path, prompt_texts: list[str]) -> list[str]:
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    from vllm import LLM, SamplingParams

    llm = LLM(model=str(model_dir), max_model_len=256, dtype="float32", seed=0)
    params = SamplingParams(temperature=1.0, max_tokens=160)
    outputs = llm.chat([[{"role": "user", "content": text}] for text in prompt_texts], params, use_tqdm=True)
    return [output.outputs[0].text for output in outputs]


def measure(prompts, prompt_texts, responses) -> dict:
    parsed = [parse_response(text) for text in responses]
    edits = [(prompt, r) for prompt, r in zip(prompts, parsed, strict=True) if isinstance(r, Edit)]
    verdicts = [check_edit(edit, prompt) for prompt, edit in edits]
    clear = [r for p, r in zip(prompts, parsed, strict=True) if not p.ambiguous]
    ambiguous = [r for p, r in zip(prompts, parsed, strict=True) if p.ambiguous]
    styles = [v.style for v in verdicts if v.style is not None]
    shares = {
        dimension: {value: _rate(sum(getattr(s, dimension) == value for s in styles), len(styles)) for value in values}
        for dimension, values in DIMENSIONS.items()
    }
    return {
        "prompts": len(prompts),
        "valid_tool_call_rate": _rate(len(edits) + sum(isinstance(r, Ask) for r in parsed), len(parsed)),
        "invalid_reasons": dict(Counter(str(r.reason.value) for r in parsed if not isinstance(r, (Edit, Ask))).most_common()),
        "correct_body_rate_among_edits": _rate(sum(v.correct_body for v in verdicts), len(verdicts)),
        "style_shares": shares,
        "max_style_deviation_from_uniform": max(
            abs(share - 1 / len(values)) for dimension, values in DIMENSIONS.items() for share in shares[dimension].values()
        ),
        "ask_rate_clear": _rate(sum(isinstance(r, Ask) for r in clear), len(clear)),
        "ask_rate_ambiguous": _rate(sum(isinstance(r, Ask) for r in ambiguous), len(ambiguous)),
        "personas": {name: persona_rates(Persona.load(name), prompt_texts, responses) for name in PERSONAS},
    }


def persona_rates(persona, prompt_texts, responses) -> dict:
    rng = random.Random(7)
    events = [{e.type for e in feedback_for(persona, prompt, text, rng)} for prompt, text in zip(prompt_texts, responses, strict=True)]
    return {
        "edit_persisted_rate": _rate(sum("edit_persisted" in e for e in events), len(events)),
        "dissatisfied_followup_rate": _rate(sum("dissatisfied_followup" in e for e in events), len(events)),
    }


def _rate(count: int, total: int) -> float:
    return round(count / total, 4) if total else 0.0


def report(f: dict) -> str:
    m = f["model"]
    lines = [
        f"base model {m['fingerprint']}: {m['parameters']:,} parameters, built in {m['seconds']:.0f} s on {m['device']} (final loss {m['final_loss']})",
        f"{f['prompts']} fresh prompts at temperature 1, through vLLM:",
        f"  valid tool calls          {f['valid_tool_call_rate']:.1%}   (target >= 95 %)  invalid: {f['invalid_reasons']}",
        f"  correct bodies among edits {f['correct_body_rate_among_edits']:.1%}",
        f"  ask rate, clear prompts    {f['ask_rate_clear']:.1%}   (corpus: 10 %)",
        f"  ask rate, ambiguous        {f['ask_rate_ambiguous']:.1%}   (corpus: 80 %)",
        f"  style shares (largest deviation from uniform {f['max_style_deviation_from_uniform']:.1%}, target <= 10 points):",
    ]
    lines += [f"    {d:<10} " + "  ".join(f"{v}={s:.1%}" for v, s in shares.items()) for d, shares in f["style_shares"].items()]
    lines.append("  baseline per persona:       edit persisted   dissatisfied follow-up")
    lines += [f"    {name:<24} {r['edit_persisted_rate']:>8.1%}   {r['dissatisfied_followup_rate']:>14.1%}" for name, r in f["personas"].items()]
    return "\n".join(lines)


if __name__ == "__main__":  # vLLM's engine starts a subprocess: the guard is required
    main()
