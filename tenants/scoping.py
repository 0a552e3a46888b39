"""Fail-closed tenant scoping.

Every model that holds one organization's data uses `TenantManager`. Its default queryset
raises instead of returning rows, so a forgotten filter is an exception in a test, not a leak
in production. Code asks for rows with `.for_org(org)`; the few system jobs that really span
organizations (authentication, the scheduler's tick, loading routed adapters into replicas)
say so with `.across_orgs()`.

Reverse relations (`interaction.feedback_events.all()`) stay allowed: they are scoped by an
object that was itself fetched through a scoped query.
"""

from django.db import models


class UnscopedQueryError(RuntimeError):
    """A query of tenant data named no organization."""


class TenantManager(models.Manager):
    def get_queryset(self):
        if getattr(self, "instance", None) is not None:  # a related manager: already scoped
            return super().get_queryset()
        raise UnscopedQueryError(
            f"{self.model.__name__} holds tenant data: query it with "
            f"{self.model.__name__}.objects.for_org(org)."
        )

    def for_org(self, org) -> models.QuerySet:
        if org is None or getattr(org, "pk", org) is None:
            raise UnscopedQueryError(f"{self.model.__name__}.objects.for_org() needs an organization.")
        return super().get_queryset().filter(org=org)

    def across_orgs(self) -> models.QuerySet:
        """All organizations' rows: only for system jobs that must span tenants."""
        return super().get_queryset()

    # Writes name their organization explicitly through the required `org` field.
    def create(self, **fields):
        if fields.get("org") is None and fields.get("org_id") is None:
            raise UnscopedQueryError(f"A new {self.model.__name__} needs an organization.")
        return super().get_queryset().create(**fields)
