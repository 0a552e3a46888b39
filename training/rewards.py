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

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from django.db import IntegrityError, transaction

from tenants.audit import audit_record
from tenants.errors import InvalidInput
from tenants.models import FeedbackEvent, Organization
from training.models import RewardSpec

EVENT_TYPES = tuple(FeedbackEvent.Type.values)
MAX_WEIGHT = 10.0


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
    version: int  # 0: the default, never changed
    weights: dict[str, float] = field(default_factory=_default_weights)
    latency_penalty_per_s: float = 0.05  # a 2 s answer costs 0.1
    kl_coef: float = 0.02  # the pull of each update towards the base model
    outcome_credit: str = RewardSpec.OutcomeCredit.UNIFORM
    outcome_discount: float = 0.9  # for discounted credit
    created_at: object = None
    created_by: str = ""


FIELDS = ("weights", "latency_penalty_per_s", "kl_coef", "outcome_credit", "outcome_discount")


def reward_spec_get(*, org: Organization, version: int | None = None) -> RewardSpecValues:
    """The organization's current spec (its latest version, or the default), or the given version."""
    rows = RewardSpec.objects.for_org(org)
    row = rows.order_by("-version").first() if version is None else rows.filter(version=version).first()
    if row is None:
        return RewardSpecValues(version=0)
    return RewardSpecValues(version=row.version, **{name: getattr(row, name) for name in FIELDS},
                            created_at=row.created_at, created_by=row.created_by)


def reward_spec_validate(values: dict) -> None:
    unknown = set(values) - set(FIELDS)
    if unknown:
        raise InvalidInput(f"Unknown reward spec field(s): {', '.join(sorted(unknown))}.")
    for event_type, weight in values.get("weights", {}).items():
        if event_type not in EVENT_TYPES:
            raise InvalidInput(f"weights: {event_type!r} is not a feedback event type ({', '.join(EVENT_TYPES)}).")
        if not _number_within(weight, -MAX_WEIGHT, MAX_WEIGHT):
            raise InvalidInput(f"weights.{event_type} must be a number between -{MAX_WEIGHT:g} and {MAX_WEIGHT:g}.")
    if "latency_penalty_per_s" in values and not _number_within(values["latency_penalty_per_s"], 0.0, MAX_WEIGHT):
        raise InvalidInput(f"latency_penalty_per_s must be between 0 and {MAX_WEIGHT:g}.")
    if "kl_coef" in values and not _number_within(values["kl_coef"], 0.0, 1.0):
        raise InvalidInput("kl_coef must be between 0 and 1.")
    if "outcome_credit" in values and values["outcome_credit"] not in RewardSpec.OutcomeCredit.values:
        raise InvalidInput(f"outcome_credit must be one of {', '.join(RewardSpec.OutcomeCredit.values)}.")
    if "outcome_discount" in values and not (_number_within(values["outcome_discount"], 0.0, 1.0) and values["outcome_discount"] > 0):
        raise InvalidInput("outcome_discount must be greater than 0 and at most 1.")


def reward_spec_update(*, org: Organization, changes: dict, actor: str) -> RewardSpecValues:
    """A new version with `changes` applied (weights merge per event type); audited.
    Two updates racing for the same version number: the loser retries on top of the winner."""
    reward_spec_validate(changes)
    try:
        return _update(org, changes, actor)
    except IntegrityError:
        return _update(org, changes, actor)


def _update(org: Organization, changes: dict, actor: str) -> RewardSpecValues:
    with transaction.atomic():
        current = reward_spec_get(org=org)
        values = {name: getattr(current, name) for name in FIELDS}
        values.update({name: value for name, value in changes.items() if name != "weights"})
        values["weights"] = {**current.weights, **changes.get("weights", {})}
        RewardSpec.objects.create(org=org, version=current.version + 1, created_by=actor, **values)
        audit_record(org=org, actor=actor, action="reward_spec.update", target=f"v{current.version + 1}",
                     before={name: getattr(current, name) for name in FIELDS}, after=values)
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


def _number_within(value, low: float, high: float) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and low <= value <= high
