"""LoRA adapters for tests: real PEFT directories, with random weights, so that serving can be
tested without waiting for training, or taught one response by supervised fine-tuning, so that
the gates can be tested on what a planted adapter really writes."""

from pathlib import Path

import torch

from training.engine.config import ALL_PROJECTIONS as PROJECTIONS


def random_lora(base_model: Path, out_dir: Path, *, seed: int, base_name: str | None = None) -> Path:
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(base_model)
    config = LoraConfig(r=8, lora_alpha=16, init_lora_weights=False,  # random B too: the adapter changes outputs
                        target_modules=PROJECTIONS)
    peft_model = get_peft_model(model, config)
    if base_name is not None:
        peft_model.peft_config["default"].base_model_name_or_path = base_name
    peft_model.save_pretrained(out_dir)
    return out_dir


LEARNT = 0.005  # mean cross-entropy per response token: the response is every token's argmax by far


def taught_lora(base_model: Path, out_dir: Path, *, messages: list[dict], response: str, base_name: str,
                max_steps: int = 1500, seed: int = 0) -> Path:
    """An adapter fine-tuned until `messages` are answered with `response` at temperature 1,
    nearly always (cross-entropy on the response and its end token, as the base model learnt).
    It trains until the loss is below LEARNT, not for a fixed number of steps: 300 steps left
    one of two responses a token short of learnt on one machine and not on another."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(base_model)
    prompt = list(tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=True)["input_ids"])
    completion = tokenizer(response, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    input_ids = torch.tensor([prompt + completion])
    labels = torch.tensor([[-100] * len(prompt) + completion])  # -100: no loss on the prompt
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(base_model), LoraConfig(r=8, lora_alpha=16, target_modules=PROJECTIONS))
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    for _ in range(max_steps):
        optimizer.zero_grad()
        loss = model(input_ids=input_ids, labels=labels).loss
        if loss.item() < LEARNT:
            break
        loss.backward()
        optimizer.step()
    model.peft_config["default"].base_model_name_or_path = base_name
    model.save_pretrained(out_dir)
    return out_dir
