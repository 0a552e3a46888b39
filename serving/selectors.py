"""Reads of an organization's serving lists, for the API and the console alike."""

from django.db.models import QuerySet

from serving.models import AdapterVersion, Alert, Route
from tenants.models import Organization


def adapters_list(*, org: Organization) -> QuerySet[AdapterVersion]:
    """Newest version first, each with the version it was trained from."""
    return AdapterVersion.objects.for_org(org).select_related("parent").order_by("-version")


def alerts_list(*, org: Organization) -> QuerySet[Alert]:
    return Alert.objects.for_org(org).select_related("adapter")


def open_alerts_count(*, org: Organization) -> int:
    return Alert.objects.for_org(org).filter(acknowledged_at__isnull=True).count()


def route_get(*, org: Organization) -> Route | None:
    """What serves the organization now (None, like a route with nothing set: the base model)."""
    return Route.objects.for_org(org).select_related("serving", "canary").first()
