"""The LoRA update of one cycle: setup -> train -> save -> cleanup, with a report of each stage."""

import json
import os
import random
import shutil
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import torch
from peft import PeftModel
from tqdm import tqdm

from training.engine.checkpoint import Totals, remove_checkpoint, resume_checkpoint, run_fingerprint, save_checkpoint, trainable_parameters
from training.engine.config import TrainConfig
from training.engine.data import Batch, Example, collate, group_advantages, pad_tokens, step_schedule
from training.engine.objective import LossTerms, policy_loss
from training.engine.policy import load_policy, pad_id_of, resolve_device, sequence_logprobs

CONFIG_FILE = "train_config.json"


@dataclass(frozen=True)
class TrainReport:
    finished: bool  # False when stopped by stop_after_steps: no adapter was saved
    adapter_dir: Path | None  # the saved adapter, when finished
    steps: int  # optimizer steps done by the whole run, resumed part included
    resumed_from_step: int  # 0 for a run that started afresh
    examples: int  # trained on: replayed examples that teach nothing are left out
    completion_tokens: int  # completion tokens trained on, over all epochs
    tokens_per_second: float  # prompt and completion tokens through forward and backward, per second of this process's training
    mean_loss: float  # mean of the steps' losses
    mean_kl: float  # mean per-token KL(policy || base) estimate while training
    clip_fraction: float  # share of completion tokens whose gradient the clip removed
    max_incumbent_kl: float  # the largest step's mean per-token KL(incumbent || policy), before its update
    per_step: dict[str, list[float]]  # step, loss, kl, clip_fraction: one value per optimizer step, in order
    seconds: dict[str, float]  # wall time of each stage: setup, train, save
    device: str


@dataclass
class _Run:
    """What setup prepares for the training loop."""

    config: TrainConfig
    device: torch.device
    policy: PeftModel
    optimizer: torch.optim.Optimizer
    examples: Sequence[Example]
    advantages: torch.Tensor  # (N,)
    proximal_logprobs: list[list[float]]  # per example, per completion token
    schedule: list[list[int]]  # example indices of each step
    fingerprint: str
    totals: Totals
    resumed_from_step: int
    trained_tokens: int = 0  # tokens forwarded by this process, for the throughput


@dataclass
class _Clock:
    seconds: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        started = time.monotonic()
        yield
        self.seconds[name] = round(time.monotonic() - started, 3)


def train(
    *,
    base_model_dir: Path,
    incumbent_adapter_dir: Path | None,
    examples: Sequence[Example],
    out_dir: Path,
    base_model_name: str,
    config: TrainConfig,
    checkpoint_dir: Path | None = None,
    progress: bool = True,
    stop_after_steps: int | None = None,
) -> TrainReport:
    """Train the incumbent adapter (or a fresh one) on the examples and save the result as a PEFT
    adapter directory at out_dir, whose config names base_model_name as its base, the name the
    adapter is served against.

    With a checkpoint_dir, a checkpoint is written every config.checkpoint_every steps, a
    checkpoint of the same run found there is resumed, and it is removed once the adapter is
    saved. On CPU a resumed run ends with the same weights, bit for bit, as an uninterrupted one.
    stop_after_steps ends the run after that many steps without saving an adapter, as a crash
    would (tests use it).

    out_dir appears whole or not at all: the adapter is written beside it and renamed into place.
    An existing out_dir is refused, since adapter versions are immutable.
    """
    if not examples:
        raise ValueError("No examples to train on.")
    if all(e.replayed for e in examples):
        raise ValueError("Only replayed examples: a run needs new ones to train on.")
    if out_dir.exists():
        raise FileExistsError(f"{out_dir} exists; adapter versions are never overwritten.")
    clock = _Clock()
    with clock.stage("setup"):
        run = _setup(base_model_dir=base_model_dir, incumbent_adapter_dir=incumbent_adapter_dir, examples=examples,
                     config=config, checkpoint_dir=checkpoint_dir)
    with clock.stage("train"):
        finished = _train(run, checkpoint_dir=checkpoint_dir, progress=progress, stop_after_steps=stop_after_steps)
    if not finished:
        return _report(run, clock, adapter_dir=None)
    with clock.stage("save"):
        _save(run, out_dir=out_dir, base_model_name=base_model_name)
    if checkpoint_dir is not None:
        remove_checkpoint(checkpoint_dir)
    return _report(run, clock, adapter_dir=out_dir)


