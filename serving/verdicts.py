"""Verdicts: a candidate's figure held against a reference's, passed or failed on the interval
of their difference, two ways:

- a *detector* (`no_regression`, `no_rise`) fails only when its interval lies wholly beyond the
  tolerated change: a harm the sample cannot show is not claimed;
- a *guardrail* (`within`) turns the burden round: it passes only when its interval lies wholly
  within the tolerated change (non-inferiority), so a small sample proves nothing safe. Until
  the interval settles either way its state is "undecided", and the gates sample more.
"""

from collections.abc import Sequence
from dataclasses import dataclass, replace
from statistics import NormalDist

from serving.statistics import Z95, bootstrap_difference_interval, mean, rate_difference_interval

WITHIN, BEYOND, UNDECIDED = "within", "beyond", "undecided"  # a guardrail's interval against its tolerance
NOTHING_TO_JUDGE = "nothing to judge"  # a guardrail over a sample that one of the models left empty


@dataclass(frozen=True)
class Comparison:
    """A figure of the candidate and of the model it is held against, with the 95 % interval
    of candidate - reference and the candidate's sample size."""

    candidate: float
    reference: float
    interval: tuple[float, float]
    samples: int


def rate_comparison(candidate_hits: int, candidate_n: int, reference_hits: int, reference_n: int, z: float = Z95) -> Comparison:
    """Two rates with Newcombe's interval of their difference (95 %, or as wide as z says)."""
    return Comparison(candidate_hits / max(candidate_n, 1), reference_hits / max(reference_n, 1),
                      rate_difference_interval(candidate_hits, candidate_n, reference_hits, reference_n, z), candidate_n)


def relative_mean_comparison(candidate: Sequence[float], reference: Sequence[float], z: float = Z95) -> Comparison:
    """Two means, with the bootstrap interval of their difference relative to the reference's
    mean (a rise of 0.25 is a quarter more); 95 %, or the coverage of a normal interval of z."""
    coverage = 2 * NormalDist().cdf(z) - 1
    low, high = bootstrap_difference_interval(candidate, reference, mean, resamples=1000, coverage=coverage)
    scale = max(mean(reference), 1.0)
    return Comparison(mean(candidate), mean(reference), (low / scale, high / scale), len(candidate))


@dataclass(frozen=True)
class Check:
    gate: str  # "tenant_suite", "global_suite", "hacking" or "canary"
    name: str
    candidate: float
    reference: float  # the figure of the model the candidate is held against
    interval: tuple[float, float]  # 95 % interval of candidate - reference
    threshold: float
    passed: bool
    samples: int
    note: str = ""
    against: str = "incumbent"  # the reference: "incumbent" or "base"
    sequential: dict | None = None  # a sequential decision's state: samples, each claim's statistic and boundary

    @property
    def label(self) -> str:
        return self.name if self.against == "incumbent" else f"{self.name} vs. {self.against}"


def no_regression(gate: str, name: str, figures: Comparison, threshold: float, note: str = "") -> Check:
    """Higher is better: fails when even the interval's best case loses more than the threshold."""
    return _check(gate, name, figures, threshold, figures.interval[1] >= -threshold, note, "incumbent")


def no_rise(gate: str, name: str, figures: Comparison, threshold: float, note: str = "", against: str = "incumbent") -> Check:
    """Lower is better (a hacking detector, say): fails when even the interval's best case rises
    more than the threshold."""
    return _check(gate, name, figures, threshold, figures.interval[0] <= threshold, note, against)


def within(gate: str, name: str, figures: Comparison, threshold: float, *, lower_is_better: bool, note: str = "",
           against: str = "incumbent", empty: bool = False) -> Check:
    """A guardrail: passes only when the whole interval lies within the tolerated change (a
    rise below +threshold, or a drop above -threshold). Its state is in `sequential["state"]`:
    within, beyond (the whole interval past the threshold) or undecided. `empty`: a model gave
    this figure nothing to count (no edits to judge for correctness, say), so it passes and
    other guardrails judge what the model did instead."""
    low, high = figures.interval
    if empty:
        return replace(_check(gate, name, figures, threshold, True, note, against), sequential={"state": NOTHING_TO_JUDGE})
    if lower_is_better:
        state = WITHIN if high <= threshold else BEYOND if low > threshold else UNDECIDED
    else:
        state = WITHIN if low >= -threshold else BEYOND if high < -threshold else UNDECIDED
    check = _check(gate, name, figures, threshold, state == WITHIN, note, against)
    return replace(check, sequential={"state": state})


def _check(gate: str, name: str, figures: Comparison, threshold: float, passed: bool, note: str, against: str) -> Check:
    return Check(gate, name, figures.candidate, figures.reference, figures.interval, threshold, passed, figures.samples,
                 note, against)
