"""Sequential decisions: look at the evidence as often as it changes, decide as soon as it
allows, and keep the error rates that a single look at a fixed sample would have.

Two designs, for two ways of looking:

- **Always valid** (the canary, judged on every tick for as long as it runs): the mixture
  sequential probability ratio test (mSPRT; Robbins 1970, Johari, Pekelis & Walsh 2017). For a
  difference whose estimate is about normal with variance V, mixing the alternatives with a
  normal of scale tau gives the likelihood ratio against "the difference is theta"

      Lambda = sqrt(V / (V + tau^2)) * exp(tau^2 (estimate - theta)^2 / (2 V (V + tau^2)))

  a martingale under the null, so P(Lambda ever reaches 1 / a) <= a however often it is
  looked at (Ville's inequality). The thetas it has not rejected form an interval, a
  confidence sequence, that holds at every look at once. A one-sided claim ("better than
  theta") at level alpha is the crossing on its side of a two-sided test at 2 alpha.
- **Group sequential** (the gates, which sample more of their suite at a few fixed looks): an
  ordinary interval at each of L planned looks, each at level alpha / L (Bonferroni), so the
  chance of any wrong claim over all the looks stays within alpha.
"""

import math
from dataclasses import dataclass
from statistics import NormalDist


@dataclass(frozen=True)
class Estimate:
    """A difference, candidate - reference, and the variance of that estimate."""

    value: float
    variance: float


@dataclass(frozen=True)
class Moments:
    """Count, mean and (population) variance of a sample, e.g. an arm's latencies; enough for a
    normal approximation of its mean, and cheap to keep for thousands of simulated canaries."""

    n: int = 0
    mean: float = 0.0
    variance: float = 0.0

    @classmethod
    def of(cls, values) -> "Moments":
        values = list(values)
        if not values:
            return cls()
        mean = sum(values) / len(values)
        return cls(len(values), mean, sum((v - mean) ** 2 for v in values) / len(values))


def rate_difference(candidate_hits: int, candidate_n: int, reference_hits: int, reference_n: int) -> Estimate:
    """rate(candidate) - rate(reference) with the variance of two independent binomial rates,
    each rate's variance from its count plus half a success in one more trial, so that 0 of n
    still has some: a rate of exactly 0 would claim certainty after any number of trials."""
    def variance(hits: int, n: int) -> float:
        smoothed = (hits + 0.5) / (n + 1)
        return smoothed * (1 - smoothed) / n

    return Estimate(candidate_hits / candidate_n - reference_hits / reference_n,
                    variance(candidate_hits, candidate_n) + variance(reference_hits, reference_n))


def relative_mean_difference(candidate: Moments, reference: Moments) -> Estimate:
    """mean(candidate) / mean(reference) - 1 (a rise of 0.25 is a quarter more), its variance by
    the delta method."""
    scale = max(reference.mean, 1e-9)
    ratio = candidate.mean / scale
    variance = (candidate.variance / candidate.n + ratio**2 * reference.variance / reference.n) / scale**2
    return Estimate(ratio - 1, variance)


# Always valid: the mSPRT


def log_likelihood_ratio(estimate: Estimate, *, null: float, tau: float) -> float:
    """log Lambda of the mixture test of "the difference is `null`" (module docstring)."""
    v, t2 = max(estimate.variance, 1e-12), tau * tau
    return 0.5 * math.log(v / (v + t2)) + t2 * (estimate.value - null) ** 2 / (2 * v * (v + t2))


def confidence_sequence(estimate: Estimate, *, alpha: float, tau: float) -> tuple[float, float]:
    """The differences the mixture test at level alpha has not rejected: an interval that
    contains the truth at every look at once with probability at least 1 - alpha."""
    v, t2 = max(estimate.variance, 1e-12), tau * tau
    radius = math.sqrt(2 * v * (v + t2) / t2 * (math.log(1 / alpha) + 0.5 * math.log((v + t2) / v)))
    return estimate.value - radius, estimate.value + radius


@dataclass(frozen=True)
class Claim:
    """One side of a sequential test: "the difference is above `null`" (direction +1) or below
    it (-1), claimed once the mixture test rejects `null` on that side at level `alpha`."""

    name: str  # what is claimed when it is reached: "better", "non_inferior", "inferior", ...
    null: float
    direction: int  # +1: above the null; -1: below it
    alpha: float  # one-sided

    def test(self, estimate: Estimate, *, tau: float) -> dict:
        """The claim's state for a report: its statistic, the boundary and whether it was reached."""
        statistic = log_likelihood_ratio(estimate, null=self.null, tau=tau)
        boundary = math.log(1 / (2 * self.alpha))  # the one-sided side of a two-sided test at 2 alpha
        on_its_side = (estimate.value - self.null) * self.direction > 0
        return {"claim": self.name, "null": self.null, "direction": self.direction, "alpha": self.alpha,
                "log_likelihood_ratio": round(statistic, 4), "boundary": round(boundary, 4), "on_its_side": on_its_side,
                "reached": on_its_side and statistic >= boundary}


# Group sequential: Bonferroni over planned looks


def look_z(*, alpha: float, looks: int) -> float:
    """The normal quantile of the interval at each of `looks` planned looks: each of its ends
    is a one-sided claim at level alpha / looks, so over every look the chance that an end
    wrongly excludes the truth stays within alpha on each side."""
    return NormalDist().inv_cdf(1 - alpha / looks)
