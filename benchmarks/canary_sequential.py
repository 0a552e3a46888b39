"""The sequential canary on simulated canaries: its error rates, and how soon it decides.

    .venv/bin/python benchmarks/canary_sequential.py [--regime early|late] [--canaries 4000] [--horizon 2000] [--tick 10] [--seed 0] [--json]

Each simulated canary feeds `serving.canary.canary_decide`, the platform's own rule, `--tick`
settled outcomes per arm between looks, and stops at its first decision or after `--horizon`
outcomes per arm (the time limit). Each outcome is persisted, dissatisfied, an invalid tool call
or none of them, with the incumbent's rates of a demo organization at one stage of its loop
(`--regime`; invalid calls 1 % in both), and a latency drawn from a log-normal (mean 1,000 ms,
coefficient of variation 0.5):

- early (the default): persisted 10 %, dissatisfied 45 %; a lift of the persisted rate takes
  as much off the dissatisfied one, as the first cycles' candidates do;
- late: persisted 60 %, dissatisfied 3 %, which a lift leaves as it is, as in the last cycles
  of an 8-cycle demo run (docs/figures.md, run AA).

- A/A (the candidate exactly the incumbent): the false-promotion and false-rollback rates, to
  hold at or under the policy's alpha (5 % by default).
- True lifts of +5 and +15 points of edit-persisted rate: the share promoted and the median
  settled outcomes per arm at the decision.
- A lift of +5 points that also writes 8 (or 3) points more invalid tool calls, beyond the
  detector's margin of 2: the share rolled back, and how soon; the share promoted all the same.
"""

import argparse
import json
import math
import random
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from serving.canary_rule import PROMOTE, ROLL_BACK, WAIT, Arm, canary_decide  # noqa: E402
from serving.policies import CanaryPolicy  # noqa: E402
from serving.sequential import Moments  # noqa: E402

LATENCY_MS, LATENCY_CV = 1000.0, 0.5


@dataclass(frozen=True)
class Scenario:
    name: str
    lift: float  # points of edit-persisted rate the candidate adds; dissatisfied falls by as much
    latency_rise: float = 0.0  # relative
    invalid_rise: float = 0.0  # points of invalid tool calls the candidate adds


SCENARIOS = (Scenario("A/A", 0.0), Scenario("+5 points", 0.05), Scenario("+15 points", 0.15),
             Scenario("+5, invalid +8", 0.05, invalid_rise=0.08), Scenario("+5, invalid +3", 0.05, invalid_rise=0.03))


@dataclass(frozen=True)
class Regime:
    """The incumbent's rates, and how much of a lift the dissatisfied rate loses."""

    persisted: float
    dissatisfied: float
    dissatisfied_follows: float  # dissatisfied falls by this times the lift
    invalid: float = 0.01

    def candidate(self, scenario: Scenario) -> tuple[float, float, float]:
        return (self.persisted + scenario.lift, self.dissatisfied - self.dissatisfied_follows * scenario.lift,
                self.invalid + scenario.invalid_rise)


REGIMES = {"early": Regime(0.10, 0.45, 1.0), "late": Regime(0.60, 0.03, 0.0)}


class _Running:
    """An arm's counts as outcomes arrive."""

    def __init__(self):
        self.n = self.persisted = self.dissatisfied = self.invalid = 0
        self.sum = self.squares = 0.0

    def add(self, rng: random.Random, *, persisted: float, dissatisfied: float, invalid: float, latency_ms: float) -> None:
        draw = rng.random()
        self.n += 1
        self.persisted += draw < persisted
        self.dissatisfied += persisted <= draw < persisted + dissatisfied
        self.invalid += persisted + dissatisfied <= draw < persisted + dissatisfied + invalid
        sigma = math.sqrt(math.log(1 + LATENCY_CV**2))
        latency = rng.lognormvariate(math.log(latency_ms) - sigma**2 / 2, sigma)
        self.sum += latency
        self.squares += latency * latency

    def arm(self) -> Arm:
        mean = self.sum / self.n
        latency = Moments(self.n, mean, max(self.squares / self.n - mean * mean, 0.0))
        return Arm(self.n, self.persisted, self.dissatisfied, latency, served=self.n, invalid=self.invalid)


def simulate_canary(scenario: Scenario, *, regime: Regime, policy: CanaryPolicy, horizon: int, tick: int,
                    rng: random.Random) -> tuple[str, int]:
    """(decision, settled outcomes per arm when it was taken): "promote", "roll_back", or
    "expired" when the horizon came first."""
    candidate, incumbent = _Running(), _Running()
    persisted, dissatisfied, invalid = regime.candidate(scenario)
    while candidate.n < horizon:
        for _ in range(tick):
            candidate.add(rng, persisted=persisted, dissatisfied=dissatisfied, invalid=invalid,
                          latency_ms=LATENCY_MS * (1 + scenario.latency_rise))
            incumbent.add(rng, persisted=regime.persisted, dissatisfied=regime.dissatisfied, invalid=regime.invalid,
                          latency_ms=LATENCY_MS)
        decision = canary_decide(candidate.arm(), incumbent.arm(), policy=policy, out_of_time=False).decision
        if decision != WAIT:
            return decision, candidate.n
    return "expired", candidate.n


def simulate(scenario: Scenario, *, regime: Regime, canaries: int, policy: CanaryPolicy, horizon: int, tick: int,
             seed: int) -> dict:
    rng = random.Random(f"{seed}:{scenario.name}")
    outcomes = [simulate_canary(scenario, regime=regime, policy=policy, horizon=horizon, tick=tick, rng=rng)
                for _ in range(canaries)]
    decided = [n for decision, n in outcomes if decision != "expired"]
    return {
        "scenario": scenario.name, "canaries": canaries,
        "promoted": sum(d == PROMOTE for d, _ in outcomes) / canaries,
        "rolled_back": sum(d == ROLL_BACK for d, _ in outcomes) / canaries,
        "expired": sum(d == "expired" for d, _ in outcomes) / canaries,
        "median_outcomes_to_decision": statistics.median(decided) if decided else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--regime", choices=sorted(REGIMES), default="early", help="the incumbent's rates (module docstring)")
    parser.add_argument("--canaries", type=int, default=4000, help="per scenario (default 4000)")
    parser.add_argument("--horizon", type=int, default=2000, help="settled outcomes per arm before the time limit (default 2000)")
    parser.add_argument("--tick", type=int, default=10, help="settled outcomes per arm between looks (default 10)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    policy = CanaryPolicy()
    regime = REGIMES[args.regime]
    rows = [simulate(s, regime=regime, canaries=args.canaries, policy=policy, horizon=args.horizon, tick=args.tick, seed=args.seed)
            for s in SCENARIOS]
    if args.json:
        print(json.dumps({"regime": args.regime, "alpha": policy.alpha, "min_interactions": policy.min_interactions, "rows": rows}))
        return
    print(f"{args.regime}: incumbent persisted {regime.persisted:.0%}, dissatisfied {regime.dissatisfied:.0%}; "
          f"alpha {policy.alpha}, at least {policy.min_interactions} per arm, a look every {args.tick} outcomes per arm, "
          f"time limit at {args.horizon} per arm, {args.canaries} canaries each")
    for row in rows:
        median = row["median_outcomes_to_decision"]
        print(f"  {row['scenario']:<14} promoted {row['promoted']:6.1%}  rolled back {row['rolled_back']:6.1%}  "
              f"expired {row['expired']:6.1%}  median settled outcomes per arm at a decision: {median}")


if __name__ == "__main__":
    main()