def _setup(*, base_model_dir: Path, incumbent_adapter_dir: Path | None, examples: Sequence[Example], config: TrainConfig,
           checkpoint_dir: Path | None) -> _Run:
    _seed_everything(config.seed)
    device = resolve_device(config.device)
    policy = load_policy(base_model_dir=base_model_dir, incumbent_adapter_dir=incumbent_adapter_dir, config=config, device=device)
    # No weight decay: it would pull the adapter towards zero, a second anchor beside the KL term.
    optimizer = torch.optim.AdamW(trainable_parameters(policy).values(), lr=config.learning_rate, weight_decay=0.0)
    fingerprint = run_fingerprint(config=config, examples=examples, base_model_dir=base_model_dir, incumbent_adapter_dir=incumbent_adapter_dir)
    # Replayed examples that teach nothing (advantage 0) set their group's baseline, then leave.
    advantages = group_advantages(examples, negative_scale=config.negative_advantage_scale)  # (N,)
    kept = [i for i, e in enumerate(examples) if not e.replayed or advantages[i] > 0]
    examples, advantages = [examples[i] for i in kept], advantages[kept]
    # Computed before a checkpoint is restored: the proximal policy is the incumbent, not the resumed weights.
    proximal = _proximal_logprobs(policy, examples, config=config, device=device)
    totals = None
    if checkpoint_dir is not None:
        totals = resume_checkpoint(directory=checkpoint_dir, fingerprint=fingerprint, model=policy, optimizer=optimizer)
    totals = totals or Totals()
    return _Run(
        config=config, device=device, policy=policy, optimizer=optimizer, examples=examples,
        advantages=advantages, proximal_logprobs=proximal,
        schedule=step_schedule(len(examples), epochs=config.epochs, batch_size=config.batch_size, seed=config.seed),
        fingerprint=fingerprint, totals=totals, resumed_from_step=totals.step,
    )


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)  # CUDA generators too


@torch.no_grad()
def _proximal_logprobs(policy: PeftModel, examples: Sequence[Example], *, config: TrainConfig, device: torch.device) -> list[list[float]]:
    """The incumbent's logprobs: as recorded for on-policy examples, recomputed for the others."""
    proximal = [list(e.sampled_logprobs) for e in examples]
    stale = [i for i, e in enumerate(examples) if not e.behaviour_is_incumbent]
    policy.eval()
    for start in range(0, len(stale), config.batch_size):
        indices = stale[start : start + config.batch_size]
        tokens = pad_tokens([(examples[i].prompt_ids, examples[i].completion_ids) for i in indices], pad_id=pad_id_of(policy)).to(device)
        for i, values in zip(indices, tokens.gather(sequence_logprobs(policy, tokens))):
            proximal[i] = values
    return proximal


def _train(run: _Run, *, checkpoint_dir: Path | None, progress: bool, stop_after_steps: int | None) -> bool:
    """Run the remaining steps of the schedule; False when stopped before its end."""
    run.policy.train()
    bar = tqdm(total=len(run.schedule), initial=run.totals.step, desc="training", unit="step", disable=not progress)
    try:
        while run.totals.step < len(run.schedule):
            if stop_after_steps is not None and run.totals.step >= stop_after_steps:
                return False
            batch = _batch(run, run.schedule[run.totals.step])
            terms = _optimizer_step(run, batch)
            _count(run, batch, terms)
            bar.update(1)
            bar.set_postfix(loss=f"{terms.loss.item():.4f}", kl=f"{terms.kl.item():.4f}")
            if checkpoint_dir is not None and run.totals.step % run.config.checkpoint_every == 0:
                save_checkpoint(directory=checkpoint_dir, fingerprint=run.fingerprint, config=run.config, totals=run.totals,
                                model=run.policy, optimizer=run.optimizer)
    finally:
        bar.close()
        run.policy.eval()
    return True


