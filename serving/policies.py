"""Serving's per-organization policies: what the gates tolerate, and how canaries run.

Frozen dataclasses checked against their RANGES tables (tenants.ranges). An organization's own
values are stored over the defaults (serving.overrides); the deployment's canary defaults come
from the environment (settings.CANARY_POLICY). Django-free, so that settings can bound them.
"""

from dataclasses import dataclass
from typing import ClassVar

from tenants.ranges import check

RATE_CHANGE = (0, 10)  # a tolerated change of a rate or a relative figure


@dataclass(frozen=True)
class Thresholds:
    """What each gate check tolerates; the defaults, unless the organization set its own."""

    tenant_preference: float = 0.05  # AUC the candidate may lose
    valid_tool_call_rate: float = 0.03  # rates the global suite may lose
    correct_body_rate: float = 0.03
    right_call_rate: float = 0.05
    invalid_tool_call_rate: float = 0.02  # rises the detectors tolerate
    ask_rate_on_clear: float = 0.03
    edit_rate: float = 0.15  # a better candidate asks less on clear prompts, so it edits more
    response_length: float = 0.25  # relative to the incumbent's mean length
    min_tenant_items: int = 20  # good and bad held-out items each, below which the tenant suite cannot judge
    # The guardrails (valid, correct and right calls; invalid calls and asks on clear prompts,
    # also against the base model) must show the candidate within their tolerance: the global
    # suite is sampled again, up to this many passes, until they do or show it beyond; past the
    # last pass, a guardrail still undecided blocks the candidate.
    max_suite_passes: int = 8
    alpha: float = 0.05  # the chance, over every look, that a guardrail passes a candidate beyond its tolerance

    RANGES: ClassVar[dict[str, tuple[float, float]]] = {
        **{name: RATE_CHANGE for name in ("tenant_preference", "valid_tool_call_rate", "correct_body_rate", "right_call_rate",
                                          "invalid_tool_call_rate", "ask_rate_on_clear", "edit_rate", "response_length")},
        "min_tenant_items": (1, 100_000), "max_suite_passes": (1, 32), "alpha": (0.001, 0.5),
    }

    def __post_init__(self) -> None:
        check(self)


@dataclass(frozen=True)
class CanaryPolicy:
    """How a canary runs and decides: these defaults, with settings.CANARY_POLICY's values (from
    the environment) over them, and the organization's own over those (`/api/v1/canary-policy`)."""

    share: float = 0.5  # of the organization's end users, fixed when the canary starts
    # Settled outcomes in each arm before any verdict: below it a rate's normal approximation,
    # which the sequential test rests on, is not to be trusted.
    min_interactions: int = 30
    edit_persisted_rate: float = 0.02  # margins: the drop tolerated
    dissatisfied_rate: float = 0.02  # the rise tolerated
    latency: float = 0.25  # the rise tolerated, relative to the incumbent's mean
    max_hours: float = 168.0  # a canary without a verdict after this long stops; the incumbent keeps serving
    alpha: float = 0.05  # the chance of promoting a candidate that is not better, and of rolling back one that is not worse

    # Both arms need users: on a sliver of them, one arm would take weeks to reach its minimum.
    RANGES: ClassVar[dict[str, tuple[float, float]]] = {
        "share": (0.01, 0.99), "min_interactions": (1, 100_000),
        "edit_persisted_rate": RATE_CHANGE, "dissatisfied_rate": RATE_CHANGE, "latency": RATE_CHANGE, "max_hours": (0.01, 8760),
        "alpha": (0.001, 0.5),
    }

    def __post_init__(self) -> None:
        check(self)


@dataclass(frozen=True)
class Limits:
    """An organization's share of the gateway: these defaults, with settings.GATEWAY_LIMITS (from
    the environment) over them, and the organization's TrafficLimits row over those. A limit of
    0 suspends the organization's access."""

    requests_per_minute: int = 600
    tokens_per_minute: int = 200_000  # prompt + completion tokens
    max_concurrent: int = 16  # requests in flight at once

    RANGES: ClassVar[dict[str, tuple[float, float]]] = {
        name: (0, 2**31 - 1) for name in ("requests_per_minute", "tokens_per_minute", "max_concurrent")  # the columns' range
    }

    def __post_init__(self) -> None:
        check(self)
