"""Everything that determines a training run besides its data, in one dataclass.

The same object is stored in every checkpoint (a checkpoint of another config is not resumed)
and next to the adapter it produced (`train_config.json`).
"""

from dataclasses import asdict, dataclass, fields

# Every projection of a Llama block: attention and MLP.
ALL_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass(frozen=True)
class TrainConfig:
    # Optimization (why these values: docs/figures.md, "Offline measurements")
    # AdamW, constant: a cycle is a few dozen steps, too short for a schedule. 5e-4 learnt half
    # as much on what a canary round leaves on-policy; 2e-3 was erratic.
    learning_rate: float = 1e-3
    # Passes over the cycle's examples. Served data is what a cycle is short of, and the clip
    # keeps each pass near the incumbent: 4 learnt more than 2, 8 broke the tool-call syntax.
    epochs: int = 4
    batch_size: int = 16  # examples per optimizer step
    max_grad_norm: float = 1.0  # gradients are clipped to this global norm
    # Objective (see objective.policy_loss)
    # PPO's epsilon: the per-token ratio counts only within [1 - eps, 1 + eps]. A cycle is one policy
    # iteration, so eps bounds how far a token's probability moves per cycle; 0.8 learnt more than
    # 0.5 or 0.2 (docs/figures.md, "The clip"). Invalid tool calls drift up in some cycles at any
    # setting: the gates' business.
    clip_ratio: float = 0.8
    kl_coef: float = 0.02  # weight of KL(policy || base model): the anchor against collapse and reward hacking
    max_importance_weight: float = 2.0  # truncation of the importance weights of off-policy examples
    # A fresh below-baseline example's advantage is multiplied by this: pushing a sampled completion
    # down spreads its mass over the tail, where late cycles' token-salad tool calls come from; at
    # half, the worst invalid-call rate fell in nine of eleven persona-seeds (docs/figures.md).
    negative_advantage_scale: float = 0.5
    # Adapter: a fresh one only; an incumbent adapter keeps the shape it was saved with
    lora_rank: int = 8  # r
    lora_alpha: int = 16  # scale alpha / r
    lora_dropout: float = 0.0  # dropout on the adapter's input
    target_modules: tuple[str, ...] = ALL_PROJECTIONS  # the modules that get a LoRA
    # Run
    seed: int = 0  # seeds the fresh adapter, the data order and every other draw
    device: str = "auto"  # "auto" (CUDA when present, else CPU), "cpu", "cuda" or "cuda:<n>"
    checkpoint_every: int = 25  # optimizer steps between checkpoints, when train() is given a checkpoint dir

    def __post_init__(self) -> None:
        for name in ("epochs", "batch_size", "lora_rank", "checkpoint_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, not {getattr(self, name)}.")
        for name in ("learning_rate", "max_grad_norm", "max_importance_weight", "lora_alpha"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, not {getattr(self, name)}.")
        if not 0 < self.clip_ratio < 1:
            raise ValueError(f"clip_ratio must be between 0 and 1, not {self.clip_ratio}.")
        if self.kl_coef < 0 or self.negative_advantage_scale < 0 or not 0 <= self.lora_dropout < 1:
            raise ValueError("kl_coef and negative_advantage_scale must be non-negative and lora_dropout within [0, 1).")
        if self.device not in ("auto", "cpu") and not self.device.startswith("cuda"):
            raise ValueError(f"device must be 'auto', 'cpu' or 'cuda[:n]', not {self.device!r}.")

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> "TrainConfig":
        """The inverse of as_dict, also for a dict read back from JSON (tuples come back as lists)."""
        known = {f.name for f in fields(cls)}
        unknown = set(values) - known
        if unknown:
            raise ValueError(f"Unknown training settings: {sorted(unknown)}.")
        if "target_modules" in values:
            values = {**values, "target_modules": tuple(values["target_modules"])}
        return cls(**values)
