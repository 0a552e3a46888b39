"""An organization's own values for a policy's settings: the gates' thresholds, the canary policy.

A policy is a frozen dataclass of numbers whose defaults hold unless the organization set its
own. Only the keys an admin set are stored, so a default changed later still reaches every
organization that never set that key. The dataclass checks its own values (`__post_init__`,
with `check_range`), so every stored combination is one the policy accepts.
"""

from dataclasses import fields, replace
from typing import TypeVar

from django.db import models, transaction

from tenants.audit import audit_record
from tenants.errors import InvalidInput
from tenants.models import Organization

Policy = TypeVar("Policy")


def check_range(policy, name: str, low: float, high: float, *, whole: bool = False, open_ends: bool = False) -> None:
    """Raise ValueError, naming the setting, unless it is a number within [low, high] (or (low, high))."""
    value = getattr(policy, name)
    number = not isinstance(value, bool) and isinstance(value, int if whole else (int, float))
    if not number or not (low < value < high if open_ends else low <= value <= high):
        kind = "a whole number" if whole else "a number"
        raise ValueError(f"{name} must be {kind} between {low} and {high}{' (exclusive)' if open_ends else ''}, not {value!r}.")


def policy_for(*, org: Organization, model: type[models.Model], defaults: Policy) -> Policy:
    """The defaults with the organization's stored values over them; keys no longer known are ignored."""
    row = model.objects.for_org(org).first()
    return _with(defaults, row.values if row else {})


def policy_update(*, org: Organization, model: type[models.Model], defaults: Policy, changes, actor: str, action: str) -> Policy:
    """Store the named values over the ones already set, in one audited change, or refuse them all."""
    if not isinstance(changes, dict):
        raise InvalidInput("The body must be an object of settings.")
    known = [f.name for f in fields(defaults)]
    unknown = sorted(set(changes) - set(known))
    if unknown:
        raise InvalidInput(f"Unknown setting {unknown[0]!r} (known: {', '.join(known)}).", details={"unknown": unknown})
    with transaction.atomic():
        row, _ = model.objects.for_org(org).select_for_update().get_or_create(org=org)
        before = dict(row.values)
        row.values = {**before, **changes}
        try:
            policy = _with(defaults, row.values)
        except ValueError as error:
            raise InvalidInput(str(error)) from None
        row.save()
        audit_record(org=org, actor=actor, action=action, before=before, after=row.values)
    return policy


def _with(defaults: Policy, values: dict) -> Policy:
    known = {f.name for f in fields(defaults)}
    return replace(defaults, **{k: v for k, v in values.items() if k in known})
