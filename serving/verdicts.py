"""Verdicts: a candidate's figure held against a reference's, passed or failed on the interval
of their difference. The gates and the canary decide this one way.

A check fails only when its interval lies wholly beyond the tolerated change: noise never
blocks a candidate, and a regression the sample cannot show is not claimed.
"""

from collections.abc import Sequence
from dataclasses import dataclass

from serving.statistics import bootstrap_difference_interval, mean, rate_difference_interval


@dataclass(frozen=True)
class Comparison:
    """A figure of the candidate and of the model it is held against, with the 95 % interval
    of candidate - reference and the candidate's sample size."""

    candidate: float
    reference: float
    interval: tuple[float, float]
    samples: int


def rate_comparison(candidate_hits: int, candidate_n: int, reference_hits: int, reference_n: int) -> Comparison:
    """Two rates with Newcombe's interval of their difference."""
    return Comparison(candidate_hits / max(candidate_n, 1), reference_hits / max(reference_n, 1),
                      rate_difference_interval(candidate_hits, candidate_n, reference_hits, reference_n), candidate_n)


def relative_mean_comparison(candidate: Sequence[float], reference: Sequence[float]) -> Comparison:
    """Two means, with the bootstrap interval of their difference relative to the reference's
    mean (a rise of 0.25 is a quarter more)."""
    low, high = bootstrap_difference_interval(candidate, reference, mean, resamples=1000)
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


def _check(gate: str, name: str, figures: Comparison, threshold: float, passed: bool, note: str, against: str) -> Check:
    return Check(gate, name, figures.candidate, figures.reference, figures.interval, threshold, passed, figures.samples,
                 note, against)
