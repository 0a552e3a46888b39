"""What training reads: examples, their advantages, their order and their padded batches."""

from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import torch

# Below this the rewards agree (up to float noise): scaling by it would only amplify the noise.
MIN_ADVANTAGE_STD = 1e-6


@dataclass(frozen=True)
class Example:
    """One served completion and the reward its feedback earned, with the tokens as served."""

    prompt_ids: list[int]  # the prompt as the server tokenized it, chat template applied
    completion_ids: list[int]  # the tokens the model wrote, end token included if it wrote one
    sampled_logprobs: list[float]  # log-probability of each completion token under the policy that sampled it
    reward: float  # distilled from feedback by the organization's reward spec
    group: Hashable  # examples that share a baseline: the same task or prompt family
    behaviour_is_incumbent: bool = True  # False when an older adapter version sampled it (off-policy)
    # Trained on by an earlier run already, here again: it only teaches what beat its baseline
    # (self-imitation), and counts in its group's baseline.
    replayed: bool = False

    def __post_init__(self) -> None:
        if not self.prompt_ids or not self.completion_ids:
            raise ValueError("An example needs at least one prompt token and one completion token.")
        if len(self.completion_ids) != len(self.sampled_logprobs):
            raise ValueError(f"{len(self.completion_ids)} completion tokens but {len(self.sampled_logprobs)} sampled logprobs.")


def group_advantages(examples: Sequence[Example], *, negative_scale: float = 1.0) -> torch.Tensor:
    """One advantage per example: its reward minus its group's mean reward, divided by the
    standard deviation of those differences over all the examples.

    The group mean is the baseline (as in GRPO), so a task that earns high rewards whatever the
    answer does not make its answers look good. One standard deviation for the whole batch, not
    one per group, keeps a group whose answers barely differ from being blown up to the scale of
    a group whose answers differ a lot. An example alone in its group has advantage 0: there is
    nothing to compare it with. When every difference is 0 (below MIN_ADVANTAGE_STD) all
    advantages are 0 and only the KL anchor acts.

    A replayed example's advantage is never below 0: an earlier run learnt from its failure
    already, while a success, rare at first, is worth learning from again (self-imitation
    learning's max(R - V, 0), Oh et al. 2018).

    A fresh example below its baseline is scaled by `negative_scale` (TrainConfig's
    negative_advantage_scale, see there).
    """
    rewards = torch.tensor([e.reward for e in examples], dtype=torch.float64)  # (N,)
    members: dict[Hashable, list[int]] = defaultdict(list)
    for index, example in enumerate(examples):
        members[example.group].append(index)
    centered = rewards.clone()
    for indices in members.values():
        centered[indices] -= rewards[indices].mean()
    std = centered.std(correction=0)
    if std >= MIN_ADVANTAGE_STD:
        centered /= std
    else:
        centered.zero_()
    replayed = torch.tensor([e.replayed for e in examples])  # (N,)
    centered = torch.where(centered < 0, centered * negative_scale, centered)
    return centered.masked_fill(replayed & (centered < 0), 0.0).float()


def step_schedule(count: int, *, epochs: int, batch_size: int, seed: int) -> list[list[int]]:
    """The example indices of every optimizer step, in order: a fresh shuffle per epoch, cut into
    batches (the last one of an epoch may be short). A step number is therefore a position in
    the data, which is what a checkpoint records."""
    generator = torch.Generator().manual_seed(seed)
    schedule = []
    for _ in range(epochs):
        order = torch.randperm(count, generator=generator).tolist()
        schedule += [order[start : start + batch_size] for start in range(0, count, batch_size)]
    return schedule


@dataclass(frozen=True)
class TokenBatch:
    """Prompt + completion sequences, right-padded. Position t of a (B, T - 1) tensor holds what
    is predicted there: token t + 1."""

    input_ids: torch.Tensor  # (B, T)
    attention_mask: torch.Tensor  # (B, T), 1 on real tokens
    completion_mask: torch.Tensor  # (B, T - 1) bool, True where the predicted token is a completion token

    def to(self, device: torch.device | str) -> "TokenBatch":
        return TokenBatch(self.input_ids.to(device), self.attention_mask.to(device), self.completion_mask.to(device))

    def spread(self, values: Sequence[Sequence[float]]) -> torch.Tensor:
        """Per-completion-token values (one list per row) laid out on the (B, T - 1) grid, 0 elsewhere."""
        grid = torch.zeros(self.completion_mask.shape, dtype=torch.float32)  # (B, T - 1)
        grid[self.completion_mask.cpu()] = torch.tensor([v for row in values for v in row], dtype=torch.float32)
        return grid.to(self.completion_mask.device)

    def gather(self, grid: torch.Tensor) -> list[list[float]]:
        """The inverse of spread: each row's values at its completion tokens."""
        return [row[mask].tolist() for row, mask in zip(grid.cpu(), self.completion_mask.cpu())]


def pad_tokens(pairs: Sequence[tuple[Sequence[int], Sequence[int]]], *, pad_id: int) -> TokenBatch:
    """Right-pad (prompt ids, completion ids) pairs into one batch."""
    width = max(len(prompt) + len(completion) for prompt, completion in pairs)
    input_ids = torch.full((len(pairs), width), pad_id, dtype=torch.long)  # (B, T)
    attention_mask = torch.zeros((len(pairs), width), dtype=torch.long)  # (B, T)
    completion_mask = torch.zeros((len(pairs), width - 1), dtype=torch.bool)  # (B, T - 1)
    for row, (prompt, completion) in enumerate(pairs):
        length = len(prompt) + len(completion)
        input_ids[row, :length] = torch.tensor([*prompt, *completion])
        attention_mask[row, :length] = 1
        # Position t predicts token t + 1, so the first completion token is predicted at len(prompt) - 1.
        completion_mask[row, len(prompt) - 1 : length - 1] = True
    return TokenBatch(input_ids, attention_mask, completion_mask)


@dataclass(frozen=True)
class Batch:
    """One optimizer step's examples, with what the objective needs besides the model."""

    tokens: TokenBatch
    behaviour_logprobs: torch.Tensor  # (B, T - 1) as sampled at serving time
    proximal_logprobs: torch.Tensor  # (B, T - 1) under the incumbent at the start of the run
    advantages: torch.Tensor  # (B,)

    def to(self, device: torch.device | str) -> "Batch":
        return Batch(self.tokens.to(device), self.behaviour_logprobs.to(device), self.proximal_logprobs.to(device), self.advantages.to(device))


def collate(examples: Sequence[Example], *, advantages: torch.Tensor, proximal_logprobs: Sequence[Sequence[float]], pad_id: int) -> Batch:
    tokens = pad_tokens([(e.prompt_ids, e.completion_ids) for e in examples], pad_id=pad_id)
    return Batch(
        tokens=tokens,
        behaviour_logprobs=tokens.spread([e.sampled_logprobs for e in examples]),
        proximal_logprobs=tokens.spread(proximal_logprobs),
        advantages=advantages,
    )
