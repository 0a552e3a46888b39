"""An organization's own values for a policy's settings, stored over the defaults: the gates'
thresholds, the canary policy (serving.policies).

Only the keys an admin set are stored: a default changed later still reaches every
organization that never set that key, and setting a key to null makes it follow the default
again. Every stored combination is one the policy accepts (its RANGES table, tenants.ranges).
"""

from dataclasses import replace
from typing import TypeVar

from django.db import transaction

from serving.models import PolicyOverrides
from tenants.audit import audit_record
from tenants.models import Organization
from tenants.ranges import known_changes, settings_of

Policy = TypeVar("Policy")


def policy_for(*, org: Organization, model: type[PolicyOverrides], defaults: Policy) -> Policy:
    """The defaults with the organization's stored values over them; keys no longer known are ignored."""
    row = model.objects.for_org(org).first()
    return _with(defaults, row.values if row else {})


def policy_update(*, org: Organization, model: type[PolicyOverrides], defaults: Policy, changes, actor: str,
                  action: str) -> Policy:
    """Store the named values over the ones already set (null: back to the default), in one
    audited change, or refuse them all, naming each bad one."""
    known_changes(type(defaults), changes)
    # The row's lock serializes two admins' changes on PostgreSQL; SQLite's write transactions
    # (transaction_mode IMMEDIATE) hold the whole database, so there select_for_update is not needed.
    with transaction.atomic():
        row, _ = model.objects.for_org(org).select_for_update().get_or_create(org=org)
        before = dict(row.values)
        values = {k: v for k, v in {**before, **changes}.items() if v is not None}
        policy = _with(defaults, values)
        if values != before:
            row.values = values
            row.save()
            audit_record(org=org, actor=actor, action=action, before=before, after=values)
    return policy


def _with(defaults: Policy, values: dict) -> Policy:
    known = settings_of(type(defaults))
    return replace(defaults, **{k: v for k, v in values.items() if k in known})
