"""Reads of an organization's serving lists, for the API and the console alike."""

from django.db.models import QuerySet

from serving.models import AdapterVersion, Alert
from tenants.models import Organization


def adapters_list(*, org: Organization) -> QuerySet[AdapterVersion]:
    """Newest version first, each with the version it was trained from."""
    return AdapterVersion.objects.for_org(org).select_related("parent").order_by("-version")


def alerts_list(*, org: Organization) -> QuerySet[Alert]:
    return Alert.objects.for_org(org).select_related("adapter")
