"""LoRA adapters for tests: real PEFT directories with random weights, so that serving can be
tested before training exists (and without waiting for it)."""

from pathlib import Path

import torch


def random_lora(base_model: Path, out_dir: Path, *, seed: int, base_name: str | None = None) -> Path:
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(base_model)
    config = LoraConfig(r=8, lora_alpha=16, init_lora_weights=False,  # random B too: the adapter changes outputs
                        target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
    peft_model = get_peft_model(model, config)
    if base_name is not None:
        peft_model.peft_config["default"].base_model_name_or_path = base_name
    peft_model.save_pretrained(out_dir)
    return out_dir
