"""The per-token objective: a clipped policy-gradient surrogate with truncated importance weights
for off-policy examples, and a KL anchor to the base model."""

from dataclasses import dataclass

import torch


def token_logprobs(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """log softmax(logits) at the target ids: (B, T, V), (B, T) -> (B, T)."""
    picked = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # (B, T)
    # Subtracting logsumexp gives log_softmax at the targets without keeping a (B, T, V) result.
    return picked - logits.logsumexp(dim=-1)  # (B, T)


@dataclass(frozen=True)
class LossTerms:
    loss: torch.Tensor  # scalar to call backward() on
    kl: torch.Tensor  # scalar, mean per-token KL(policy || base), detached
    clip_fraction: torch.Tensor  # scalar, share of tokens whose gradient the clip removed
    incumbent_kl: torch.Tensor  # scalar, mean per-token KL(incumbent || policy): how far this run has moved, detached
    tokens: torch.Tensor  # scalar, completion tokens the means are over


def policy_loss(
    *,
    new_logprobs: torch.Tensor,
    proximal_logprobs: torch.Tensor,
    behaviour_logprobs: torch.Tensor,
    base_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_ratio: float,
    kl_coef: float,
    max_importance_weight: float,
) -> LossTerms:
    """Mean over completion tokens of

        -w_t * min(r_t * A, clip(r_t, 1 - eps, 1 + eps) * A) + beta * k3_t

    with, per token t of a sequence with advantage A:
        r_t  = exp(new_t - proximal_t), the PPO ratio against the proximal policy;
        w_t  = min(c, exp(proximal_t - behaviour_t)), a truncated importance weight;
        k3_t = exp(base_t - new_t) - (base_t - new_t) - 1, an estimate of KL(policy || base)
               that is never negative (Schulman's k3).

    The proximal policy is the one the run starts from (the incumbent adapter). For an on-policy
    example it is the policy that sampled it, so its recorded logprobs serve and w_t = 1; for an
    example sampled by an older adapter, the incumbent's logprobs are recomputed once at the
    start of the run, the clip keeps the update near the incumbent, and w_t corrects for having
    sampled from the older one (the decoupled PPO objective). The weight is per token, not the
    product over the sequence: that product's variance grows exponentially with length, while a
    token weight truncated at c is bounded, at the cost of some bias (as in truncated importance
    sampling). Weights carry no gradient: both logprobs they come from are fixed.

    k3 as a loss pulls a token back towards the base exponentially hard once the policy has made
    it much less likely than the base did, and only linearly when it made it likelier: it guards
    what the base always writes (the tool-call syntax) while leaving room to prefer a style. The
    symmetric k2 = (new_t - base_t)^2 / 2, whose gradient is the reverse KL's own on-policy, and
    the exact KL let invalid tool calls rise further and k2 learnt less (docs/figures.md, "The KL
    anchor"). The price: a few such tokens make the reported mean KL spike.

    All per-token tensors are (B, T) with mask (B, T) bool; advantages is (B,).
    """
    advantage = advantages.unsqueeze(-1)  # (B, 1): shared by every token of its sequence
    ratio = torch.exp(new_logprobs - proximal_logprobs)  # (B, T)
    clipped = ratio.clamp(1 - clip_ratio, 1 + clip_ratio)  # (B, T)
    surrogate = torch.minimum(ratio * advantage, clipped * advantage)  # (B, T)
    weight = torch.exp(proximal_logprobs - behaviour_logprobs).clamp(max=max_importance_weight).detach()  # (B, T)
    base_log_ratio = base_logprobs - new_logprobs  # (B, T)
    kl = torch.exp(base_log_ratio) - base_log_ratio - 1  # (B, T)
    per_token = -weight * surrogate + kl_coef * kl  # (B, T)

    tokens = mask.sum().clamp(min=1)
    clipped_away = ((ratio > 1 + clip_ratio) & (advantage > 0)) | ((ratio < 1 - clip_ratio) & (advantage < 0))  # (B, T)
    return LossTerms(
        loss=per_token.masked_fill(~mask, 0).sum() / tokens,
        kl=kl.detach().masked_fill(~mask, 0).sum() / tokens,
        clip_fraction=(clipped_away & mask).sum() / tokens,
        # k3 again, of the ratio to the proximal policy (the incumbent, which sampled the on-policy
        # tokens): the approximate KL some PPO implementations stop an update on. Reported, not
        # acted on: measured, it does not foretell invalid tool calls (docs/figures.md, "The KL
        # anchor"). What breaks shows on fresh prompts, which is why the gates sample them.
        incumbent_kl=((ratio - 1) - (new_logprobs - proximal_logprobs)).detach().masked_fill(~mask, 0).sum() / tokens,
        tokens=mask.sum(),
    )
