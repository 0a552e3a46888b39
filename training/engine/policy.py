"""The policy: the base model in float32 with a LoRA adapter, and its per-token logprobs."""

from collections.abc import Sequence
from pathlib import Path

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import AutoModelForCausalLM

from training.engine.config import TrainConfig
from training.engine.data import TokenBatch, pad_tokens
from training.engine.objective import token_logprobs


def use_cpu_threads(threads: int) -> None:
    """Torch's intra-op threads on CPU, for this process."""
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


def resolve_device(device: str) -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def load_base(base_model_dir: Path) -> torch.nn.Module:
    # float32, as the base is served: the recorded logprobs and recomputed ones must agree.
    return AutoModelForCausalLM.from_pretrained(base_model_dir, dtype=torch.float32)


def load_policy(*, base_model_dir: Path, incumbent_adapter_dir: Path | None, config: TrainConfig, device: torch.device) -> PeftModel:
    """The base with a trainable adapter: the incumbent's weights when there is one, else a fresh
    LoRA whose B matrices are zero, so that training starts from the base model itself."""
    base = load_base(base_model_dir)
    if incumbent_adapter_dir is not None:
        policy = PeftModel.from_pretrained(base, incumbent_adapter_dir, is_trainable=True)
    else:
        lora = LoraConfig(r=config.lora_rank, lora_alpha=config.lora_alpha, lora_dropout=config.lora_dropout,
                          target_modules=list(config.target_modules), init_lora_weights=True)
        policy = get_peft_model(base, lora)
    return policy.to(device)


def pad_id_of(model: torch.nn.Module) -> int:
    # Padded positions are masked out everywhere, so any id would do; the model's own is clearest.
    return model.config.pad_token_id if model.config.pad_token_id is not None else 0


def sequence_logprobs(model: torch.nn.Module, tokens: TokenBatch) -> torch.Tensor:
    """Log-probability of each next token: (B, T - 1), position t scoring token t + 1."""
    logits = model(input_ids=tokens.input_ids, attention_mask=tokens.attention_mask).logits  # (B, T, V)
    return token_logprobs(logits[:, :-1].float(), tokens.input_ids[:, 1:])  # (B, T - 1)


@torch.no_grad()
def completion_logprobs(
    *,
    base_model_dir: Path,
    adapter_dir: Path | None,
    pairs: Sequence[tuple[Sequence[int], Sequence[int]]],
    batch_size: int = 16,
    device: str = "auto",
) -> list[list[float]]:
    """Per-token logprobs of each (prompt ids, completion ids) pair's completion under the base
    model with the adapter (or the base alone): how likely a policy finds given answers."""
    target = resolve_device(device)
    model = load_base(base_model_dir)
    if adapter_dir is not None:
        model = PeftModel.from_pretrained(model, adapter_dir)
    model.to(target).eval()
    pad_id = pad_id_of(model)
    scores: list[list[float]] = []
    for start in range(0, len(pairs), batch_size):
        tokens = pad_tokens(pairs[start : start + batch_size], pad_id=pad_id).to(target)
        scores += tokens.gather(sequence_logprobs(model, tokens))
    return scores
