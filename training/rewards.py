"""Reward specs, and reward distillation: an organization's feedback turned into one number
per interaction.

The reward of an interaction is

    sum of weights[type] over its feedback events (a task_outcome event: weights[...] x value)
  - latency_penalty_per_s x its latency in seconds
  + its share of its background task's outcome: weights["task_outcome"] x value x share

where the shares of a task's n steps (its interactions in time order) sum to 1:
`uniform` gives each 1/n; `discounted` gives step i discount^(n-1-i), normalized, so that
the steps closest to the outcome get most of the credit. Feedback that arrives after a
cycle used its interaction is counted by the next cycle that uses it.
"""

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from django.db import transaction

from tenants.audit import audit_record
from tenants.models import FeedbackEvent, Organization
from tenants.ranges import check, known_changes, not_a_setting, policy_changed, policy_values, settings_of
from tenants.transactions import retried_on_integrity_error
from training.models import RewardSpec

EventType = Literal[tuple(FeedbackEvent.Type.values)]
OutcomeCredit = Literal[tuple(RewardSpec.OutcomeCredit.values)]


def _default_weights() -> dict[str, float]:
    return {
        # Each weight's measurements: docs/figures.md, "Reward weights".
        "edit_accepted": 0.25,  # a fast, weak signal: persisted or reverted comes later and says more
        # Mild: the dissatisfied follow-up that often comes with a rejection carries its cost. At
        # -0.5 a failed edit cost more than a needless question (a follow-up alone), and a
        # policy facing strict users learnt to ask on clear prompts, which the gates block.
        "edit_rejected": -0.2,
        "edit_persisted": 1.0,  # the code lived: the outcome this product optimizes
        # Above a refused edit's cost with its usual follow-up: the edit met every requirement.
        # At -1 a policy facing strict users still drifted towards asking.
        "edit_reverted": -0.5,
        "dissatisfied_followup": -1.0,
        "clarification_answered": 0.5,  # a question that needed asking
        # Below the worst edit (rejected, then a dissatisfied follow-up): at -1, a policy facing
        # strict users learnt malformed calls as the cheaper failure.
        "tool_call_invalid": -2.0,
        "interrupted": -0.25,
        "task_outcome": 1.0,  # times the outcome's value (0..1)
    }


@dataclass(frozen=True)
class RewardSpecValues:
    """One version of an organization's reward spec: its settings, and which version it is."""

    version: int = not_a_setting()  # 0: the default, never changed
    weights: dict[EventType, float] = field(default_factory=_default_weights)
    latency_penalty_per_s: float = 0.05  # a 2 s answer costs 0.1
    kl_coef: float = 0.02
    outcome_credit: OutcomeCredit = RewardSpec.OutcomeCredit.UNIFORM
    outcome_discount: float = 0.9
    created_at: object = not_a_setting(default=None)
    created_by: str = not_a_setting(default="")

    HELP: ClassVar[dict[str, str]] = {
        "weights": "Reward per feedback event of each type; task_outcome's is multiplied by the outcome's value.",
        "latency_penalty_per_s": "Subtracted per second of latency.",
        "kl_coef": "How strongly each update is pulled towards the base model.",
        "outcome_credit": "How a background task's outcome is spread over its steps.",
        "outcome_discount": "For discounted credit: step i of n gets discount^(n-1-i), normalized.",
    }
    RANGES: ClassVar[dict[str, tuple[float, float]]] = {
        "weights": (-10.0, 10.0), "latency_penalty_per_s": (0.0, 10.0), "kl_coef": (0.0, 1.0), "outcome_discount": (0.01, 1.0),
    }

    def __post_init__(self) -> None:
        check(self)


def reward_spec_get(*, org: Organization, version: int | None = None) -> RewardSpecValues:
    """The organization's current spec (its latest version, or the default), or the given version."""
    rows = RewardSpec.objects.for_org(org)
    row = rows.order_by("-version").first() if version is None else rows.filter(version=version).first()
    return RewardSpecValues(version=0) if row is None else _values(row)


def _values(row: RewardSpec) -> RewardSpecValues:
    return RewardSpecValues(version=row.version, **{name: getattr(row, name) for name in settings_of(RewardSpecValues)},
                            created_at=row.created_at, created_by=row.created_by)


def reward_spec_versions(*, org: Organization) -> list[tuple[RewardSpecValues, dict]]:
    """Every version of the organization's spec, newest first, each with what changed from the
    one before it (the default, for the first): {setting: (before, after)}, a weight as
    "weights.<event type>"."""
    versions = [RewardSpecValues(version=0)] + [_values(row) for row in RewardSpec.objects.for_org(org).order_by("version")]
    return [(newer, _changes(older, newer)) for older, newer in zip(versions, versions[1:])][::-1]


def _changes(older: RewardSpecValues, newer: RewardSpecValues) -> dict:
    changes = {}
    for name in settings_of(RewardSpecValues):
        before, after = getattr(older, name), getattr(newer, name)
        if name == "weights":
            changes.update({f"weights.{key}": (before.get(key), after.get(key)) for key in sorted(set(before) | set(after))
                            if before.get(key) != after.get(key)})
        elif before != after:
            changes[name] = (before, after)
    return changes


def reward_spec_update(*, org: Organization, changes, actor: str) -> RewardSpecValues:
    """A new version with `changes` applied (weights merge per event type), or PolicyError naming
    each bad setting; audited. Two updates racing for the same version number: the loser
    retries on top of the winner."""
    known_changes(RewardSpecValues, changes)
    return retried_on_integrity_error(lambda: _update(org, changes, actor))


def _update(org: Organization, changes: dict, actor: str) -> RewardSpecValues:
    with transaction.atomic():
        current = reward_spec_get(org=org)
        if isinstance(changes.get("weights"), dict):
            changes = {**changes, "weights": {**current.weights, **changes["weights"]}}
        values = policy_values(policy_changed(current, changes))
        if values == policy_values(current):  # a version that changes nothing would only crowd out the ones that did
            return current
        RewardSpec.objects.create(org=org, version=current.version + 1, created_by=actor, **values)
        audit_record(org=org, actor=actor, action="reward_spec.update", target=f"v{current.version + 1}",
                     before=policy_values(current), after=values)
    return reward_spec_get(org=org)


def interaction_reward(*, spec: RewardSpecValues, events: Iterable[tuple[str, float | None]], latency_ms: float | None,
                       outcome_share: float = 0.0, outcome_value: float | None = None) -> float:
    """The reward of one interaction from its feedback events ((type, value) pairs), its
    latency, and its share of its task's outcome (0 outside a task or before the outcome)."""
    reward = 0.0
    for event_type, value in events:
        weight = spec.weights.get(event_type, 0.0)
        reward += weight * (value if event_type == "task_outcome" and value is not None else 1.0)
    if latency_ms is not None:
        reward -= spec.latency_penalty_per_s * latency_ms / 1000.0
    if outcome_value is not None:
        reward += spec.weights.get("task_outcome", 0.0) * outcome_value * outcome_share
    return reward


def outcome_shares(*, steps: int, spec: RewardSpecValues) -> list[float]:
    """Each step's share of its task's outcome, in time order; they sum to 1."""
    if steps < 1:
        return []
    if spec.outcome_credit == RewardSpec.OutcomeCredit.UNIFORM:
        return [1.0 / steps] * steps
    raw = [spec.outcome_discount ** (steps - 1 - i) for i in range(steps)]
    return [share / sum(raw) for share in raw]
