"""Checkpoints that resume a run exactly: adapter weights, optimizer state, RNG states, the
position in the data, the running totals of the report, and the config, in one file.

The file is written under a temporary name and renamed into place, so a crash mid-write leaves
the previous checkpoint whole. A checkpoint is resumed only by a run with the same fingerprint:
the same config, examples, base model directory and incumbent adapter.
"""

import hashlib
import json
import os
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from training.engine.config import TrainConfig
from training.engine.data import Example

CHECKPOINT_FILE = "checkpoint.pt"


@dataclass
class Totals:
    """Running sums behind the report; saved with the checkpoint so a resumed run reports the whole run."""

    step: int = 0  # optimizer steps done, also the position in the step schedule
    loss_sum: float = 0.0  # sum of the steps' losses
    kl_sum: float = 0.0  # sum over completion tokens of the KL estimate
    clipped_tokens: float = 0.0  # completion tokens whose gradient the clip removed
    completion_tokens: int = 0  # completion tokens trained on, over all epochs
    max_incumbent_kl: float = 0.0  # the largest step's mean KL(incumbent || policy)
    # Each step's figures, for the console's plot of the run: step number, loss, mean per-token KL, clip fraction.
    per_step: dict[str, list[float]] = field(default_factory=lambda: {"step": [], "loss": [], "kl": [], "clip_fraction": []})


def run_fingerprint(*, config: TrainConfig, examples: Sequence[Example], base_model_dir: Path, incumbent_adapter_dir: Path | None) -> str:
    """What must be equal for a checkpoint to be resumable. Base model directories are immutable
    (a new base gets a new directory), so their path names them; adapters are hashed."""
    digest = hashlib.sha256()
    digest.update(json.dumps(config.as_dict(), sort_keys=True).encode())
    digest.update(str(base_model_dir.resolve()).encode())
    if incumbent_adapter_dir is not None:
        for path in sorted(incumbent_adapter_dir.iterdir()):
            if path.is_file():
                digest.update(path.name.encode() + path.read_bytes())
    for e in examples:
        digest.update(json.dumps([e.prompt_ids, e.completion_ids, e.sampled_logprobs, e.reward, repr(e.group), e.behaviour_is_incumbent, e.replayed]).encode())
    return digest.hexdigest()


def trainable_parameters(model: torch.nn.Module) -> dict[str, torch.nn.Parameter]:
    return {name: p for name, p in model.named_parameters() if p.requires_grad}


def save_checkpoint(*, directory: Path, fingerprint: str, config: TrainConfig, totals: Totals, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
    state = {
        "fingerprint": fingerprint,
        "config": config.as_dict(),
        "totals": asdict(totals),
        "adapter": {name: p.detach().cpu().clone() for name, p in trainable_parameters(model).items()},
        "optimizer": optimizer.state_dict(),
        "rng": {
            "torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
            "python": random.getstate(),
        },
    }
    directory.mkdir(parents=True, exist_ok=True)
    staging = directory / f"{CHECKPOINT_FILE}.writing-{os.getpid()}"
    with open(staging, "wb") as file:
        torch.save(state, file)
        file.flush()
        os.fsync(file.fileno())
    os.replace(staging, directory / CHECKPOINT_FILE)


def resume_checkpoint(*, directory: Path, fingerprint: str, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> Totals | None:
    """Restore model, optimizer and RNG states from the directory's checkpoint and return its
    totals, or None (and touch nothing) when there is no checkpoint of this run there."""
    path = directory / CHECKPOINT_FILE
    if not path.exists():
        return None
    state = torch.load(path, map_location="cpu", weights_only=True)
    if state["fingerprint"] != fingerprint:
        return None
    parameters = trainable_parameters(model)
    if set(parameters) != set(state["adapter"]):
        raise ValueError(f"The checkpoint in {directory} holds other adapter weights than the model trains.")
    with torch.no_grad():
        for name, tensor in state["adapter"].items():
            parameters[name].copy_(tensor)
    optimizer.load_state_dict(state["optimizer"])
    torch.set_rng_state(state["rng"]["torch"])
    if state["rng"]["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["rng"]["cuda"])
    random.setstate(state["rng"]["python"])
    return Totals(**state["totals"])


def remove_checkpoint(directory: Path) -> None:
    (directory / CHECKPOINT_FILE).unlink(missing_ok=True)
