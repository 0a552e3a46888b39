"""Each organization's share of the gateway (serving.policies.Limits): the deployment's
defaults (settings.GATEWAY_LIMITS, from the environment), with the organization's own over
them (a TrafficLimits row; a null column follows the default)."""

from django.conf import settings
from django.db import transaction

from serving.models import TrafficLimits
from serving.policies import Limits
from tenants.audit import audit_record
from tenants.invitations import OPERATOR
from tenants.locking import OrgRows
from tenants.models import Organization
from tenants.ranges import PolicyError, known_changes, settings_of


def traffic_limits_for(*, org: Organization) -> Limits:
    """Read by every gateway process once a second for each organization with traffic: SQL built
    once (tenants/locking.py)."""
    rows = _limit_rows.read(org.pk)
    return _limits_from(dict(zip(settings_of(Limits), rows[0])) if rows else {})


_limit_rows = OrgRows(lambda org_id: TrafficLimits.objects.for_org(org_id).values_list(*settings_of(Limits)))


def traffic_limits_update(*, org: Organization, changes, actor: str) -> Limits:
    """The organization's admins: set the named limits (null: back to the default), or refuse
    them all, naming each bad one (PolicyError); audited. The gateway applies a change within a
    second. A limit may go up to the deployment's default or what the operator granted, no
    further: a limit is also every other organization's protection."""
    return _changed(org, changes, actor, grant=False)


def traffic_limits_grant(*, org: Organization, changes) -> Limits:
    """The platform's operator (`manage.py traffic_limits`): set the named limits, past the
    defaults too, which then become the most the organization's admins may set; audited."""
    return _changed(org, changes, OPERATOR, grant=True)


def _changed(org: Organization, changes, actor: str, *, grant: bool) -> Limits:
    known_changes(Limits, changes)
    with transaction.atomic():
        row, _ = TrafficLimits.objects.for_org(org).select_for_update().get_or_create(org=org)
        before = {**_own(row), "granted": row.granted}
        for name, value in changes.items():
            setattr(row, name, value)
        limits = _limits(row)  # refuses a value out of range before anything is saved
        if grant:
            row.granted = {name: value for name, value in (row.granted | changes).items()
                           if value is not None and value > settings.GATEWAY_LIMITS[name]}
        else:
            _refuse_beyond_grant(row, changes)
        after = {**_own(row), "granted": row.granted}
        if after != before:
            row.save()
            audit_record(org=org, actor=actor, action="traffic_limits.grant" if grant else "traffic_limits.update",
                         before=before, after=after)
    return limits


def _refuse_beyond_grant(row: TrafficLimits, changes: dict) -> None:
    problems = {}
    for name, value in changes.items():
        most = max(row.granted.get(name, 0), settings.GATEWAY_LIMITS[name])  # a grant is never less than the default
        if value is not None and value > most:
            problems[name] = (f"{name} may be at most {most:,} for this organization (the platform's default or what its "
                              f"operator granted); ask the operator for more.")
    if problems:
        raise PolicyError(problems)


def _own(row: TrafficLimits) -> dict:
    return {name: getattr(row, name) for name in settings_of(Limits)}


def _limits(row: TrafficLimits | None) -> Limits:
    return _limits_from(_own(row) if row is not None else {})


def _limits_from(own: dict) -> Limits:
    """The organization's own values (None or missing: the deployment's default)."""
    return Limits(**{name: default if own.get(name) is None else own[name] for name, default in settings.GATEWAY_LIMITS.items()})
