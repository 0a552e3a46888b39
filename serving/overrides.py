"""An organization's own values for a policy's settings: the gates' thresholds, the canary policy.

A policy is a frozen dataclass of numbers with a `RANGES` table (what each setting may be) and
a `__post_init__` that calls `check_ranges`, so every stored combination is one the policy
accepts. Only the keys an admin set are stored: a default changed later still reaches every
organization that never set that key, and setting a key to null makes it follow the default again.
"""

from dataclasses import fields, replace
from functools import cache
from typing import TypeVar, get_type_hints

from django.db import models, transaction

from tenants.audit import audit_record
from tenants.errors import InvalidInput
from tenants.models import Organization

Policy = TypeVar("Policy")


class PolicyError(ValueError):
    """Settings out of their range, each named with what it may be."""

    def __init__(self, problems: dict[str, str]):
        super().__init__(" ".join(problems.values()))
        self.problems = problems


@cache
def setting_types(policy_class: type) -> dict[str, type]:
    """Each setting's type, int (whole numbers) or float; read once per class, since every policy
    built (each gate run, each canary verdict) checks its values."""
    hints = get_type_hints(policy_class)
    return {f.name: hints[f.name] for f in fields(policy_class)}


def check_ranges(policy) -> None:
    """Raise PolicyError naming every setting that is not a number within its RANGES entry."""
    problems = {}
    for name, kind in setting_types(type(policy)).items():
        value, (low, high) = getattr(policy, name), policy.RANGES[name]
        number = not isinstance(value, bool) and isinstance(value, int if kind is int else (int, float))
        if not number or not low <= value <= high:
            problems[name] = f"{name} must be {'a whole number' if kind is int else 'a number'} from {low} to {high}, not {value!r}."
    if problems:
        raise PolicyError(problems)


def policy_for(*, org: Organization, model: type[models.Model], defaults: Policy) -> Policy:
    """The defaults with the organization's stored values over them; keys no longer known are ignored."""
    row = model.objects.for_org(org).first()
    return _with(defaults, row.values if row else {})


def policy_update(*, org: Organization, model: type[models.Model], defaults: Policy, changes, actor: str, action: str) -> Policy:
    """Store the named values over the ones already set (null: back to the default), in one
    audited change, or refuse them all."""
    if not isinstance(changes, dict):
        raise InvalidInput("The body must be an object of settings.")
    known = [f.name for f in fields(defaults)]
    unknown = sorted(set(changes) - set(known))
    if unknown:
        raise InvalidInput(f"Unknown setting {unknown[0]!r} (known: {', '.join(known)}).",
                           details={name: "unknown setting" for name in unknown})
    # The row's lock serializes two admins' changes on PostgreSQL; SQLite's write transactions
    # (transaction_mode IMMEDIATE) hold the whole database, so there select_for_update is not needed.
    with transaction.atomic():
        row, _ = model.objects.for_org(org).select_for_update().get_or_create(org=org)
        before = dict(row.values)
        values = {k: v for k, v in {**before, **changes}.items() if v is not None}
        try:
            policy = _with(defaults, values)
        except PolicyError as error:
            raise InvalidInput(str(error), details=error.problems) from None
        if values != before:
            row.values = values
            row.save()
            audit_record(org=org, actor=actor, action=action, before=before, after=values)
    return policy


def _with(defaults: Policy, values: dict) -> Policy:
    known = {f.name for f in fields(defaults)}
    return replace(defaults, **{k: v for k, v in values.items() if k in known})
