"""The canary's decision rule, on the arms' counts: Django-free, so that thousands of canaries
can be simulated with it (benchmarks/canary_sequential.py). serving.canary gathers the arms.

The decision uses the always-valid mixture test of serving.sequential, so it may be taken on
whichever tick the evidence allows, with error rates that hold however long the canary runs and
however often it is judged:

- **promote** when the candidate is shown better on the primary metric, the edit-persisted
  rate (its confidence sequence wholly above 0, at level `alpha`), and non-inferior on each
  guardrail by the organization's margin: the edit-persisted rate's drop, the dissatisfied
  rate's rise and latency's relative rise are each shown below their margin;
- **roll back** when it is shown worse: a guardrail wholly beyond its margin, or invalid tool
  calls shown to rise beyond theirs (each of the four at alpha / 4, so that together they stay
  within alpha). Invalid calls are a detector here, not a guardrail: the gates have already
  shown them within the tolerance on the global suite, and the canary watches for the rise that
  the suite did not show on this organization's own traffic. A promotion does not wait for it to
  be shown within its margin, only while the rise it measures is beyond it;
- otherwise **wait**, until the canary has run `max_hours`: then it stops ("expired") and the
  incumbent keeps serving. Nor is anything decided before each arm has `min_interactions`
  settled outcomes, below which the normal approximation of a rate is not to be trusted.

A candidate that replaces a version erasure tainted, under the privacy policy's `retrain`
(`repairing`), need not be better: the incumbent must go, and a retrain from an older version
is rarely better than what it replaces. Its primary metric asks non-inferiority by the margin
instead, like the guardrails.

An A/A canary (the candidate no better) is therefore promoted with probability at most alpha
and rolled back with probability at most alpha (benchmarks/canary_sequential.py simulates
thousands; docs/figures.md has the rates and the time to a decision).
"""

from dataclasses import asdict, dataclass

from serving.policies import CanaryPolicy
from serving.sequential import Claim, Estimate, Moments, confidence_sequence, rate_difference, relative_mean_difference
from serving.verdicts import Check

WAIT, PROMOTE, ROLL_BACK = "wait", "promote", "roll_back"
# The mixture's scale: the size of difference each test is most sensitive to. Rates move by
# points to tens of points between adapter versions; latency by a tenth or two of its mean.
RATE_TAU, LATENCY_TAU = 0.1, 0.2
# where a difference can lie at all: the normal confidence sequence knows nothing of it
RATE_BOUNDS, RELATIVE_MEAN_BOUNDS = (-1.0, 1.0), (-1.0, float("inf"))


@dataclass(frozen=True)
class Arm:
    interactions: int  # served, with a known outcome
    persisted: int
    dissatisfied: int
    latency: Moments  # of the latencies in ms of those that have one
    served: int  # every completion served, settled or not: what invalid tool calls are a rate of
    invalid: int  # invalid tool calls, as the callers reported them (at once, so of every one served)


@dataclass(frozen=True)
class CanaryReport:
    decision: str  # wait, promote or roll_back
    min_interactions: int  # what each arm needs before a verdict
    expired: bool  # stopped at max_hours without a verdict: rolled back, the incumbent keeps serving
    checks: list[Check]  # each with its sequential test's state
    candidate: Arm
    incumbent: Arm
    alpha: float  # the error rate each decision keeps

    def as_dict(self) -> dict:
        report = asdict(self)
        for arm in ("candidate", "incumbent"):
            latency = report[arm].pop("latency")
            report[arm]["latency_mean_ms"] = round(latency["mean"], 1)
        return report


def canary_decide(candidate: Arm, incumbent: Arm, *, policy: CanaryPolicy, out_of_time: bool,
                  repairing: bool = False) -> CanaryReport:
    """The sequential decision on the arms as they stand (module docstring): pure, so that it
    can be simulated on thousands of canaries."""
    checks = _checks(candidate, incumbent, policy, repairing) if candidate.interactions and incumbent.interactions else []
    short = min(candidate.interactions, incumbent.interactions) < policy.min_interactions
    shown_worse = any(not check.passed for check in checks)
    if not short and shown_worse:
        decision, expired = ROLL_BACK, False
    elif not short and checks and all(_promotable(check) for check in checks):
        decision, expired = PROMOTE, False
    elif out_of_time:
        decision, expired = ROLL_BACK, True
    else:
        decision, expired = WAIT, False
    return CanaryReport(decision=decision, min_interactions=policy.min_interactions, expired=expired, checks=checks,
                        candidate=candidate, incumbent=incumbent, alpha=policy.alpha)


