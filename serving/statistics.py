"""Confidence intervals for comparing a candidate adapter with the incumbent, in plain Python.

Gates and canaries decide on intervals, never on single numbers: a candidate is blocked or
rolled back only when the interval of its difference from the incumbent lies wholly on the
wrong side of the tolerated change.
"""

import math
import random
from collections.abc import Callable, Sequence

Z95 = 1.959964


def wilson_interval(successes: int, trials: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a rate: within [0, 1], and honest near 0 and 1."""
    if trials == 0:
        return 0.0, 1.0
    rate = successes / trials
    centre = (rate + z * z / (2 * trials)) / (1 + z * z / trials)
    half = z * math.sqrt(rate * (1 - rate) / trials + z * z / (4 * trials * trials)) / (1 + z * z / trials)
    return max(0.0, centre - half), min(1.0, centre + half)


def rate_difference_interval(a_successes: int, a_trials: int, b_successes: int, b_trials: int,
                             z: float = Z95) -> tuple[float, float]:
    """Newcombe's hybrid score interval of rate(a) - rate(b) for two independent samples
    (method 10 of Newcombe 1998): built from each rate's Wilson interval, it keeps its coverage
    for small samples and rates near 0, where the normal approximation fails."""
    if a_trials == 0 or b_trials == 0:
        return -1.0, 1.0
    p1, p2 = a_successes / a_trials, b_successes / b_trials
    l1, u1 = wilson_interval(a_successes, a_trials, z)
    l2, u2 = wilson_interval(b_successes, b_trials, z)
    low = p1 - p2 - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)
    high = p1 - p2 + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
    return max(-1.0, low), min(1.0, high)


def bootstrap_difference_interval(a: Sequence, b: Sequence, statistic: Callable[[Sequence], float], *,
                                  resamples: int = 2000, seed: int = 0, paired: bool = False,
                                  coverage: float = 0.95) -> tuple[float, float]:
    """The percentile-bootstrap interval (95 % by default) of statistic(a) - statistic(b).
    Paired: a[i] and b[i] are measurements of the same item, resampled together."""
    if not a or not b or (paired and len(a) != len(b)):
        raise ValueError("need two non-empty samples (of equal length when paired)")
    rng = random.Random(seed)
    differences = []
    for _ in range(resamples):
        if paired:
            picks = [rng.randrange(len(a)) for _ in a]
            differences.append(statistic([a[i] for i in picks]) - statistic([b[i] for i in picks]))
        else:
            differences.append(statistic(rng.choices(a, k=len(a))) - statistic(rng.choices(b, k=len(b))))
    differences.sort()
    tail = (1 - coverage) / 2
    return differences[int(tail * resamples)], differences[min(resamples - 1, int((1 - tail) * resamples))]


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def auc(labelled: Sequence[tuple[bool, float]]) -> float:
    """The probability that a good item scores above a bad one (ties count half): the
    Mann-Whitney statistic from ranks, O(n log n)."""
    ordered = sorted(labelled, key=lambda item: item[1])
    ranks, i = [0.0] * len(ordered), 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1][1] == ordered[i][1]:
            j += 1
        for k in range(i, j + 1):
            ranks[k] = (i + j) / 2 + 1
        i = j + 1
    good = sum(1 for label, _ in ordered if label)
    bad = len(ordered) - good
    if not good or not bad:
        return 0.5
    rank_sum = sum(rank for rank, (label, _) in zip(ranks, ordered, strict=True) if label)
    return (rank_sum - good * (good + 1) / 2) / (good * bad)