def _batch(run: _Run, indices: list[int]) -> Batch:
    return collate([run.examples[i] for i in indices], advantages=run.advantages[indices],
                   proximal_logprobs=[run.proximal_logprobs[i] for i in indices], pad_id=pad_id_of(run.policy)).to(run.device)


def _optimizer_step(run: _Run, batch: Batch) -> LossTerms:
    with torch.no_grad(), run.policy.disable_adapter():
        base_logprobs = sequence_logprobs(run.policy, batch.tokens)  # (B, T - 1)
    new_logprobs = sequence_logprobs(run.policy, batch.tokens)  # (B, T - 1)
    terms = policy_loss(
        new_logprobs=new_logprobs, proximal_logprobs=batch.proximal_logprobs, behaviour_logprobs=batch.behaviour_logprobs,
        base_logprobs=base_logprobs, advantages=batch.advantages, mask=batch.tokens.completion_mask,
        clip_ratio=run.config.clip_ratio, kl_coef=run.config.kl_coef, max_importance_weight=run.config.max_importance_weight,
    )
    terms.loss.backward()
    torch.nn.utils.clip_grad_norm_(trainable_parameters(run.policy).values(), run.config.max_grad_norm)
    run.optimizer.step()
    run.optimizer.zero_grad(set_to_none=True)
    return terms


def _count(run: _Run, batch: Batch, terms: LossTerms) -> None:
    tokens = int(terms.tokens.item())
    run.totals.step += 1
    run.totals.loss_sum += terms.loss.item()
    run.totals.kl_sum += terms.kl.item() * tokens
    run.totals.clipped_tokens += terms.clip_fraction.item() * tokens
    run.totals.max_incumbent_kl = max(run.totals.max_incumbent_kl, terms.incumbent_kl.item())
    run.totals.completion_tokens += tokens
    for key, value in (("step", run.totals.step), ("loss", terms.loss.item()), ("kl", terms.kl.item()),
                       ("clip_fraction", terms.clip_fraction.item())):
        run.totals.per_step[key].append(round(value, 6))
    run.trained_tokens += int(batch.tokens.attention_mask.sum().item())


def _save(run: _Run, *, out_dir: Path, base_model_name: str) -> None:
    staging = out_dir.with_name(f".{out_dir.name}.saving-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    run.policy.peft_config["default"].base_model_name_or_path = base_model_name
    # Embeddings are never trained here; "auto" would look the served name up as a model to check.
    run.policy.save_pretrained(staging, save_embedding_layers=False)
    (staging / CONFIG_FILE).write_text(json.dumps(run.config.as_dict(), indent=2) + "\n")
    staging.rename(out_dir)


def _report(run: _Run, clock: _Clock, *, adapter_dir: Path | None) -> TrainReport:
    totals = run.totals
    trained_steps = totals.step - run.resumed_from_step
    return TrainReport(
        finished=adapter_dir is not None,
        adapter_dir=adapter_dir,
        steps=totals.step,
        resumed_from_step=run.resumed_from_step,
        examples=len(run.examples),
        completion_tokens=totals.completion_tokens,
        tokens_per_second=round(run.trained_tokens / clock.seconds["train"], 1) if trained_steps and clock.seconds["train"] else 0.0,
        mean_loss=totals.loss_sum / totals.step if totals.step else 0.0,
        mean_kl=totals.kl_sum / totals.completion_tokens if totals.completion_tokens else 0.0,
        clip_fraction=totals.clipped_tokens / totals.completion_tokens if totals.completion_tokens else 0.0,
        max_incumbent_kl=totals.max_incumbent_kl,
        per_step=totals.per_step,
        seconds=clock.seconds,
        device=str(run.device),
    )
