"""What a run of the traffic driver measured for one organization, and its summary table."""

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from demo.personas import EVENT_TYPES


@dataclass(frozen=True)
class OrgTraffic:
    org: str
    persona: str
    served: int  # gateway calls answered
    requests: int  # of those, the ones outside background tasks: their users react to each
    by_model: Mapping[str, int]  # served, by the adapter version (or base model) that answered
    events: Mapping[str, int]  # feedback events the platform stored, by type (task_outcome included)
    failures: Mapping[str, int]  # by "<what> <status>": chat calls, task openings, events not stored
    latencies_ms: Sequence[float]  # of each answered call, the client's retries included
    tasks: int  # background tasks opened
    task_outcomes: Sequence[float]  # the outcomes the platform stored
    # Requests on clear prompts, and those whose edit persisted, as the users reacted (a delivery
    # that failed shows under failures). An ambiguous prompt's right answer is an ask, so no edit
    # persists there: with one prompt in five ambiguous, the rate per request stays under ~0.8.
    clear_requests: int = 0
    persisted_on_clear: int = 0

    @property
    def edit_persisted_rate(self) -> float:
        return self.per_request("edit_persisted")

    @property
    def edit_persisted_on_clear_rate(self) -> float:
        return self.persisted_on_clear / self.clear_requests if self.clear_requests else 0.0

    @property
    def dissatisfied_rate(self) -> float:
        return self.per_request("dissatisfied_followup")

    @property
    def latency_p50_ms(self) -> float | None:
        return percentile(self.latencies_ms, 0.50)

    @property
    def latency_p95_ms(self) -> float | None:
        return percentile(self.latencies_ms, 0.95)

    @property
    def task_outcome_mean(self) -> float | None:
        return sum(self.task_outcomes) / len(self.task_outcomes) if self.task_outcomes else None

    @property
    def task_successes(self) -> int:
        return sum(outcome == 1.0 for outcome in self.task_outcomes)

    def per_request(self, event_type: str) -> float:
        """Feedback events of the type per answered request: a background task's steps get none
        of their own, so they would only dilute the rate."""
        return self.events.get(event_type, 0) / self.requests if self.requests else 0.0


def percentile(values: Sequence[float], q: float) -> float | None:
    """The nearest-rank percentile (q from 0 to 1); None when there are no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def format_summary(traffic: OrgTraffic) -> str:
    """A plain-text table of one organization's run, labels left and figures right-aligned."""
    rows = [("served", str(traffic.served))]
    rows += [(f"  by {model}", str(count)) for model, count in sorted(traffic.by_model.items())]
    rows += [("feedback stored", str(sum(traffic.events.values())))]
    rows += [(f"  {kind}", str(traffic.events[kind])) for kind in EVENT_TYPES if traffic.events.get(kind)]
    rows += [
        ("edit persisted rate", f"{traffic.edit_persisted_rate:.3f}"),
        ("  on clear prompts", f"{traffic.edit_persisted_on_clear_rate:.3f}"),
        ("dissatisfied followup rate", f"{traffic.dissatisfied_rate:.3f}"),
        ("latency p50 (ms)", _figure(traffic.latency_p50_ms, ".0f")),
        ("latency p95 (ms)", _figure(traffic.latency_p95_ms, ".0f")),
        ("background tasks", str(traffic.tasks)),
        ("  outcomes stored", str(len(traffic.task_outcomes))),
        ("  outcome mean", _figure(traffic.task_outcome_mean, ".3f")),
        ("failures", str(sum(traffic.failures.values()))),
    ]
    rows += [(f"  {what}", str(count)) for what, count in sorted(traffic.failures.items())]
    label_width = max(len(label) for label, _ in rows)
    value_width = max(len(value) for _, value in rows)
    lines = [f"{label:<{label_width}}  {value:>{value_width}}" for label, value in rows]
    return "\n".join([f"{traffic.org} (persona {traffic.persona})", *lines])


def _figure(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def wilson_interval(successes: int, trials: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a rate (95 % by default): unlike the normal approximation it
    stays within [0, 1] and is honest for rates near 0 and for small samples. The platform has
    its own (serving.statistics); the demo is its customer and computes its figures itself."""
    if trials == 0:
        return 0.0, 1.0
    rate = successes / trials
    centre = (rate + z * z / (2 * trials)) / (1 + z * z / trials)
    half = z * math.sqrt(rate * (1 - rate) / trials + z * z / (4 * trials * trials)) / (1 + z * z / trials)
    return max(0.0, centre - half), min(1.0, centre + half)


def rate_difference(a_successes: int, a_trials: int, b_successes: int, b_trials: int, z: float = 1.96) -> tuple[float, float]:
    """Newcombe's interval of rate(a) - rate(b) from the two Wilson intervals (95 % by default)."""
    if not a_trials or not b_trials:
        return -1.0, 1.0
    p1, p2 = a_successes / a_trials, b_successes / b_trials
    (l1, u1), (l2, u2) = wilson_interval(a_successes, a_trials, z), wilson_interval(b_successes, b_trials, z)
    return p1 - p2 - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2), p1 - p2 + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)


def latency_difference(a: Sequence[float], b: Sequence[float], resamples: int = 1000, seed: int = 0) -> tuple[float, tuple[float, float]]:
    """mean(a) - mean(b) and its 95 % percentile-bootstrap interval."""
    if not a or not b:
        return 0.0, (0.0, 0.0)
    rng = random.Random(seed)
    mean = lambda values: sum(values) / len(values)  # noqa: E731
    draws = sorted(mean(rng.choices(a, k=len(a))) - mean(rng.choices(b, k=len(b))) for _ in range(resamples))
    return mean(a) - mean(b), (draws[int(0.025 * resamples)], draws[int(0.975 * resamples) - 1])


def format_rate(successes: int, trials: int) -> str:
    """A rate with its 95 % Wilson interval: 0.152 [0.121, 0.191]."""
    low, high = wilson_interval(successes, trials)
    return f"{successes / trials if trials else 0:.3f} [{low:.3f}, {high:.3f}]"
