"""How far a cycle steps: an adapter part of the way from the incumbent to the trained one, and
samples of a policy to judge a step by.

A cycle's update can overshoot: a step that learnt the organization's style can also have
broken the tool-call syntax on prompts it never saw, and then the gates block it and the cycle
is lost. Rather than retrain, the run tries shorter steps along the same update (a line search
the platform runs with its global suite before the gates: training/runs.py) and keeps the
longest one that does not break what the suite checks.
"""

import json
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from peft import PeftModel
from safetensors.torch import load_file, save_file
from transformers import AutoTokenizer

from training.engine.data import pad_tokens
from training.engine.policy import load_base, pad_id_of, resolve_device, sequence_logprobs

WEIGHTS_FILE = "adapter_model.safetensors"
GENERATE_BATCH = 64


def adapter_at_step(*, incumbent_adapter_dir: Path | None, trained_adapter_dir: Path, fraction: float, out_dir: Path) -> Path:
    """The adapter `fraction` of the way from the incumbent to the trained one, saved at out_dir.

    From a fresh adapter (no incumbent: B was zero) only B is scaled, so the weight change B A is
    exactly `fraction` of the trained one. From an incumbent, A and B are each interpolated:
    for the small steps of one cycle, close to interpolating their product."""
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be within (0, 1], not {fraction}")
    trained = load_file(trained_adapter_dir / WEIGHTS_FILE)
    if incumbent_adapter_dir is None:
        stepped = {name: value * fraction if ".lora_B." in name else value for name, value in trained.items()}
    else:
        incumbent = load_file(incumbent_adapter_dir / WEIGHTS_FILE)
        if incumbent.keys() != trained.keys():
            raise ValueError("the trained adapter does not have the incumbent's shape")
        stepped = {name: incumbent[name] + fraction * (value - incumbent[name]) for name, value in trained.items()}
    shutil.copytree(trained_adapter_dir, out_dir, ignore=shutil.ignore_patterns(WEIGHTS_FILE))
    save_file({name: value.contiguous() for name, value in stepped.items()}, out_dir / WEIGHTS_FILE)
    (out_dir / "step.json").write_text(json.dumps({"fraction": fraction}) + "\n")
    return out_dir


@dataclass(frozen=True)
class Sample:
    text: str  # the completion, end token left out
    prompt_ids: list[int]  # chat template applied
    completion_ids: list[int]  # end token included if it wrote one
    logprobs: list[float]  # of each completion token under the policy that sampled it


@torch.no_grad()
def sample_completions(*, base_model_dir: Path, adapter_dir: Path | None, conversations: Sequence[list[dict]], max_tokens: int,
                       seed: int, device: str = "auto") -> list[Sample]:
    """One completion of each conversation at temperature 1, as the server samples them."""
    torch.manual_seed(seed)
    target = resolve_device(device)
    tokenizer = AutoTokenizer.from_pretrained(base_model_dir)
    model = load_base(base_model_dir)
    if adapter_dir is not None:
        model = PeftModel.from_pretrained(model, adapter_dir)
    model.to(target).eval()
    pad, end = pad_id_of(model), tokenizer.eos_token_id
    encoded = [list(tokenizer.apply_chat_template(messages, add_generation_prompt=True)["input_ids"]) for messages in conversations]
    out = []
    for start in range(0, len(encoded), GENERATE_BATCH):
        chunk = encoded[start : start + GENERATE_BATCH]
        width = max(map(len, chunk))
        input_ids = torch.tensor([[pad] * (width - len(ids)) + ids for ids in chunk], device=target)  # (B, T) left-padded
        attention = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids in chunk], device=target)  # (B, T)
        generated = model.generate(input_ids=input_ids, attention_mask=attention, do_sample=True, temperature=1.0, top_k=0,
                                   top_p=1.0, max_new_tokens=max_tokens, pad_token_id=pad, eos_token_id=end)
        completions = [row[: row.index(end) + 1] if end in row else row for row in generated[:, width:].tolist()]
        tokens = pad_tokens(list(zip(chunk, completions)), pad_id=pad).to(target)
        logprobs = tokens.gather(sequence_logprobs(model, tokens))
        for prompt_ids, completion, values in zip(chunk, completions, logprobs):
            out.append(Sample(tokenizer.decode([t for t in completion if t != end]), prompt_ids, completion, values))
    return out
