"""Reads of an organization's training lists, for the API and the console alike."""

from django.db.models import QuerySet

from tenants.models import Organization
from training.models import Cycle, TrainingRun


def training_runs_list(*, org: Organization) -> QuerySet[TrainingRun]:
    """Without each run's lineage (its interaction ids): a list shows counts, a run's page the ids."""
    return TrainingRun.objects.for_org(org).select_related("incumbent", "candidate").defer("interaction_ids")


def cycles_list(*, org: Organization) -> QuerySet[Cycle]:
    return Cycle.objects.for_org(org).select_related("candidate", "incumbent")