def _checks(c: Arm, i: Arm, policy: CanaryPolicy, repairing: bool) -> list[Check]:
    back = policy.alpha / 4  # four ways to be shown worse: together within alpha
    settled = c.interactions, i.interactions
    persisted = rate_difference(c.persisted, c.interactions, i.persisted, i.interactions)
    dissatisfied = rate_difference(c.dissatisfied, c.interactions, i.dissatisfied, i.interactions)
    # shown better is shown within the margin too: one promoting claim is enough
    promoting, note = Claim("better", 0.0, +1, policy.alpha), "the primary metric: promoted only when better"
    if repairing:
        promoting = Claim("non_inferior", -policy.edit_persisted_rate, +1, policy.alpha)
        note = "the primary metric: it replaces a tainted version, so within the margin is enough"
    checks = [
        _check("edit_persisted_rate", c.persisted / c.interactions, i.persisted / i.interactions, persisted, RATE_TAU, policy,
               [promoting, Claim("inferior", -policy.edit_persisted_rate, -1, back)], settled, note=note),
        _check("dissatisfied_rate", c.dissatisfied / c.interactions, i.dissatisfied / i.interactions, dissatisfied, RATE_TAU, policy,
               [Claim("non_inferior", policy.dissatisfied_rate, -1, policy.alpha),
                Claim("inferior", policy.dissatisfied_rate, +1, back)], settled),
    ]
    if c.latency.n >= 2 and i.latency.n >= 2:
        latency = relative_mean_difference(c.latency, i.latency)
        checks.append(_check("latency", c.latency.mean, i.latency.mean, latency, LATENCY_TAU, policy,
                             [Claim("non_inferior", policy.latency, -1, policy.alpha), Claim("inferior", policy.latency, +1, back)],
                             settled, note="mean ms; the difference relative to the incumbent's mean", bounds=RELATIVE_MEAN_BOUNDS))
    if c.served and i.served:
        invalid = rate_difference(c.invalid, c.served, i.invalid, i.served)
        checks.append(_check("invalid_tool_call_rate", c.invalid / c.served, i.invalid / i.served, invalid, RATE_TAU, policy,
                             [Claim("inferior", policy.invalid_tool_call_rate, +1, back)], (c.served, i.served),
                             note="of every completion served; a detector: it rolls back a rise shown beyond the margin, "
                                  "and holds a promotion back only while the rise measured is beyond it"))
    return checks


def _check(name: str, candidate: float, reference: float, estimate: Estimate, tau: float, policy: CanaryPolicy,
           claims: list[Claim], samples: tuple[int, int], note: str = "", bounds: tuple[float, float] = RATE_BOUNDS) -> Check:
    tests = [claim.test(estimate, tau=tau) for claim in claims]
    margin = next(claim.null for claim in claims if claim.name == "inferior")
    low, high = confidence_sequence(estimate, alpha=2 * policy.alpha, tau=tau)  # each end a one-sided claim at alpha
    interval = max(low, bounds[0]), min(high, bounds[1])
    sequential = {"samples": {"candidate": samples[0], "incumbent": samples[1]}, "estimate": round(estimate.value, 4),
                  "tau": tau, "tests": tests}
    inferior = any(test["reached"] for test in tests if test["claim"] == "inferior")
    return Check("canary", name, candidate, reference, (round(interval[0], 4), round(interval[1], 4)), abs(margin),
                 not inferior, samples[0], note=note, sequential=sequential)


def _promotable(check: Check) -> bool:
    """Every claim a promotion needs is reached: better for the primary metric, within the
    margin (non_inferior) for the guardrails. A detector (invalid calls) has no such claim: it
    holds a promotion back only while the rise it measures lies beyond its margin."""
    tests = check.sequential["tests"]
    needed = [test for test in tests if test["claim"] != "inferior"]
    if not needed:
        return not any(test["on_its_side"] for test in tests)
    return all(test["reached"] for test in needed)
