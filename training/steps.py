"""The line search of a run's step, before the gates see its candidate.

A cycle's update can overshoot: it learnt the organization's style, and on prompts it never saw
it also broke the tool-call syntax. The gates would block that candidate and the cycle would be
lost. So the run samples the gates' global suite from its trained adapter (on the training
worker, with the engine: nothing is served or recorded) and, when the candidate writes more
invalid tool calls than the incumbent by more than the organization's gate tolerance, tries
half the step and then a quarter (training.engine.step.adapter_at_step), keeping the longest
step within it; when none is, the one with the fewest. The gates still judge whatever is kept,
on far more samples: this is a cheap first look, not a verdict.

Figures of how much it saves, and at what cost per run: docs/figures.md ("Offline measurements").
"""

from dataclasses import dataclass, field
from pathlib import Path

from training.engine.step import adapter_at_step, sample_completions

FRACTIONS = (1.0, 0.5, 0.25)  # of the trained update, longest first
INVALID = "invalid"


@dataclass(frozen=True)
class StepChoice:
    fraction: float
    adapter_dir: Path
    reference: float  # the incumbent's invalid-call rate on the suite
    trials: list[dict] = field(default_factory=list)  # each step tried: fraction, invalid_tool_call_rate

    def as_dict(self) -> dict:
        return {"fraction": self.fraction, "reference_invalid_tool_call_rate": self.reference, "trials": self.trials}


def step_choose(*, suite, base_model_dir: Path, incumbent_adapter_dir: Path | None, trained_adapter_dir: Path, work_dir: Path,
                tolerance: float, seed: int, device: str = "auto") -> StepChoice:
    """The longest step along the trained update whose invalid-call rate on the suite is within
    `tolerance` of the incumbent's (module docstring)."""
    def invalid_rate(adapter_dir: Path | None) -> float:
        return suite_invalid_rate(suite, base_model_dir=base_model_dir, adapter_dir=adapter_dir, seed=seed, device=device)

    reference = invalid_rate(incumbent_adapter_dir)
    trials = []
    for fraction in FRACTIONS:
        adapter_dir = trained_adapter_dir if fraction == 1.0 else adapter_at_step(
            incumbent_adapter_dir=incumbent_adapter_dir, trained_adapter_dir=trained_adapter_dir, fraction=fraction,
            out_dir=work_dir / f"step-{fraction}")
        trials.append({"fraction": fraction, "invalid_tool_call_rate": invalid_rate(adapter_dir), "adapter_dir": adapter_dir})
        if trials[-1]["invalid_tool_call_rate"] <= reference + tolerance:
            break
    within = trials[-1]["invalid_tool_call_rate"] <= reference + tolerance
    kept = trials[-1] if within else min(trials, key=lambda trial: trial["invalid_tool_call_rate"])
    shown = [{k: v for k, v in trial.items() if k != "adapter_dir"} for trial in trials]
    return StepChoice(kept["fraction"], kept["adapter_dir"], reference, shown)


def suite_invalid_rate(suite, *, base_model_dir: Path, adapter_dir: Path | None, seed: int, device: str = "auto") -> float:
    """The share of the suite's prompts the policy answers with an invalid tool call, one
    temperature-1 sample each."""
    samples = sample_completions(base_model_dir=base_model_dir, adapter_dir=adapter_dir,
                                 conversations=[item.messages for item in suite.items], max_tokens=suite.max_tokens, seed=seed,
                                 device=device)
    kinds = [suite.score(item, sample.text)["kind"] for item, sample in zip(suite.items, samples, strict=True)]
    return round(kinds.count(INVALID) / len(kinds), 4)
