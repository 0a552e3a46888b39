"""Each organization's share of the gateway (serving.policies.Limits): the deployment's
defaults (settings.GATEWAY_LIMITS, from the environment), with the organization's own over
them (a TrafficLimits row; a null column follows the default)."""

from django.conf import settings
from django.db import transaction

from serving.models import TrafficLimits
from serving.policies import Limits
from tenants.audit import audit_record
from tenants.models import Organization
from tenants.ranges import known_changes, settings_of


def traffic_limits_for(*, org: Organization) -> Limits:
    return _limits(TrafficLimits.objects.for_org(org).first())


def traffic_limits_update(*, org: Organization, changes, actor: str) -> Limits:
    """Set the named limits (null: back to the default), or refuse them all, naming each bad
    one (PolicyError); audited. The gateway applies a change within a second."""
    known_changes(Limits, changes)
    with transaction.atomic():
        row, _ = TrafficLimits.objects.for_org(org).select_for_update().get_or_create(org=org)
        before = _own(row)
        for name, value in changes.items():
            setattr(row, name, value)
        limits = _limits(row)  # refuses a value out of range before anything is saved
        if _own(row) != before:
            row.save()
            audit_record(org=org, actor=actor, action="traffic_limits.update", before=before, after=_own(row))
    return limits


def _own(row: TrafficLimits) -> dict:
    return {name: getattr(row, name) for name in settings_of(Limits)}


def _limits(row: TrafficLimits | None) -> Limits:
    defaults = settings.GATEWAY_LIMITS
    own = _own(row) if row is not None else {}
    return Limits(**{name: default if own.get(name) is None else own[name] for name, default in defaults.items()})
