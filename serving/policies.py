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

    tenant_preference: float = 0.05
    valid_tool_call_rate: float = 0.03
    correct_body_rate: float = 0.03
    right_call_rate: float = 0.05
    invalid_tool_call_rate: float = 0.02
    ask_rate_on_clear: float = 0.03
    edit_rate: float = 0.15  # loose: a better candidate asks less on clear prompts, so it edits more
    response_length: float = 0.25
    min_tenant_items: int = 20
    # The guardrails (valid, correct and right calls; invalid calls and asks on clear prompts,
    # also against the base model) must show the candidate within their tolerance: the global
    # suite is sampled again, up to this many passes, until they do or show it beyond; past the
    # last pass, a guardrail still undecided blocks the candidate.
    max_suite_passes: int = 8
    alpha: float = 0.05

    HELP: ClassVar[dict[str, str]] = {
        "tenant_preference": "How much the candidate may lose in telling this organization's good answers from bad ones "
                             "(AUC on its held-out feedback).",
        "valid_tool_call_rate": "How much the share of well-formed tool calls on the global suite may fall.",
        "correct_body_rate": "How much the share of correct edits on the global suite may fall.",
        "right_call_rate": "How much the share of the right kind of call (edit or question) on the global suite may fall.",
        "invalid_tool_call_rate": "How much malformed tool calls may rise (a reward-hacking detector).",
        "ask_rate_on_clear": "How much asking questions on prompts that need none may rise (a reward-hacking detector).",
        "edit_rate": "How much the share of edits may rise (a reward-hacking detector).",
        "response_length": "How much the mean response length may rise, relative to the incumbent's (a reward-hacking detector).",
        "min_tenant_items": "Held-out good and bad answers each, below which the organization's own check cannot judge.",
        "max_suite_passes": "Passes of the global suite the gates may sample until every guardrail is decided.",
        "alpha": "The chance, over every pass, that a guardrail lets through a candidate beyond its tolerance.",
    }

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

    share: float = 0.5
    # Below it a rate's normal approximation, which the sequential test rests on, is not to be trusted.
    min_interactions: int = 30
    edit_persisted_rate: float = 0.02
    dissatisfied_rate: float = 0.02
    latency: float = 0.25
    invalid_tool_call_rate: float = 0.02
    max_hours: float = 168.0
    alpha: float = 0.05

    HELP: ClassVar[dict[str, str]] = {
        "share": "The candidate's share of end users (sticky per user), fixed when the canary starts.",
        "min_interactions": "Interactions with a settled outcome each arm needs before any verdict.",
        "edit_persisted_rate": "How much the edit-persisted rate may drop.",
        "dissatisfied_rate": "How much dissatisfied follow-ups may rise.",
        "latency": "How much mean latency may rise, relative to the incumbent's.",
        "invalid_tool_call_rate": "How much invalid tool calls (of every completion served) may rise before the candidate is "
                                  "rolled back; a promotion waits only while the rise measured is beyond it.",
        "max_hours": "A canary without a verdict after this long stops; the incumbent keeps serving.",
        "alpha": "The chance of promoting a candidate that is not better, and of rolling back one that is not worse.",
    }

    # Both arms need users: on a sliver of them, one arm would take weeks to reach its minimum.
    RANGES: ClassVar[dict[str, tuple[float, float]]] = {
        "share": (0.01, 0.99), "min_interactions": (1, 100_000),
        **{name: RATE_CHANGE for name in ("edit_persisted_rate", "dissatisfied_rate", "latency", "invalid_tool_call_rate")},
        "max_hours": (0.01, 8760), "alpha": (0.001, 0.5),
    }

    def __post_init__(self) -> None:
        check(self)


@dataclass(frozen=True)
class Limits:
    """An organization's share of the gateway: these defaults, with settings.GATEWAY_LIMITS (from
    the environment) over them, and the organization's TrafficLimits row over those. A limit of
    0 suspends the organization's access."""

    requests_per_minute: int = 600
    tokens_per_minute: int = 200_000
    max_concurrent: int = 16

    HELP: ClassVar[dict[str, str]] = {
        "requests_per_minute": "Completions a minute through the gateway.",
        "tokens_per_minute": "Prompt and completion tokens a minute; a long answer is paid back over time.",
        "max_concurrent": "Completions in flight at once.",
    }

    RANGES: ClassVar[dict[str, tuple[float, float]]] = {
        name: (0, 2**31 - 1) for name in ("requests_per_minute", "tokens_per_minute", "max_concurrent")  # the columns' range
    }

    def __post_init__(self) -> None:
        check(self)
