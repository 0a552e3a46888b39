"""The LoRA update itself: torch and peft, no Django. The platform's training runs call `train`
with examples built from recorded interactions and their distilled rewards.

Each name loads its module on first use: every web process imports the training app (its models
and services) but never trains, and importing torch, peft and transformers up front made each
web worker take 6 s to start on an idle machine and 17 s on a busy one."""

import importlib

_MODULE_OF = {
    "ALL_PROJECTIONS": "config", "TrainConfig": "config",
    "Example": "data", "group_advantages": "data",
    "LossTerms": "objective", "policy_loss": "objective",
    "completion_logprobs": "policy", "use_cpu_threads": "policy",
    "Sample": "step", "adapter_at_step": "step", "sample_completions": "step",
    "CONFIG_FILE": "trainer", "TrainReport": "trainer", "train": "trainer",
}

__all__ = sorted(_MODULE_OF)


def __getattr__(name: str):
    if name not in _MODULE_OF:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_MODULE_OF[name]}"), name)
    globals()[name] = value  # found directly from now on
    return value
