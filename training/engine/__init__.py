"""The LoRA update itself: torch and peft, no Django. The platform's training runs call `train`
with examples built from recorded interactions and their distilled rewards."""

from training.engine.config import ALL_PROJECTIONS, TrainConfig
from training.engine.data import Example, group_advantages
from training.engine.objective import LossTerms, policy_loss
from training.engine.policy import completion_logprobs
from training.engine.step import Sample, adapter_at_step, sample_completions
from training.engine.trainer import CONFIG_FILE, TrainReport, train

__all__ = [
    "ALL_PROJECTIONS", "CONFIG_FILE", "Example", "LossTerms", "Sample", "TrainConfig", "TrainReport",
    "adapter_at_step", "completion_logprobs", "group_advantages", "policy_loss", "sample_completions", "train",
]
