"""Train the base model: corpus -> tokenizer -> a small Llama (or Qwen2), loss on the response only.

Deterministic for a config on a given machine: every random draw comes from the config's seed.
Runs on CUDA when present, else on every CPU core.
"""

import hashlib
import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from tqdm import tqdm
from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

from demo.base_model.config import RECIPE_VERSION, BaseModelConfig
from demo.base_model.corpus import Example, build_corpus
from demo.base_model.tokenizer import train_tokenizer

IGNORE = -100  # label of prompt and padding positions: no loss there


@dataclass(frozen=True)
class BuildReport:
    fingerprint: str
    parameters: int
    tokenizer_sha256: str
    weights_sha256: str
    seconds: float
    final_loss: float
    device: str


def build_base_model(config: BaseModelConfig, out_dir: Path, *, progress: bool = True) -> BuildReport:
    started = time.monotonic()
    torch.manual_seed(config.seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"

    corpus = build_corpus(config)
    tokenizer = train_tokenizer([e.prompt + "\n" + e.response for e in corpus], config.vocab_size, config.max_positions)
    sequences = [encode(tokenizer, example) for example in corpus]
    model = build_model(config, tokenizer).to(device)

    final_loss = train(model, sequences, config, tokenizer.pad_token_id, device, progress)

    out_dir.mkdir(parents=True, exist_ok=True)
    model.to("cpu").save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)
    GenerationConfig(bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                     pad_token_id=tokenizer.pad_token_id).save_pretrained(out_dir)
    report = BuildReport(
        fingerprint=config.fingerprint(),
        parameters=sum(p.numel() for p in model.parameters()),
        tokenizer_sha256=_sha256(out_dir / "tokenizer.json"),
        weights_sha256=_sha256(out_dir / "model.safetensors"),
        seconds=round(time.monotonic() - started, 1),
        final_loss=round(final_loss, 4),
        device=device,
    )
    (out_dir / "build.json").write_text(json.dumps({"recipe": RECIPE_VERSION, "config": asdict(config), "report": asdict(report)}, indent=2))
    return report


def build_model(config: BaseModelConfig, tokenizer: PreTrainedTokenizerFast):
    if config.architecture == "qwen2":
        return Qwen2ForCausalLM(Qwen2Config(**model_settings(config, tokenizer)))
    return LlamaForCausalLM(LlamaConfig(**model_settings(config, tokenizer)))


def model_settings(config: BaseModelConfig, tokenizer: PreTrainedTokenizerFast) -> dict:
    """What a Llama and a Qwen2 config share (a Qwen2's q/k/v projections have biases of its own)."""
    return dict(
        vocab_size=len(tokenizer),
        hidden_size=config.hidden,
        intermediate_size=config.intermediate,
        num_hidden_layers=config.layers,
        num_attention_heads=config.heads,
        num_key_value_heads=config.heads,
        max_position_embeddings=config.max_positions,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        # Served in float32 too (vLLM's "auto" would pick bfloat16), so that the logprobs vLLM
        # records and the ones training recomputes come from the same numbers.
        dtype="float32",
    )


def encode(tokenizer: PreTrainedTokenizerFast, example: Example) -> tuple[list[int], int]:
    """Token ids of prompt + response + end, and where the response starts.

    The prompt goes through the chat template exactly as the server renders it, and is
    tokenized apart from the response, as it is when the server generates.
    """
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": example.prompt}], add_generation_prompt=True, tokenize=False)
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    response_ids = tokenizer(example.response, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    return prompt_ids + response_ids, len(prompt_ids)


def train(model, sequences: list[tuple[list[int], int]], config: BaseModelConfig, pad_id: int, device: str, progress: bool) -> float:
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.learning_rate, betas=(0.9, 0.95), weight_decay=config.weight_decay)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: _lr_factor(step, config))
    order = torch.Generator().manual_seed(config.seed)
    loss_value = float("nan")
    bar = tqdm(range(config.steps), desc="base model", unit="step", disable=not progress)
    for _ in bar:
        picks = torch.randint(len(sequences), (config.batch_size,), generator=order).tolist()
        input_ids, attention_mask, labels = _batch([sequences[i] for i in picks], pad_id, device)
        loss = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
        loss_value = loss.item()
        bar.set_postfix(loss=f"{loss_value:.3f}")
    model.eval()
    return loss_value


def _batch(sequences: list[tuple[list[int], int]], pad_id: int, device: str):
    width = max(len(ids) for ids, _ in sequences)
    input_ids = torch.full((len(sequences), width), pad_id)  # (B, T)
    attention_mask = torch.zeros((len(sequences), width), dtype=torch.long)
    labels = torch.full((len(sequences), width), IGNORE)
    for row, (ids, response_start) in enumerate(sequences):
        input_ids[row, : len(ids)] = torch.tensor(ids)
        attention_mask[row, : len(ids)] = 1
        labels[row, response_start : len(ids)] = torch.tensor(ids[response_start:])
    return input_ids.to(device), attention_mask.to(device), labels.to(device)


def _lr_factor(step: int, config: BaseModelConfig) -> float:
    """Linear warm-up, then cosine decay to a tenth of the peak."""
    if step < config.warmup_steps:
        return (step + 1) / config.warmup_steps
    progress = (step - config.warmup_steps) / max(1, config.steps - config.warmup_steps)
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()

