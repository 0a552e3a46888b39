"""The line search of a run's step, before the gates see its candidate.

A cycle's update can overshoot: it learnt the organization's style, and on prompts it never saw
it also broke the tool-call syntax. The gates would block that candidate and the cycle would be
lost. So the run samples the gates' global suite from its trained adapter (on the training
worker, with the engine: nothing is served or recorded) and, when that one pass shows the
candidate writing more invalid tool calls than the incumbent by more than the organization's
gate tolerance (the whole 95 % interval of the rise beyond it, as the gates would block it at
their first look), tries half the step and then a quarter (training.engine.step.adapter_at_step),
keeping the longest step not shown beyond; when every one is, the one with the fewest invalid
calls. A rise one pass cannot show is left to the gates, which sample far more: shortening on a
noisy single pass cost more learning than it saved (docs/figures.md).

Figures of how much it saves, and at what cost per run: docs/figures.md ("Offline measurements").
"""

from dataclasses import dataclass, field
from pathlib import Path

from serving.statistics import rate_difference_interval
from training import engine

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
    """The longest step along the trained update that one pass of the suite does not show
    beyond `tolerance` of the incumbent's invalid-call rate (module docstring)."""
    def invalid(adapter_dir: Path | None) -> tuple[int, int]:
        return suite_invalid_calls(suite, base_model_dir=base_model_dir, adapter_dir=adapter_dir, seed=seed, device=device)

    reference = invalid(incumbent_adapter_dir)
    trials = []
    for fraction in FRACTIONS:
        adapter_dir = trained_adapter_dir if fraction == 1.0 else engine.adapter_at_step(
            incumbent_adapter_dir=incumbent_adapter_dir, trained_adapter_dir=trained_adapter_dir, fraction=fraction,
            out_dir=work_dir / f"step-{fraction}")
        calls = invalid(adapter_dir)
        beyond = rate_difference_interval(*calls, *reference)[0] > tolerance
        trials.append({"fraction": fraction, "invalid_tool_call_rate": round(calls[0] / calls[1], 4), "shown_beyond": beyond,
                       "adapter_dir": adapter_dir})
        if not beyond:
            break
    kept = trials[-1] if not trials[-1]["shown_beyond"] else min(trials, key=lambda trial: trial["invalid_tool_call_rate"])
    shown = [{k: v for k, v in trial.items() if k != "adapter_dir"} for trial in trials]
    return StepChoice(kept["fraction"], kept["adapter_dir"], round(reference[0] / reference[1], 4), shown)


def suite_invalid_calls(suite, *, base_model_dir: Path, adapter_dir: Path | None, seed: int, device: str = "auto") -> tuple[int, int]:
    """(invalid tool calls, responses): one temperature-1 sample of each of the suite's prompts."""
    samples = engine.sample_completions(base_model_dir=base_model_dir, adapter_dir=adapter_dir,
                                 conversations=[item.messages for item in suite.items], max_tokens=suite.max_tokens, seed=seed,
                                 device=device)
    kinds = [suite.score(item, sample.text)["kind"] for item, sample in zip(suite.items, samples, strict=True)]
    return kinds.count(INVALID), len(kinds)
